"""Sliding session expiry (web/sessions.py): a session is saved when it changes
or when its last save is older than SESSION_REFRESH_SECONDS, not on every page."""

from __future__ import annotations

import time

from django.contrib.sessions.models import Session
from django.db import connection
from django.test.utils import CaptureQueriesContext

from web.sessions import SAVED_AT_KEY


def _session_writes(queries) -> list[str]:
    return [q["sql"] for q in queries if q["sql"].startswith(("UPDATE", "INSERT")) and "django_session" in q["sql"]]


def _stored_session(client) -> Session:
    return Session.objects.get(session_key=client.session.session_key)


def test_pages_of_an_unchanged_session_do_not_write_it(client, tide, steps):
    steps.start(client, tide)
    before = _stored_session(client)
    with CaptureQueriesContext(connection) as queries:
        for _ in range(3):
            assert client.get("/s/tide/page/").status_code == 200
    assert _session_writes(queries) == []
    after = _stored_session(client)
    assert (after.expire_date, after.session_data) == (before.expire_date, before.session_data)


def test_a_stale_session_is_saved_again_so_it_stays_alive(client, tide, steps, settings):
    steps.start(client, tide)
    session = client.session
    stale = int(time.time()) - settings.SESSION_REFRESH_SECONDS - 1
    session[SAVED_AT_KEY] = stale
    session.save()
    before = _stored_session(client).expire_date
    with CaptureQueriesContext(connection) as queries:
        assert client.get("/s/tide/page/").status_code == 200
    assert len(_session_writes(queries)) == 1
    assert _stored_session(client).expire_date > before
    assert client.session[SAVED_AT_KEY] > stale


def test_a_changed_session_is_saved_and_stamped(client, tide):
    with CaptureQueriesContext(connection) as queries:
        client.get(f"/s/tide/?PROLIFIC_PID={'b' * 24}&STUDY_ID=st&SESSION_ID=se")
    assert len(_session_writes(queries)) == 1
    assert abs(client.session[SAVED_AT_KEY] - time.time()) < 60


def test_requests_that_never_read_the_session_create_none(client, db):
    assert client.get("/healthz").status_code == 200
    assert Session.objects.count() == 0


def test_the_store_reads_what_django_s_database_store_reads(db):
    """web.session_store reads a session with a prepared statement; what it loads, and which keys it drops,
    are Django's own database store's."""
    from datetime import timedelta

    from django.contrib.sessions.backends.db import SessionStore as DjangoStore
    from django.utils import timezone

    from web.session_store import SessionStore

    live = SessionStore()
    live.update({"participant": 7, "note": "é ü"})
    live.save()
    lapsed = SessionStore()
    lapsed["participant"] = 8
    lapsed.save()
    Session.objects.filter(session_key=lapsed.session_key).update(expire_date=timezone.now() - timedelta(seconds=1))

    for key in (live.session_key, lapsed.session_key, "n" * 32):
        ours, django = SessionStore(key), DjangoStore(key)
        with CaptureQueriesContext(connection) as queries:
            loaded = ours.load()
        assert loaded == django.load()
        assert ours.session_key == django.session_key  # None for the lapsed and the unknown keys
        assert len(queries) == 1
    assert SessionStore(live.session_key).load() == {"participant": 7, "note": "é ü"}
    assert SessionStore(lapsed.session_key).load() == {}


def test_the_site_runs_on_it(client, tide, steps, settings):
    assert settings.SESSION_ENGINE == "web.session_store"
    steps.start(client, tide)
    assert client.session.__class__.__module__ == "web.session_store"
    assert client.get("/s/tide/page/").status_code == 200
