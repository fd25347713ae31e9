"""Compute a run's parts side by side on this machine's cores, in forked processes, without a broker.

Where every worker is on one machine (no broker: tasks in-process; or the filesystem broker of ``bin/run``),
sending a run's parts through the broker only adds its polling to each hop, and tasks in-process compute
them one after the other on one core. Here the run's own process forks one process per core; each child
computes parts on the frames it inherited (nothing is pickled on the way in) and sends back the part's
tables, which the parent lands as each arrives (``analysis.running.runs``). The children never touch the
database: they run the pure statistics step only.

The children are forked, so they see the parent's code as it is, monkeypatches included, and exit without
running the parent's clean-ups (``os._exit``): the database connection they inherited is left to the parent,
and a child that asks for the database is refused (``ChildUsedTheDatabase``).
On Linux they are also killed with their parent (``PR_SET_PDEATHSIG``): a run's process killed at its time
limit leaves no child behind. That is why they may be forked inside a worker process of celery's prefork
pool too, which billiard marks daemonic (multiprocessing refuses children to a daemonic process, lest they
outlive it).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import multiprocessing
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from contextlib import contextmanager
from types import TracebackType
from typing import Generic, TypeVar

from django.conf import settings

Item = TypeVar("Item")
Result = TypeVar("Result")

# What the children call, set before they are forked: a closure over the run's frames is not picklable, and
# need not be, since a forked child has it already.
_function: Callable | None = None
_items: Sequence | None = None
_parent_pid = 0
# One computation forks at a time per process; another one (a second run in another thread of one web
# process) computes its items in order, here.
_forking = threading.Lock()


_PR_SET_PDEATHSIG = 1  # linux/prctl.h


def _libc_prctl() -> Callable | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True).prctl
    except (OSError, AttributeError):
        return None


def processes_available() -> int:
    """How many processes a run may compute its parts in here: ``ANALYSIS_PROCESSES`` (default: the cores);
    1 where processes cannot be forked (no ``fork`` start method), or not safely (a daemonic process where
    children cannot be tied to their parent's life)."""
    if "fork" not in multiprocessing.get_all_start_methods():
        return 1
    if multiprocessing.current_process().daemon and _libc_prctl() is None:
        return 1
    return max(1, int(getattr(settings, "ANALYSIS_PROCESSES", 0) or os.cpu_count() or 1))


# The database connections a child inherited: held, never closed nor finalized there (closing one would end
# the parent's session on the server, which shares the socket).
_inherited_connections: list = []


class ChildUsedTheDatabase(RuntimeError):
    """A function computed side by side asked for the database: only the parent may use it."""


def _refuse_the_database(*args: object, **kwargs: object) -> None:
    raise ChildUsedTheDatabase("a run's side-by-side process asked for the database: its parent's connection "
                               "is not its own, and only the parent reads and writes")


def _child_setup() -> None:
    """Each child's first step: (Linux) the kernel kills it when the process that forked it ends; and the
    database connections it inherited are put out of its reach, so that a function that asks for the
    database fails at once instead of talking over the parent's connection."""
    prctl = _libc_prctl()
    if prctl is not None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != _parent_pid:  # the parent ended before the call above
            os._exit(1)
    from django.db import connections

    for connection in connections.all():
        _inherited_connections.append(connection.connection)
        connection.connection = None
        connection.ensure_connection = _refuse_the_database


@contextmanager
def _children_allowed() -> Iterator[None]:
    """Lift a daemonic process's mark while its children are forked (they die with it: ``_child_setup``)."""
    config = multiprocessing.current_process()._config
    daemonic = config.get("daemon")
    config["daemon"] = False
    try:
        yield
    finally:
        config["daemon"] = daemonic


def _call(index: int):  # noqa: ANN202 - runs in a child: whatever the function returns
    return _function(_items[index])


class SideBySide(Generic[Item, Result]):
    """``function(item)`` for every item, computed by up to ``processes`` forked processes (default
    ``processes_available()``) from the moment it is entered, each child taking the next item in ``items``'
    order when it is free: give the longest first. ``results()`` yields ``(item, result)`` as they finish.

    With one process, or one item, or while another computation of this process is forking, the items are
    computed here, in order, as ``results()`` is read. An exception raised by ``function`` in a child is
    raised by ``results()``; so is ``BrokenProcessPool`` if a child dies (killed, out of memory). On leaving
    (also on an exception) the children finish the item in hand and stop; the items not begun are dropped.
    """

    def __init__(self, function: Callable[[Item], Result], items: Sequence[Item], *, processes: int | None = None):
        self.function = function
        self.items = list(items)
        self.processes = min(processes_available() if processes is None else processes, len(self.items))
        self._executor: ProcessPoolExecutor | None = None
        self._index_of: dict[Future, int] = {}

    def __enter__(self) -> SideBySide[Item, Result]:
        global _function, _items, _parent_pid
        if self.processes > 1 and _forking.acquire(blocking=False):
            _function, _items, _parent_pid = self.function, self.items, os.getpid()
            try:
                self._executor = ProcessPoolExecutor(max_workers=self.processes, initializer=_child_setup,
                                                     mp_context=multiprocessing.get_context("fork"))
                # The children are forked at the first submission, all at once (the fork start method).
                with _children_allowed():
                    self._index_of = {self._executor.submit(_call, index): index
                                      for index in range(len(self.items))}
            except BaseException:
                self._release()
                raise
        return self

    @property
    def forked(self) -> bool:
        """Whether the items are computed by forked processes (False: here, in order)."""
        return self._executor is not None

    def results(self) -> Iterator[tuple[Item, Result]]:
        if self._executor is None:
            for item in self.items:
                yield item, self.function(item)
            return
        remaining = set(self._index_of)
        while remaining:
            done, remaining = wait(remaining, return_when=FIRST_COMPLETED)
            for future in sorted(done, key=self._index_of.get):
                yield self.items[self._index_of[future]], future.result()

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        if self._executor is not None:
            self._release()

    def _release(self) -> None:
        global _function, _items
        try:
            if self._executor is not None:
                self._executor.shutdown(wait=True, cancel_futures=True)
        finally:
            self._executor = None
            _function = _items = None
            _forking.release()
