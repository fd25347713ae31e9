"""Concurrent requests in tests: threads released together, each with its own database connection."""

from __future__ import annotations

import threading
from collections.abc import Callable

from django.db import connection


def in_threads(n: int, work: Callable[[int], object], *, timeout: float = 60) -> list:
    """Run ``work(i)`` for i in 0..n-1 in ``n`` threads released together; their results, in order.

    Any exception in a thread fails the calling test."""
    barrier = threading.Barrier(n)
    results, errors = [None] * n, []

    def run(i):
        try:
            barrier.wait(timeout=timeout)
            results[i] = work(i)
        except Exception as exc:  # surfaced by the assertion below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=3 * timeout)
    assert not errors, errors
    return results
