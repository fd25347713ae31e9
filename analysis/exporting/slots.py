"""At most ``EXPORT_CONCURRENCY`` exports stream at once on this machine, whatever the process (issue 31).

An export streams from a web worker for seconds, on a core the participants' pages need. Each export holds
one of the machine's export slots, a file lock under ``EXPORT_SLOTS_DIR``, from the moment it is accepted until
its response is closed (sent, cut off by the client, or dropped unsent); a request that finds every slot taken
is turned away at once with "try again in a few seconds", before any work is done. The slots are per machine,
as the cores they protect are: a lock dies with the process that held it.
"""

from __future__ import annotations

import fcntl
import os
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path

from django.conf import settings

#: What a turned-away download is told to wait before it asks again (the Retry-After header).
RETRY_AFTER_SECONDS = 5


class ExportsBusy(Exception):
    """Every export slot of this machine is taken."""

    retry_after = RETRY_AFTER_SECONDS


class _Slot:
    def __init__(self, handle: int) -> None:
        self._handle: int | None = handle
        self.thread = threading.get_ident()
        with _held_lock:
            _held.add(self)

    def release(self) -> None:
        if self._handle is not None:
            handle, self._handle = self._handle, None
            with _held_lock:
                _held.discard(self)
            os.close(handle)  # closing the file drops its lock


# The slots this process holds: a thread's are given back after each of its requests, whatever became of the
# response (config/gunicorn.conf.py's post_request; the tests after each test).
_held: set[_Slot] = set()
_held_lock = threading.RLock()  # shared by a threaded worker's threads; re-entered by a release from __del__


def slots_release_held() -> None:
    """Give back the slots the calling thread still holds: its request is over."""
    me = threading.get_ident()
    with _held_lock:
        mine = [slot for slot in _held if slot.thread == me]
    for slot in mine:
        slot.release()


def _slot_take() -> _Slot | None:
    """One free slot, locked, or None when there is no limit."""
    # A thread serves one request at a time: a slot it still holds belongs to a response of an earlier request
    # that nobody closed (a test reading only the status, say), never to a second export of its own.
    slots_release_held()
    return _slot_lock()


def _slot_lock() -> _Slot | None:
    limit = settings.EXPORT_CONCURRENCY
    if limit <= 0:
        return None
    folder = Path(settings.EXPORT_SLOTS_DIR)
    folder.mkdir(parents=True, exist_ok=True)
    for number in range(limit):
        handle = os.open(folder / f"slot-{number}.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(handle)
            continue
        return _Slot(handle)
    raise ExportsBusy


class _StreamedInSlot:
    """The export's chunks, holding the slot until Django closes the response (or it is garbage collected
    unsent: a response built and never sent must not keep the slot)."""

    def __init__(self, slot: _Slot | None, chunks: Iterable[bytes]) -> None:
        self._slot, self._chunks = slot, chunks

    def __iter__(self) -> Iterator[bytes]:
        return iter(self._chunks)

    def close(self) -> None:
        try:
            close_chunks = getattr(self._chunks, "close", None)
            if close_chunks:
                close_chunks()
        finally:
            if self._slot:
                self._slot.release()

    def __del__(self) -> None:
        if self._slot:
            self._slot.release()


def streamed_in_slot(make_chunks) -> _StreamedInSlot:
    """``make_chunks()`` (the export's bytes, built lazily) holding a slot; raises ``ExportsBusy`` at once,
    before ``make_chunks`` is called, when every slot is taken."""
    slot = _slot_take()
    try:
        return _StreamedInSlot(slot, make_chunks())
    except BaseException:
        if slot:
            slot.release()
        raise
