"""Celery tasks: thin and idempotent. They take ids, claim the run, call the pure
steps and the services, and record timings per step."""

from __future__ import annotations

import logging
import time

from celery import shared_task

from analysis import frames, pipeline, quality, services
from analysis.models import AnalysisRun
from analysis.steps import RunSteps

logger = logging.getLogger(__name__)


def analysis_run_execute(run: AnalysisRun, attempt: int) -> None:
    steps = RunSteps(lambda name: services.analysis_run_step(run_id=run.pk, attempt=attempt, step=name))
    began = time.perf_counter()
    try:
        with steps.step("frames"):
            ratings = frames.ratings_frame(run.study_id)
            participants = frames.participants_frame(run.study_id)
            gold = frames.gold_frame(run.study_id)
        with steps.step("quality"):
            result = quality.apply_quality_rules(ratings, participants, gold, run.thresholds)
        with steps.step("persist"):
            services.analysis_run_quality_persist(run=run, attempt=attempt, quality=result)
        with steps.step("statistics"):
            enriched = participants.merge(
                result.participants.drop(columns=["duration_minutes", "attention_failures"]), on="participant_id"
            )
            steps.timings.update(
                {f"statistics.{k}": v for k, v in pipeline.run_statistics(run, ratings, enriched, gold).items()}
            )
    except services.RunSuperseded:
        logger.warning("run %s: attempt %s was superseded; leaving it to the newer attempt", run.pk, attempt)
        return
    except Exception as exc:  # noqa: BLE001 - any failure must end up readable on the run
        logger.exception("run %s failed in step %s", run.pk, steps.current)
        steps.timings["total"] = round(time.perf_counter() - began, 3)
        services.analysis_run_fail(
            run_id=run.pk, attempt=attempt, error=f"{steps.current}: {type(exc).__name__}: {exc}", timings=steps.timings
        )
        return
    steps.timings["total"] = round(time.perf_counter() - began, 3)
    if services.analysis_run_finish(run_id=run.pk, attempt=attempt, timings=steps.timings):
        logger.info("run %s done (attempt %s) in %.2fs", run.pk, attempt, steps.timings["total"])


@shared_task(bind=True, name="analysis.run_analysis", acks_late=True, max_retries=None)
def run_analysis(self, run_id: int) -> str:
    """Claim run ``run_id`` and compute it. A delivery for a finished run does nothing."""
    claim = services.analysis_run_claim(run_id=run_id)
    if claim.attempt is None:
        if claim.retry_in is not None:
            # Another attempt holds a live lease; come back when it would have expired.
            raise self.retry(countdown=claim.retry_in)
        logger.info("run %s is %s; nothing to do", run_id, claim.status)
        return claim.status
    run = AnalysisRun.objects.get(pk=run_id)
    analysis_run_execute(run, claim.attempt)
    return AnalysisRun.objects.filter(pk=run_id).values_list("status", flat=True).first() or "missing"


@shared_task(bind=True, name="analysis.run_metrics", acks_late=True, max_retries=None)
def run_metrics(self, run_id: int) -> str:
    """Claim metrics run ``run_id`` and compute it (see analysis.metrics_run). Redelivery is harmless."""
    from analysis import metrics_run
    from analysis.models import MetricsRun

    claim = services.metrics_run_claim(run_id=run_id)
    if claim.attempt is None:
        if claim.retry_in is not None:
            raise self.retry(countdown=claim.retry_in)
        logger.info("metrics run %s is %s; nothing to do", run_id, claim.status)
        return claim.status
    metrics_run.metrics_run_execute(MetricsRun.objects.select_related("study").get(pk=run_id), claim.attempt)
    return MetricsRun.objects.filter(pk=run_id).values_list("status", flat=True).first() or "missing"
