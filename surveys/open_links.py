"""Open links: anyone with the study's link takes part, anonymously.

Visiting ``/s/<slug>/`` of a study whose ``recruitment.mode`` is ``open`` starts
a participant whose id the server draws (nothing comes from the visitor). The id
is kept in a signed cookie of that study's path, so one browser is one
participant: coming back, even after the session ended, resumes them, and a
finisher sees their completion page again instead of starting over. New starts
are limited per address (``OPEN_LINK_STARTS_PER_HOUR``), counted by the shared
atomic counters of ``web.ratelimit``, so the limit holds across workers and under
bursts of parallel starts.
"""

from __future__ import annotations

import secrets

from django.conf import settings
from django.http import HttpRequest, HttpResponse

from web.ratelimit import digest, hit, release

from .models import Study

ID_PREFIX = "open-"
COOKIE_MAX_AGE = 180 * 24 * 60 * 60  # longer than any study stays open
_SALT = "surveys.open_links"
_WINDOW_SECONDS = 60 * 60


def _cookie_name(study: Study) -> str:
    return f"hev_open_{study.slug}"


def returning_id(request: HttpRequest, study: Study) -> str | None:
    """The id this browser was given for ``study``, or None (never here, or a cookie not ours)."""
    value = request.get_signed_cookie(_cookie_name(study), default=None, salt=_SALT, max_age=COOKIE_MAX_AGE)
    return value if value and value.startswith(ID_PREFIX) else None


def remember(response: HttpResponse, study: Study, external_id: str) -> HttpResponse:
    response.set_signed_cookie(
        _cookie_name(study), external_id, salt=_SALT, max_age=COOKIE_MAX_AGE, path=f"/s/{study.slug}/",
        secure=settings.SESSION_COOKIE_SECURE, httponly=True, samesite="Lax",
    )
    return response


def _starts_key(request: HttpRequest, study: Study) -> str:
    address = request.META.get("REMOTE_ADDR", "unknown")
    return f"open-starts:{digest(f'{study.pk}:{address}')}"


def new_participant_id(request: HttpRequest, study: Study) -> str | None:
    """A fresh anonymous id, counted against this address's new starts; None once they are used up."""
    key = _starts_key(request, study)
    if hit(key, _WINDOW_SECONDS) > settings.OPEN_LINK_STARTS_PER_HOUR:
        release(key)  # a refused start is no start
        return None
    return ID_PREFIX + secrets.token_hex(16)
