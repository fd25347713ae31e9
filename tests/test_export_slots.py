"""At most EXPORT_CONCURRENCY exports stream at once on the machine (analysis.exporting.slots, issue 31): one
asked while every slot is taken is turned away at once (503, Retry-After, a page that says to try again), with
nothing done and nothing in the audit trail; a slot is free again once its response is sent, cut off, or
dropped unsent. A slot taken here through a file of its own stands for another web worker's: two opens of the
lock file conflict as two processes do."""

import gc
import io
import zipfile

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


def _slot_is_free() -> bool:
    try:
        slot = slots._slot_take()
    except slots.ExportsBusy:
        return False
    slot.release()
    return True


def test_a_download_waits_its_turn_while_the_slot_is_taken(owner_client, done_run):
    slug = done_run.study.slug
    elsewhere = slots._slot_take()
    try:
        for name in ("everything.zip", "ratings.csv"):
            response = _download(owner_client, slug, name)
            assert response.status_code == 503
            assert response["Retry-After"] == str(slots.RETRY_AFTER_SECONDS)
            assert b"Another export is being prepared" in response.content
        assert not AuditEvent.objects.filter(action__startswith="export.").exists()
    finally:
        elsewhere.release()
    response = _download(owner_client, slug)
    assert response.status_code == 200
    assert not _slot_is_free()  # held while the zip streams
    archive = zipfile.ZipFile(io.BytesIO(b"".join(response.streaming_content)))
    assert "ratings.csv" in archive.namelist()
    assert _slot_is_free()  # the response closed once it was sent
    assert AuditEvent.objects.filter(action="export.zip").count() == 1


def test_a_response_dropped_unsent_frees_its_slot(owner_client, done_run):
    response = _download(owner_client, done_run.study.slug, "ratings.csv")
    assert response.status_code == 200 and not _slot_is_free()
    del response
    gc.collect()
    assert _slot_is_free()


def test_a_download_cut_off_by_the_client_frees_its_slot():
    # As a WSGI server does when the client goes away: the response is closed after its first chunk.
    response = StreamingHttpResponse(slots.streamed_in_slot(lambda: iter([b"first", b"second"])))
    assert next(iter(response.streaming_content)) == b"first"
    assert not _slot_is_free()
    _close(response)
    assert _slot_is_free()


def test_the_api_says_to_retry_after_a_few_seconds(owner_api, done_run):
    elsewhere = slots._slot_take()
    try:
        response = owner_api.get(f"/api/studies/{done_run.study.slug}/exports/ratings.csv")
    finally:
        elsewhere.release()
    assert response.status_code == 503
    assert response["Retry-After"] == str(slots.RETRY_AFTER_SECONDS)
    assert response.json()["detail"].startswith("Another export is being prepared")
    assert owner_api.get(f"/api/studies/{done_run.study.slug}/exports/ratings.csv").status_code == 200


@pytest.mark.parametrize("limit, at_once", [(2, 2), (0, 5)])
def test_the_limit_is_a_setting(owner_client, done_run, limit, at_once):
    with override_settings(EXPORT_CONCURRENCY=limit):
        held = [_download(owner_client, done_run.study.slug, "ratings.csv") for _ in range(at_once)]
        assert [r.status_code for r in held] == [200] * at_once
        if limit:
            assert _download(owner_client, done_run.study.slug, "ratings.csv").status_code == 503
        for response in held:
            _close(response)
        assert _download(owner_client, done_run.study.slug, "ratings.csv").status_code == 200


def test_a_thread_gives_back_only_the_slots_it_holds():
    import threading

    with override_settings(EXPORT_CONCURRENCY=2):
        theirs = []
        thread = threading.Thread(target=lambda: theirs.append(slots._slot_take()))
        thread.start()
        thread.join()
        mine = slots._slot_take()
        with pytest.raises(slots.ExportsBusy):
            slots._slot_take()
        slots.slots_release_held()  # this thread's request is over: its slot only
        assert _slot_is_free()
        third = slots._slot_take()
        with pytest.raises(slots.ExportsBusy):
            slots._slot_take()
        third.release()
        theirs[0].release()
        assert mine._handle is None
