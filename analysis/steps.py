"""Timing the steps of a run and marking the current one on its row (for the monitor)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager


class RunSteps:
    """``mark(name)`` records the step on the run (and raises if the run was taken over)."""

    def __init__(self, mark: Callable[[str], None]):
        self.mark = mark
        self.timings: dict[str, float] = {}
        self.current = "start"

    @contextmanager
    def step(self, name: str) -> Iterator[None]:
        self.current = name
        self.mark(name)
        began = time.perf_counter()
        yield
        self.timings[name] = round(time.perf_counter() - began, 3)
