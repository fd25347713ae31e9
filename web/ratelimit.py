"""Counters of attempts in a time window, kept in the default cache.

Every worker process shares the default cache (Redis with ``REDIS_CACHE_URL``,
else the database cache), so a limit holds across workers: a count kept per
process would let a client try workers x the limit.
"""

from __future__ import annotations

import hashlib

from django.core.cache import cache


def digest(text: str) -> str:
    # Cache keys have a length and character limit (memcached-safe); a user name or address may not fit them.
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def count(key: str) -> int:
    return cache.get(key) or 0


def increment(key: str, window_seconds: int) -> None:
    """Count one more attempt; the window starts at the first one."""
    if cache.add(key, 1, window_seconds) is False:
        try:
            cache.incr(key)
        except ValueError:  # expired between add and incr
            cache.set(key, 1, window_seconds)
