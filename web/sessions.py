"""Sliding session expiry without a database write on every request.

``SESSION_SAVE_EVERY_REQUEST`` would keep a session alive for
``SESSION_COOKIE_AGE`` of inactivity, but at the price of an UPDATE (three
queries with its savepoint) on every page a participant loads, which is a
sizeable share of a survey page's cost during a launch surge. This middleware
saves an unchanged session only when its last save is older than
``SESSION_REFRESH_SECONDS``, so a session ends after between
``SESSION_COOKIE_AGE - SESSION_REFRESH_SECONDS`` and ``SESSION_COOKIE_AGE``
seconds of inactivity.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse

SAVED_AT_KEY = "_saved_at"


class SessionRefreshMiddleware:
    """Marks a used, non-empty session as modified when its last save is stale.

    Sits after ``SessionMiddleware`` so that middleware saves what this one marks.
    Sessions a request never read stay untouched (static files, /healthz).
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        session = getattr(request, "session", None)
        if session is None or not session.accessed or session.is_empty():
            return response
        now = int(time.time())
        if session.modified or now - int(session.get(SAVED_AT_KEY, 0)) >= settings.SESSION_REFRESH_SECONDS:
            session[SAVED_AT_KEY] = now
        return response
