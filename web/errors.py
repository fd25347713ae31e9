"""A database outage answers a fast "please retry" page (503), never a 500."""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable

from django.contrib.sessions.exceptions import SessionInterrupted
from django.db import DatabaseError, InterfaceError, OperationalError, connections
from django.http import HttpRequest, HttpResponse
from django.template.loader import render_to_string
from django.views.defaults import bad_request as django_bad_request
from django.views.defaults import server_error as django_server_error

logger = logging.getLogger(__name__)


class DatabaseUnavailableMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not isinstance(exception, (OperationalError, InterfaceError)) or not _is_connection_failure(exception):
            return None
        return please_retry(exception)


def please_retry(exception: Exception) -> HttpResponse:
    logger.warning("database unavailable: %s", exception.__class__.__name__)
    for connection in connections.all(initialized_only=True):
        # Drop the broken connection so the next request reconnects.
        connection.close_if_unusable_or_obsolete()
    body = render_to_string("503.html", request=None)
    response = HttpResponse(body, status=503)
    response["Retry-After"] = "5"
    return response


def server_error(request: HttpRequest) -> HttpResponse:
    """handler500: a database outage met outside a view (e.g. the session save
    after the response, in SessionMiddleware) also answers "please retry"."""
    exception = sys.exc_info()[1]
    if isinstance(exception, (OperationalError, InterfaceError)) and _is_connection_failure(exception):
        return please_retry(exception)
    return django_server_error(request)


def bad_request(request: HttpRequest, exception: Exception) -> HttpResponse:
    """handler400: when the database goes away between the view and the session
    save, Django's SessionMiddleware reports SessionInterrupted (a 400 "bad
    request"). The request was fine and the participant should simply submit
    again (answers are idempotent), so that is "please retry" too."""
    if isinstance(exception, SessionInterrupted):
        failure = _connection_failure_behind(exception)
        if failure is not None:
            return please_retry(failure)
    return django_bad_request(request, exception)


def _connection_failure_behind(exception: BaseException) -> DatabaseError | None:
    """The database connection failure this exception was raised while handling, if any."""
    seen: set[int] = set()
    current: BaseException | None = exception
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, (OperationalError, InterfaceError)) and _is_connection_failure(current):
            return current
        current = current.__cause__ or current.__context__
    return None


def _is_connection_failure(exception: DatabaseError) -> bool:
    text = str(exception).lower()
    # SQLite "database is locked" is a contention problem, also worth a retry.
    markers = ("connection", "could not connect", "server closed", "terminating", "database is locked",
               "the database system is", "timeout", "no route", "refused")
    return isinstance(exception, InterfaceError) or any(marker in text for marker in markers)
