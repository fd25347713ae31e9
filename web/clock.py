"""The one clock the services read, so simulated participants can take
realistic 10-75 minutes without anyone waiting."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime

from django.utils import timezone

_clock: Callable[[], datetime] = timezone.now


def now() -> datetime:
    return _clock()


@contextmanager
def clock_set_to(source: Callable[[], datetime]) -> Iterator[None]:
    """Use ``source`` as the current time inside the block (tests, bots, demo)."""
    global _clock
    previous, _clock = _clock, source
    try:
        yield
    finally:
        _clock = previous
