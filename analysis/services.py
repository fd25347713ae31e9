"""Writes of the analysis app: creating, claiming and finishing runs, and persisting their tables.

A run is claimed with a conditional UPDATE (queued -> running, or running
with an expired lease after a worker died), which bumps ``attempts``. Every
later write names the attempt it belongs to, so a worker that lost its lease
can neither overwrite a newer attempt's results nor finish the run twice.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta

import pandas as pd
from django.conf import settings
from django.db import models, transaction
from django.db.models import F, Q
from django.utils import timezone

from analysis.models import AnalysisRun, MetricsRun, MetricsTable, ParticipantResult, ResultTable
from analysis.quality import QualityResult
from surveys.models import Participant, Study

logger = logging.getLogger(__name__)


class RunSuperseded(Exception):
    """Another attempt has claimed the run since this one started."""


@dataclass(frozen=True)
class Claim:
    attempt: int | None  # set when this caller now owns the run
    status: str  # the run's status after the claim ("missing" when there is no such run)
    retry_in: float | None = None  # another attempt holds a live lease: try again after this many seconds


def run_lease_seconds() -> float:
    """How long a running attempt owns its run; past that a redelivered message may take over.

    Defaults to the hard task time limit plus a margin: by then the first
    attempt is dead for sure (Celery kills it at the limit).
    """
    return float(getattr(settings, "ANALYSIS_RUN_LEASE_SECONDS", settings.CELERY_TASK_TIME_LIMIT + 30))


def analysis_run_create(*, study: Study, requested_by: str = "") -> AnalysisRun:
    """A queued run with the study's current thresholds; its task is sent once the row is committed."""
    with transaction.atomic():
        run = AnalysisRun.objects.create(study=study, thresholds=study.quality_thresholds, requested_by=requested_by)
        transaction.on_commit(lambda: analysis_run_enqueue(run_id=run.pk))
    return run


def analysis_run_enqueue(*, run_id: int) -> bool:
    """Send the run's task; False when the broker is unreachable (the run stays queued).

    A broker outage must not turn the researcher's request into an error: the
    queued run is sent again by ``analysis_runs_requeue`` (celery worker start
    and reconnect, and ``manage.py requeue_stale_runs``). Sending a run twice
    is harmless: only one delivery can claim it.
    """
    from analysis.tasks import run_analysis

    if settings.CELERY_TASK_ALWAYS_EAGER:
        run_analysis.delay(run_id)  # in-process: errors are the caller's to see
        return True
    try:
        run_analysis.apply_async((run_id,), retry=False)
    except Exception as exc:  # noqa: BLE001 - kombu/redis raise many kinds; any means "not sent"
        logger.warning("run %s stays queued: the broker is unreachable (%s)", run_id, type(exc).__name__)
        return False
    return True


def analysis_runs_requeue(*, older_than_seconds: float = 0, include_running: bool = False) -> list[int]:
    """Send again every queued run and every running run whose lease expired; returns the ids sent.

    ``include_running`` also sends runs whose lease is still live (a worker
    starting after a crash): their task waits for the lease, then takes over.
    """
    now = timezone.now()
    lease_expired = now - timedelta(seconds=0 if include_running else run_lease_seconds())
    stale = Q(status=AnalysisRun.Status.QUEUED, created_at__lte=now - timedelta(seconds=older_than_seconds)) | Q(
        status=AnalysisRun.Status.RUNNING, started_at__lte=lease_expired
    )
    ids = list(AnalysisRun.objects.filter(stale).order_by("id").values_list("id", flat=True))
    return [run_id for run_id in ids if analysis_run_enqueue(run_id=run_id)]


def _run_claim(model: type[models.Model], run_id: int) -> Claim:
    """Claim a run row of ``model`` (AnalysisRun or MetricsRun) for a new attempt."""
    now = timezone.now()
    lease = run_lease_seconds()
    claimable = Q(status=AnalysisRun.Status.QUEUED) | Q(
        status=AnalysisRun.Status.RUNNING, started_at__lt=now - timedelta(seconds=lease)
    )
    claimed = model.objects.filter(claimable, pk=run_id).update(
        status=AnalysisRun.Status.RUNNING, started_at=now, attempts=F("attempts") + 1, step="claimed", error=""
    )
    row = model.objects.filter(pk=run_id).values("status", "started_at", "attempts").first()
    if row is None:
        return Claim(attempt=None, status="missing")
    if claimed:
        return Claim(attempt=row["attempts"], status=row["status"])
    if row["status"] == AnalysisRun.Status.RUNNING:
        left = lease - (now - row["started_at"]).total_seconds()
        return Claim(attempt=None, status=row["status"], retry_in=max(1.0, left + 1))
    return Claim(attempt=None, status=row["status"])


def analysis_run_claim(*, run_id: int) -> Claim:
    return _run_claim(AnalysisRun, run_id)


def _owned(run_id: int, attempt: int, model: type[models.Model] = AnalysisRun):
    return model.objects.filter(pk=run_id, attempts=attempt, status=AnalysisRun.Status.RUNNING)


def analysis_run_step(*, run_id: int, attempt: int, step: str) -> None:
    """Record the step an attempt is in (for the monitor); stop if the run was taken over."""
    if not _owned(run_id, attempt).update(step=step):
        raise RunSuperseded(f"run {run_id}: attempt {attempt} no longer owns the run")


def _table_payload(frame: pd.DataFrame) -> tuple[list[str], list[list]]:
    # pandas' JSON writer turns NaN/NA into null and numpy scalars into plain numbers.
    split = json.loads(frame.to_json(orient="split", index=False, date_format="iso", double_precision=15))
    return [str(c) for c in split["columns"]], split["data"]


