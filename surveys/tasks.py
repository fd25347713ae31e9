"""Celery beat's retention pass (``CELERY_BEAT_SCHEDULE``; surveys.retention)."""

from __future__ import annotations

from celery import shared_task

from surveys import retention


@shared_task(name="surveys.apply_retention", ignore_result=True)
def apply_retention() -> list[str]:
    """Replace the panel identifiers of studies past their retention time; idempotent."""
    return retention.retention_pass()
