"""Celery tasks: shims over ``analysis.running.runs``, which claims the run and computes it.

They take ids and are idempotent: a redelivered message for a finished run,
or for a run another worker holds, does nothing (beat's pass sends a run again
once its worker's lease has expired).
A run's task sends part tasks for its slower tables (``analysis.running.fanout``);
a part for a superseded attempt or for tables already landed does nothing.
"""

from __future__ import annotations

from celery import shared_task

from analysis.running import runs
from analysis.automatic_metrics import metrics_run


@shared_task(name=runs.ANALYSIS.task_name, acks_late=True)
def run_analysis(run_id: int) -> str:
    """Claim analysis run ``run_id`` and compute it."""
    return runs.task_body(kind=runs.ANALYSIS, run_id=run_id)


@shared_task(name=runs.PART_TASK_NAME, acks_late=True)
def run_analysis_part(run_id: int, attempt: int, names: list[str]) -> str:
    """Compute the tables ``names`` of attempt ``attempt`` of analysis run ``run_id`` and land them."""
    return runs.analysis_run_part(run_id=run_id, attempt=attempt, names=names)


@shared_task(name=metrics_run.METRICS.task_name, acks_late=True)
def run_metrics(run_id: int) -> str:
    """Claim metrics run ``run_id`` and compute it."""
    return runs.task_body(kind=metrics_run.METRICS, run_id=run_id)


@shared_task(name="analysis.requeue_stale_runs", ignore_result=True)
def requeue_stale_runs() -> dict[str, list[int]]:
    """Celery beat's periodic pass: send runs and parts whose message was lost, and runs whose worker died;
    fail exhausted ones."""
    return runs.runs_and_parts_requeue(older_than_seconds=runs.RESEND_AFTER_SECONDS)
