"""Celery beat's periodic sync of Prolific submissions (``CELERY_BEAT_SCHEDULE``)."""

from __future__ import annotations

from celery import shared_task

from prolific import services


@shared_task(name="prolific.sync_submissions", ignore_result=True)
def sync_submissions() -> dict[str, str]:
    """Store every Prolific study's submission statuses; idempotent (a repeat changes nothing)."""
    return services.panel_studies_sync_all()
