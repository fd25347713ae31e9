"""Counters of attempts in a fixed time window, shared by every worker process.

The window starts at a key's first hit and lasts ``window_seconds`` whatever
happens after (a later hit never extends nor shortens it). Each hit is one
atomic step that returns the new count, so a limit checked on that count holds
exactly under concurrent requests: Redis ``INCR`` then ``EXPIRE NX`` in one
transaction when the default cache is Redis (``REDIS_CACHE_URL``), else one
``INSERT … ON CONFLICT DO UPDATE … RETURNING`` on the ``web.RateCounter`` table.
A count kept per process would let a client try workers x the limit.
"""

from __future__ import annotations

import hashlib
import math

from django.conf import settings
from django.core.cache import cache
from django.db import connection, transaction
from django.db.models import F

from web import clock

from .models import RateCounter

_REDIS_BACKEND = "django.core.cache.backends.redis.RedisCache"

# Decrement only a live key (an expired or missing one stays missing: it must not start a window without expiry).
_REDIS_RELEASE = """
if redis.call('EXISTS', KEYS[1]) == 1 and tonumber(redis.call('GET', KEYS[1])) > 0 then
  return redis.call('DECR', KEYS[1])
end
return 0
"""


def digest(text: str) -> str:
    # Keys have a length limit; a user name or address may not fit it.
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _on_redis() -> bool:
    return settings.CACHES["default"]["BACKEND"] == _REDIS_BACKEND


def _redis(key: str) -> tuple[object, str]:
    """The Redis client of the default cache and the key as that cache spells it (prefix, version).

    Django's cache API has no atomic "increment, expiring once": ``incr`` reads, then
    writes, and forgets the expiry on the database cache; the client it wraps has both.
    """
    full_key = cache.make_and_validate_key(f"ratelimit:{key}")
    return cache._cache.get_client(full_key, write=True), full_key


def _now() -> float:
    return clock.now().timestamp()


def hit(key: str, window_seconds: int) -> int:
    """Count one more attempt; the number of attempts in the window, this one included."""
    if _on_redis():
        client, full_key = _redis(key)
        with client.pipeline(transaction=True) as pipe:
            pipe.incr(full_key)
            pipe.expire(full_key, window_seconds, nx=True)
            hits, _ = pipe.execute()
        return int(hits)
    now, table = _now(), connection.ops.quote_name(RateCounter._meta.db_table)
    key_column = connection.ops.quote_name("key")
    # Both CASEs read the row as it was (SQL evaluates SET against the old row), on SQLite and PostgreSQL alike.
    sql = (f"INSERT INTO {table} ({key_column}, hits, window_ends_at) VALUES (%s, 1, %s) "
           f"ON CONFLICT ({key_column}) DO UPDATE SET "
           f"hits = CASE WHEN {table}.window_ends_at <= %s THEN 1 ELSE {table}.hits + 1 END, "
           f"window_ends_at = CASE WHEN {table}.window_ends_at <= %s THEN excluded.window_ends_at "
           f"ELSE {table}.window_ends_at END "
           f"RETURNING hits")
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(sql, [key, now + window_seconds, now, now])
        return cursor.fetchone()[0]


def release(key: str) -> None:
    """Take back one hit of the current window (an attempt that turned out not to count); never below zero."""
    if _on_redis():
        client, full_key = _redis(key)
        client.eval(_REDIS_RELEASE, 1, full_key)
        return
    RateCounter.objects.filter(key=key, window_ends_at__gt=_now(), hits__gt=0).update(hits=F("hits") - 1)


def count(key: str) -> int:
    """Attempts in the key's current window (0 once it ended)."""
    if _on_redis():
        client, full_key = _redis(key)
        return int(client.get(full_key) or 0)
    row = RateCounter.objects.filter(key=key, window_ends_at__gt=_now()).values_list("hits", flat=True).first()
    return row or 0


def seconds_left(key: str) -> int:
    """Seconds until the key's window ends (0 when none is running): a 429's Retry-After."""
    if _on_redis():
        client, full_key = _redis(key)
        return max(int(client.ttl(full_key)), 0)
    ends = RateCounter.objects.filter(key=key).values_list("window_ends_at", flat=True).first()
    return max(math.ceil(ends - _now()), 0) if ends is not None else 0


def purge_expired() -> int:
    """Delete the database counters whose window ended (a hit would start them afresh anyway); how many."""
    deleted, _ = RateCounter.objects.filter(window_ends_at__lte=_now()).delete()
    return deleted
