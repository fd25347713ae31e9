"""Celery beat's hourly purge of rate-limit counters whose window ended (``CELERY_BEAT_SCHEDULE``)."""

from __future__ import annotations

from celery import shared_task

from web import ratelimit


@shared_task(name="web.purge_rate_counters", ignore_result=True)
def purge_rate_counters() -> int:
    """Delete the database's ended counters; idempotent (they count as zero whether deleted or not)."""
    return ratelimit.purge_expired()
