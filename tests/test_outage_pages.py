"""The error handlers tell a database outage ("please retry", 503) from bad input (400).

tests/test_faults.py restarts a real PostgreSQL under traffic; these pin the
handlers' decisions for the exception chains that outage produces.
"""

from __future__ import annotations

import pytest
from django.contrib.sessions.backends.base import UpdateError
from django.contrib.sessions.exceptions import SessionInterrupted
from django.db import DatabaseError, OperationalError
from django.test import RequestFactory

from web.errors import bad_request

# please_retry closes the connections a failure left unusable; after other tests
# the default connection is open, and checking it needs database access.
pytestmark = pytest.mark.django_db


def _session_interrupted(cause: Exception | None) -> SessionInterrupted:
    """SessionInterrupted as SessionMiddleware raises it when the session save fails."""
    try:
        try:
            try:
                if cause is not None:
                    raise cause
                raise UpdateError  # the session row was deleted by a concurrent logout
            except DatabaseError:
                raise UpdateError  # noqa: B904 - as django.contrib.sessions.backends.db does
        except UpdateError:
            raise SessionInterrupted("The request's session was deleted before the request completed.")
    except SessionInterrupted as exc:
        return exc


def test_a_session_save_cut_by_a_database_outage_answers_please_retry():
    outage = OperationalError('connection failed: connection to server at "127.0.0.1", port 5433 failed: '
                              "server closed the connection unexpectedly")
    response = bad_request(RequestFactory().post("/s/tide/page/"), _session_interrupted(outage))
    assert response.status_code == 503
    assert response["Retry-After"] == "5"
    assert b"Please try again" in response.content


def test_a_session_deleted_by_a_concurrent_logout_stays_a_400():
    response = bad_request(RequestFactory().get("/studies/"), _session_interrupted(None))
    assert response.status_code == 400


def test_the_url_configuration_uses_the_outage_aware_handlers():
    from config import urls

    assert urls.handler400 == "web.errors.bad_request"
    assert urls.handler500 == "web.errors.server_error"