def result_tables_replace(*, run: AnalysisRun, tables: Mapping[str, pd.DataFrame], notes: Mapping[str, str] | None = None) -> None:
    """Store tables of a run by name, replacing earlier ones of the same names.

    ``rows`` is a list of lists in the order of ``columns``.
    """
    notes = notes or {}
    with transaction.atomic():
        ResultTable.objects.filter(run=run, name__in=list(tables)).delete()
        objects = []
        for name, frame in tables.items():
            columns, rows = _table_payload(frame)
            objects.append(ResultTable(run=run, name=name, columns=columns, rows=rows, note=notes.get(name, "")))
        ResultTable.objects.bulk_create(objects)


def _nan_to_none(value: float) -> float | None:
    return None if pd.isna(value) else float(value)


def analysis_run_quality_persist(*, run: AnalysisRun, attempt: int, quality: QualityResult) -> None:
    """Replace the run's participant results and flow tables in one transaction."""
    with transaction.atomic():
        locked = _owned(run.pk, attempt).select_for_update().first()
        if locked is None:
            raise RunSuperseded(f"run {run.pk}: attempt {attempt} no longer owns the run")
        ParticipantResult.objects.filter(run=run).delete()
        ids = dict(
            Participant.objects.filter(study_id=run.study_id, is_preview=False).values_list("pseudonym", "id")
        )
        results = quality.participants
        ParticipantResult.objects.bulk_create(
            [
                ParticipantResult(
                    run=run,
                    participant_id=ids[row.participant_id],
                    duration_minutes=_nan_to_none(row.duration_minutes),
                    sd=_nan_to_none(row.sd),
                    mae=_nan_to_none(row.mae),
                    fast_share=_nan_to_none(row.fast_share),
                    attention_failures=int(row.attention_failures),
                    excluded_by=row.excluded_by,
                    payable=bool(row.payable),
                    reject_reason=row.reject_reason,
                )
                for row in results.itertuples(index=False)
            ],
            batch_size=2000,
        )
        result_tables_replace(
            run=run,
            tables={"filter_flow": quality.filter_flow, "filter_flow_by_gender": quality.filter_flow_by_gender},
            notes={"filter_flow": "DESIGN 3.2; step 0 counts everyone enrolled (non-preview)."},
        )
        AnalysisRun.objects.filter(pk=run.pk).update(
            n_participants=len(results), n_retained=int((results["excluded_by"] == "").sum())
        )


def analysis_run_finish(*, run_id: int, attempt: int, timings: Mapping[str, float]) -> bool:
    """Mark the attempt's run done; False when another attempt owns it now."""
    return bool(
        _owned(run_id, attempt).update(
            status=AnalysisRun.Status.DONE, finished_at=timezone.now(), step="done", timings=dict(timings)
        )
    )


def analysis_run_fail(*, run_id: int, attempt: int, error: str, timings: Mapping[str, float]) -> bool:
    """Mark the attempt's run failed with a readable error (its tables are never shown)."""
    return bool(
        _owned(run_id, attempt).update(
            status=AnalysisRun.Status.FAILED, finished_at=timezone.now(), error=error[:5000], timings=dict(timings)
        )
    )


# --------------------------------------------------------------------------- metrics runs (issue 9)


def metrics_run_create(*, study: Study, requested_by: str = "") -> MetricsRun:
    """A queued metrics run; its task is sent once the row is committed."""
    from analysis.tasks import run_metrics  # the task module imports this one

    with transaction.atomic():
        run = MetricsRun.objects.create(study=study, requested_by=requested_by)
        transaction.on_commit(lambda: run_metrics.delay(run.pk))
    return run


def metrics_run_claim(*, run_id: int) -> Claim:
    return _run_claim(MetricsRun, run_id)


def metrics_run_step(*, run_id: int, attempt: int, step: str) -> None:
    if not _owned(run_id, attempt, MetricsRun).update(step=step):
        raise RunSuperseded(f"metrics run {run_id}: attempt {attempt} no longer owns the run")


@dataclass(frozen=True)
class MetricsOutcome:
    """Everything a finished metrics run stores."""

    tables: Mapping[str, pd.DataFrame]
    notes: Mapping[str, str]
    predictor: bytes | None
    source_run_id: int | None
    human_basis: str
    cache_hits: int
    cache_misses: int


def metrics_run_finish(*, run_id: int, attempt: int, outcome: MetricsOutcome, timings: Mapping[str, float]) -> bool:
    """Replace the run's tables and mark it done in one transaction; False when another attempt owns it."""
    with transaction.atomic():
        if _owned(run_id, attempt, MetricsRun).select_for_update().first() is None:
            return False
        MetricsTable.objects.filter(run_id=run_id).delete()
        objects = []
        for name, frame in outcome.tables.items():
            columns, rows = _table_payload(frame)
            objects.append(MetricsTable(run_id=run_id, name=name, columns=columns, rows=rows,
                                        note=outcome.notes.get(name, "")))
        MetricsTable.objects.bulk_create(objects)
        _owned(run_id, attempt, MetricsRun).update(
            status=MetricsRun.Status.DONE, finished_at=timezone.now(), step="done", timings=dict(timings),
            predictor=outcome.predictor, source_run_id=outcome.source_run_id, human_basis=outcome.human_basis[:200],
            cache_hits=outcome.cache_hits, cache_misses=outcome.cache_misses,
        )
    return True


def metrics_run_fail(*, run_id: int, attempt: int, error: str, timings: Mapping[str, float]) -> bool:
    return bool(
        _owned(run_id, attempt, MetricsRun).update(
            status=MetricsRun.Status.FAILED, finished_at=timezone.now(), error=error[:5000], timings=dict(timings)
        )
    )
