"""Error answers: a database outage answers a fast "please retry" page (503), never a 500;
under /api/ every error Django itself answers (an unmatched URL, a server error...) is
JSON ``{"detail": ...}`` like the API's own errors, never an HTML page."""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable

from django.contrib.sessions.exceptions import SessionInterrupted
from django.db import DatabaseError, InterfaceError, OperationalError, connections
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.template.loader import render_to_string
from django.views.defaults import bad_request as django_bad_request
from django.views.defaults import page_not_found as django_page_not_found
from django.views.defaults import permission_denied as django_permission_denied
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
        return please_retry(exception, request=request)


def please_retry(exception: Exception, *, request: HttpRequest | None = None) -> HttpResponse:
    logger.warning("database unavailable: %s", exception.__class__.__name__)
    for connection in connections.all(initialized_only=True):
        # Drop the broken connection so the next request reconnects.
        connection.close_if_unusable_or_obsolete()
    if _is_api(request):
        response = _api_error("The database is unavailable; retry in a few seconds.", status=503)
    else:
        response = HttpResponse(render_to_string("503.html", request=None), status=503)
    response["Retry-After"] = "5"
    return response


def server_error(request: HttpRequest) -> HttpResponse:
    """handler500: a database outage met outside a view (e.g. the session save
    after the response, in SessionMiddleware) also answers "please retry"."""
    exception = sys.exc_info()[1]
    if isinstance(exception, (OperationalError, InterfaceError)) and _is_connection_failure(exception):
        return please_retry(exception, request=request)
    if _is_api(request):
        return _api_error("Server error.", status=500)
    return django_server_error(request)


def page_not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    """handler404: a path under /api/ that matches no endpoint (e.g. ``runs/abc/``
    where the run id must be a number) is a JSON 404 as the endpoints' own."""
    if _is_api(request):
        return _api_error("Not found.", status=404)
    return django_page_not_found(request, exception)


def permission_denied(request: HttpRequest, exception: Exception) -> HttpResponse:
    """handler403: JSON under /api/ (e.g. a CSRF failure of a session-signed request)."""
    if _is_api(request):
        return _api_error("You do not have permission to perform this action.", status=403)
    return django_permission_denied(request, exception)


def bad_request(request: HttpRequest, exception: Exception) -> HttpResponse:
    """handler400: when the database goes away between the view and the session
    save, Django's SessionMiddleware reports SessionInterrupted (a 400 "bad
    request"). The request was fine and the participant should simply submit
    again (answers are idempotent), so that is "please retry" too."""
    if isinstance(exception, SessionInterrupted):
        failure = _connection_failure_behind(exception)
        if failure is not None:
            return please_retry(failure, request=request)
    if _is_api(request):
        return _api_error("Bad request.", status=400)
    return django_bad_request(request, exception)


def _is_api(request: HttpRequest | None) -> bool:
    return request is not None and request.path_info.startswith("/api/")


def _api_error(detail: str, *, status: int) -> JsonResponse:
    return JsonResponse({"detail": detail}, status=status)


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
