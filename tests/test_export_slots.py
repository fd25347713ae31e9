"""At most EXPORT_CONCURRENCY exports stream at once on the machine (analysis.exporting.slots, issue 31): one
asked while every slot is taken is turned away at once (503, Retry-After, a page that says to try again), with
nothing done and nothing in the audit trail; a slot is free again once its response is sent, cut off, or
dropped unsent. Another web worker is played by another thread: its open of the lock file conflicts with
this thread's as another process's does."""

import io
import threading
import zipfile
from contextlib import contextmanager

import pytest
from django.core.signals import request_finished
from django.db import close_old_connections
from django.http import StreamingHttpResponse
from django.test import override_settings

from analysis.exporting import slots
from audit.models import AuditEvent


def _download(client, slug: str, name: str = "everything.zip"):
    return client.get(f"/studies/{slug}/exports/{name}")


def _close(response) -> None:
    """What the server does when a client goes away mid-download; the test's database connection stays open
    (as Django's test client keeps it when it closes a response itself)."""
    request_finished.disconnect(close_old_connections)
    try:
        response.close()
    finally:
        request_finished.connect(close_old_connections)


@contextmanager
def _another_worker(slots_wanted: int = 1):
    """Another web worker holding ``slots_wanted`` slots (as many as it can get) until the block ends; yields
    how many it got. Its thread lives until then, so that no thread of the test takes its identity."""
    got: list = []
    ready, done = threading.Event(), threading.Event()

    def work():
        try:
            while len(got) < slots_wanted:
                got.append(slots._slot_lock())
        except slots.ExportsBusy:
            pass
        ready.set()
        done.wait()
        for slot in got:
            if slot:
                slot.release()

    thread = threading.Thread(target=work)
    thread.start()
    ready.wait()
    try:
        yield len(got)
    finally:
        done.set()
        thread.join()


def _slots_free() -> int:
    """How many slots another worker could take now."""
    with _another_worker(10) as got:
        return got


def test_a_download_waits_its_turn_while_the_slot_is_taken(owner_client, done_run):
    slug = done_run.study.slug
    with _another_worker():
        for name in ("everything.zip", "ratings.csv"):
            response = _download(owner_client, slug, name)
            assert response.status_code == 503
            assert response["Retry-After"] == str(slots.RETRY_AFTER_SECONDS)
            assert b"Another export is being prepared" in response.content
        assert not AuditEvent.objects.filter(action__startswith="export.").exists()
    response = _download(owner_client, slug)
    assert response.status_code == 200
    assert _slots_free() == 0  # held while the zip streams
    archive = zipfile.ZipFile(io.BytesIO(b"".join(response.streaming_content)))
    assert "ratings.csv" in archive.namelist()
    assert _slots_free() == 1  # the response closed once it was sent
    assert AuditEvent.objects.filter(action="export.zip").count() == 1


def test_a_response_left_unclosed_gives_its_slot_back_when_its_worker_takes_the_next_request(owner_client, done_run):
    first = _download(owner_client, done_run.study.slug, "ratings.csv")
    assert first.status_code == 200 and _slots_free() == 0
    # A worker serves one request at a time: the response nobody closed is over.
    assert _download(owner_client, done_run.study.slug, "participants.csv").status_code == 200
    slots.slots_release_held()  # as gunicorn's post_request does once a request is over
    assert _slots_free() == 1


def test_a_download_cut_off_by_the_client_frees_its_slot():
    # As a WSGI server does when the client goes away: the response is closed after its first chunk.
    response = StreamingHttpResponse(slots.streamed_in_slot(lambda: iter([b"first", b"second"])))
    assert next(iter(response.streaming_content)) == b"first"
    assert _slots_free() == 0
    _close(response)
    assert _slots_free() == 1


def test_a_response_never_sent_frees_its_slot_when_dropped():
    content = slots.streamed_in_slot(lambda: iter([b"never read"]))
    assert _slots_free() == 0
    del content
    assert _slots_free() == 1


def test_the_api_says_to_retry_after_a_few_seconds(owner_api, done_run):
    with _another_worker():
        response = owner_api.get(f"/api/studies/{done_run.study.slug}/exports/ratings.csv")
    assert response.status_code == 503
    assert response["Retry-After"] == str(slots.RETRY_AFTER_SECONDS)
    assert response.json()["detail"].startswith("Another export is being prepared")
    assert owner_api.get(f"/api/studies/{done_run.study.slug}/exports/ratings.csv").status_code == 200


@pytest.mark.parametrize("limit", [1, 2, 3])
def test_the_limit_is_a_setting(owner_client, done_run, limit):
    with override_settings(EXPORT_CONCURRENCY=limit):
        assert _slots_free() == limit
        with _another_worker(limit - 1):
            response = _download(owner_client, done_run.study.slug, "ratings.csv")
            assert response.status_code == 200 and _slots_free() == 0
            assert _download(owner_client, done_run.study.slug, "ratings.csv").status_code == 200  # its own turn
        assert _slots_free() == limit - 1
        slots.slots_release_held()
        assert _slots_free() == limit


def test_no_limit_when_the_setting_is_zero(owner_client, done_run):
    with override_settings(EXPORT_CONCURRENCY=0):
        assert slots._slot_take() is None
        with _another_worker(5):
            assert _download(owner_client, done_run.study.slug, "ratings.csv").status_code == 200


def test_a_thread_gives_back_only_the_slots_it_holds():
    with override_settings(EXPORT_CONCURRENCY=2), _another_worker(1):
        mine = slots._slot_take()
        assert _slots_free() == 0
        slots.slots_release_held()  # this thread's request is over: its slot only
        assert mine._handle is None and _slots_free() == 1
