"""Celery tasks: shims over ``analysis.runs``, which claims the run and computes it.

They take ids and are idempotent: a redelivered message for a finished run
does nothing, and one for a run another worker holds waits for its lease.
A run's task sends part tasks for its slower tables (``analysis.fanout``);
a part for a superseded attempt or for tables already landed does nothing.
"""

from __future__ import annotations

from celery import shared_task

from analysis import runs


@shared_task(bind=True, name=runs.ANALYSIS.task_name, acks_late=True, max_retries=None)
def run_analysis(self, run_id: int) -> str:
    """Claim analysis run ``run_id`` and compute it."""
    return runs.task_body(self, kind=runs.ANALYSIS, run_id=run_id)


@shared_task(name=runs.PART_TASK_NAME, acks_late=True)
def run_analysis_part(run_id: int, attempt: int, names: list[str]) -> str:
    """Compute the tables ``names`` of attempt ``attempt`` of analysis run ``run_id`` and land them."""
    return runs.analysis_run_part(run_id=run_id, attempt=attempt, names=names)


@shared_task(bind=True, name=runs.METRICS.task_name, acks_late=True, max_retries=None)
def run_metrics(self, run_id: int) -> str:
    """Claim metrics run ``run_id`` and compute it."""
    return runs.task_body(self, kind=runs.METRICS, run_id=run_id)


@shared_task(name="analysis.requeue_stale_runs", ignore_result=True)
def requeue_stale_runs() -> dict[str, list[int]]:
    """Celery beat's periodic pass: send runs whose message was lost or whose worker died; fail exhausted ones."""
    return runs.runs_requeue(older_than_seconds=60)
