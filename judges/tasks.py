"""The judge run's Celery task: thin and idempotent (``services.judge_run_execute`` does the work)."""

from __future__ import annotations

from celery import shared_task

from judges import services
from judges.models import JudgeRun

# Calls per delivery: the task sends itself again after these, so one run never holds a worker for hours and
# a killed worker loses at most the call in flight (acks_late: the message is delivered again).
CALLS_PER_TASK = 50


@shared_task(name="judges.run", acks_late=True, ignore_result=True)
def judge_run(run_id: int) -> str:
    run = services.judge_run_execute(run_id=run_id, max_calls=CALLS_PER_TASK)
    if run is not None and run.status == JudgeRun.Status.RUNNING:
        judge_run.delay(run_id)
        return "continued"
    return "finished" if run is not None else "nothing to do"
