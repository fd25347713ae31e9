"""The whole life of a run, analysis or metrics: create, enqueue, claim, steps, persist, finish.

A run is a row with a status. It is created queued and its task is sent once
the row is committed, on a connection that gives up after a fraction of a
second: a broker that is down or hung leaves the run queued, never the request
waiting. ``runs_requeue`` (worker start and reconnect, Celery beat, ``manage.py
requeue_stale_runs``) sends it again. No message ever waits inside a worker
for a lease to expire (a delivery for a run another attempt holds does
nothing): a delayed message held unacknowledged across two broker outages
took the worker down with it. Beat's pass sends the run again once the lease
has expired.
A delivery claims the run with a conditional UPDATE (queued -> running, or
running with an expired lease after a worker died), which bumps ``attempts``.
Every later write names the attempt it belongs to and checks, under a row
lock, that the attempt still owns the run: a worker whose lease expired can
neither overwrite a newer attempt's results nor finish the run twice.

An analysis run lands its tables in stages (``analysis.running.fanout``): its own task
computes the quality rules and the paper's tables and lands them at once, then
sends one *part* task per slow analysis and one for the quick rest. Each part
lands its tables the same way; the row lock serializes the landings, and the
landing that empties the run's ``pending`` list finishes the run (a chord whose
join is the run row: no result backend is needed, and it works the same when
tasks run in-process without a broker). A part marks its tables begun
(``parts_started``); the parts no worker has begun lost their message if the
broker went away, and ``analysis_run_parts_resend`` sends them again.

The Celery tasks (``analysis.tasks``) only call :func:`task_body` and
:func:`analysis_run_part`.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import numpy as np
import pandas as pd
from celery import current_app
from django.conf import settings
from django.db import models, transaction
from django.db.models import F, Q
from django.utils import timezone
from threadpoolctl import threadpool_limits

from analysis import pipeline, quality, registry, selectors
from analysis.design import Design, study_design
from analysis.models import AnalysisRun, ParticipantResult, ResultTable, StoredTable
from analysis.quality import QualityResult
from analysis.running import fanout, frame_builders, side_by_side
from surveys import withdrawal
from surveys.allocation import allocation_reconcile
from surveys.models import Participant, Study

logger = logging.getLogger(__name__)

Status = AnalysisRun.Status


class RunSuperseded(Exception):
    """Another attempt has claimed the run since this one started."""


@dataclass(frozen=True)
class RunKind:
    """One kind of run (analysis, metrics ...): its rows, tables, task and what it computes.

    A kind registers itself (``run_kind_register``) from its own module; this one knows none but the
    analysis run by name."""

    model: type[models.Model]
    table_model: type[StoredTable]
    task_name: str
    label: str
    #: Computes a claimed run; returns the fields the run is finished with, or None when the run finishes
    #: itself (an analysis run: when its last table lands).
    steps: Callable[[Any, int, RunSteps], dict[str, Any] | None]
    #: Failures that are the environment's, not a bug: logged without a traceback.
    expected_failures: tuple[type[Exception], ...] = ()


#: Every registered kind, by label, in the order they registered.
KINDS: dict[str, RunKind] = {}


def run_kind_register(kind: RunKind) -> RunKind:
    """Make ``kind`` known to the passes that send runs again and fail exhausted ones; returns it."""
    KINDS[kind.label] = kind
    return kind


#: The task that computes some tables of an analysis run (``analysis_run_part``).
PART_TASK_NAME = "analysis.run_analysis_part"


@dataclass(frozen=True)
class Claim:
    attempt: int | None  # set when this caller now owns the run
    status: str  # the run's status after the claim ("missing" when there is no such run)


def run_lease_seconds() -> float:
    """How long a running attempt owns its run; past that a redelivered message may take over.

    Defaults to the hard task time limit plus a margin: by then the first
    attempt is dead for sure (Celery kills it at the limit).
    """
    return float(getattr(settings, "ANALYSIS_RUN_LEASE_SECONDS", settings.CELERY_TASK_TIME_LIMIT + 30))


# --------------------------------------------------------------------------- create and enqueue


#: A queued run (or a part no worker began) older than this may have lost its message: asking for it
#: again, or beat's pass, sends it again.
RESEND_AFTER_SECONDS = 30


def _queued_or_new(kind: RunKind, *, study: Study, requested_by: str, **identity: Any) -> models.Model:
    """The run of ``kind`` already queued for ``study`` with the same ``identity``, or a new queued one.

    A second request for a run identical to a queued one would compute the same
    tables again (minutes of worker CPU each): it gets the queued run instead.
    The study row is locked so that two such requests at once create one run
    (SQLite serializes them already: its transactions take the write lock first).
    """
    with transaction.atomic():
        Study.objects.select_for_update().filter(pk=study.pk).first()
        queued = kind.model.objects.filter(study=study, status=Status.QUEUED, **identity).order_by("id").first()
        if queued is not None:
            if queued.created_at < timezone.now() - timedelta(seconds=RESEND_AFTER_SECONDS):
                # Its message may have been lost to a broker outage; a second one is harmless.
                transaction.on_commit(lambda: run_enqueue(kind=kind, run_id=queued.pk))
            return queued
        run = kind.model.objects.create(study=study, requested_by=requested_by, **identity)
        transaction.on_commit(lambda: run_enqueue(kind=kind, run_id=run.pk))
    return run


def analysis_run_create(*, study: Study, requested_by: str = "") -> AnalysisRun:
    """A queued run with the study's current thresholds (or the identical one already queued).

    Its task is sent once the row is committed.
    """
    return _queued_or_new(ANALYSIS, study=study, requested_by=requested_by, thresholds=study.quality_thresholds)


def run_create(kind: RunKind, *, study: Study, requested_by: str = "") -> models.Model:
    """A queued run of ``kind`` (or the one already queued); its task is sent once the row is committed."""
    return _queued_or_new(kind, study=study, requested_by=requested_by)


def _send(task_name: str, args: tuple) -> None:
    """Send one task now, or raise; without a broker (tasks in-process) run it here.

    The message goes over its own connection whose every socket operation
    gives up after ``RUN_PUBLISH_TIMEOUT_SECONDS``, with no retry: a broker
    that is down refuses at once, and one that hangs (stopped, overloaded)
    must not hold the caller (a researcher's request) for the pool's 5 s
    socket timeout. The task is looked up by name so that this module does
    not import the task module (which imports it).
    """
    task = current_app.tasks[task_name]
    if settings.CELERY_TASK_ALWAYS_EAGER:
        task.delay(*args)  # in-process: errors are the caller's to see
        return
    timeout = float(settings.RUN_PUBLISH_TIMEOUT_SECONDS)
    options = {"socket_timeout": timeout, "socket_connect_timeout": timeout, "max_retries": 0}
    with current_app.connection_for_write(transport_options=options, connect_timeout=timeout) as connection:
        task.apply_async(args, retry=False, connection=connection)


def run_enqueue(*, kind: RunKind, run_id: int) -> bool:
    """Send the run's task; False when the broker is unreachable or hangs (the run stays queued).

    A broker outage must not turn the researcher's request into an error nor
    make it wait: the queued run is sent again by ``runs_requeue``. Sending a
    run twice is harmless: only one delivery can claim it.
    """
    if settings.CELERY_TASK_ALWAYS_EAGER:
        _send(kind.task_name, (run_id,))
        return True
    try:
        _send(kind.task_name, (run_id,))
    except Exception as exc:  # noqa: BLE001 - kombu/redis raise many kinds; any means "not sent"
        logger.warning("%s %s stays queued: the broker is unreachable (%s)", kind.label, run_id, type(exc).__name__)
        return False
    return True


def run_max_attempts() -> int:
    return int(getattr(settings, "ANALYSIS_RUN_MAX_ATTEMPTS", 3))


def _exhausted(lease_expired: Any) -> Q:
    """Running runs whose lease expired after their last allowed attempt: their workers keep dying."""
    return Q(status=Status.RUNNING, started_at__lte=lease_expired, attempts__gte=run_max_attempts())


def _fail_exhausted(kind: RunKind, lease_expired: Any, **only: Any) -> list[int]:
    """Fail (visibly, with a reason) the exhausted runs of ``kind``, instead of retrying them forever."""
    stuck = kind.model.objects.filter(_exhausted(lease_expired), **only)
    ids = list(stuck.values_list("id", flat=True))
    if ids:
        stuck.filter(pk__in=ids).update(
            status=Status.FAILED, finished_at=timezone.now(),
            error=(f"{kind.label} stopped without finishing {run_max_attempts()} times (its worker was killed or "
                   "hit its time limit each time); see the worker log, then start a new run"),
        )
        logger.error("%s %s failed: every attempt's worker died", kind.label, ids)
    return ids


def runs_requeue(*, older_than_seconds: float = 0) -> dict[str, list[int]]:
    """Send again every queued run and every running run whose lease expired, of both kinds.

    Returns the ids sent per kind label. A run whose last allowed attempt died
    too is failed with a message instead. A running run whose lease is live
    is left alone: its worker may still be computing it, and a message for it
    would only wait (see the module docstring).
    """
    now = timezone.now()
    expired = now - timedelta(seconds=run_lease_seconds())
    stale = Q(status=Status.QUEUED, created_at__lte=now - timedelta(seconds=older_than_seconds)) | Q(
        status=Status.RUNNING, started_at__lte=expired
    )
    sent: dict[str, list[int]] = {}
    for kind in KINDS.values():
        _fail_exhausted(kind, expired)
        ids = kind.model.objects.filter(stale).order_by("id").values_list("id", flat=True)
        sent[kind.label] = [run_id for run_id in ids if run_enqueue(kind=kind, run_id=run_id)]
    return sent


def runs_and_parts_requeue(*, older_than_seconds: float) -> dict[str, list[int]]:
    """``runs_requeue`` and ``analysis_run_parts_resend``: every message a broker outage may have lost, sent again.

    The ids sent per kind label, and under "parts" the runs whose parts were sent again.
    """
    return {**runs_requeue(older_than_seconds=older_than_seconds),
            "parts": analysis_run_parts_resend(sent_before_seconds=older_than_seconds)}


def analysis_run_parts_resend(*, sent_before_seconds: float) -> list[int]:
    """Send again the parts no worker has begun, of running runs that sent them ``sent_before_seconds`` ago or more.

    Their message was lost if the broker went away (a restarted Redis starts
    empty). Returns the ids of the runs whose parts were sent. A part sent
    twice is harmless: its second delivery finds its tables begun or landed
    and does nothing. A part the broker does not take now is sent again by
    the next pass.
    """
    now = timezone.now()
    due = AnalysisRun.objects.filter(status=Status.RUNNING, parts_sent_at__lte=now - timedelta(seconds=sent_before_seconds))
    resent = []
    for run in due.exclude(pending=[]).only("id", "attempts", "pending", "parts_started", "parts_sent_at"):
        lost = [name for name in run.pending if name not in set(run.parts_started) and name in registry.ANALYSES]
        # Only one pass sends them: the one that moves the sending time on.
        if not lost or not _owned(ANALYSIS, run.pk, run.attempts).filter(parts_sent_at=run.parts_sent_at).update(
                parts_sent_at=now):
            continue
        plan = fanout.statistics_plan(registry.ANALYSES[name] for name in lost)
        parts = [*plan.parts, *([tuple(a.name for a in plan.paper)] if plan.paper else [])]
        logger.warning("run %s: sending again parts %s, which no worker began", run.pk, parts)
        try:
            for names in parts:
                _send(PART_TASK_NAME, (run.pk, run.attempts, list(names)))
        except Exception as exc:  # noqa: BLE001 - kombu/redis raise many kinds; any means "not sent"
            logger.warning("run %s: parts not sent again (%s); the next pass tries again", run.pk, type(exc).__name__)
            continue
        resent.append(run.pk)
    return resent


def run_waiting_reason(run: models.Model) -> str:
    """Why a run seems stuck, for the monitor ("" when it is not): no worker took it, or its worker died."""
    now = timezone.now()
    if run.status == Status.QUEUED and run.created_at < now - timedelta(seconds=RESEND_AFTER_SECONDS):
        seconds = int((now - run.created_at).total_seconds())
        waited = f"{seconds // 60} min" if seconds >= 120 else f"{seconds} s"
        return (f"Queued for {waited}: no worker has taken it yet. Is a celery worker running "
                "(bin/run starts one; bin/serve-production with SERVE_CELERY=1)?")
    if run.status == Status.RUNNING and run.started_at < now - timedelta(seconds=run_lease_seconds()):
        return ("Its worker stopped answering (killed or past its time limit). A worker sends it again within "
                f"a minute; after {run_max_attempts()} attempts it is failed with a reason.")
    waiting = _parts_waiting(run, now)
    if waiting:
        return (f"{len(waiting)} table{'s' if len(waiting) != 1 else ''} ({', '.join(waiting)}) no worker has begun "
                f"for over {RESEND_AFTER_SECONDS} s: they are sent again every {RESEND_AFTER_SECONDS} s. Is a celery worker running?")
    return ""


def _parts_waiting(run: models.Model, now: Any) -> list[str]:
    """The pending tables of a running analysis run that no worker began in the minute since they were sent."""
    sent_at = getattr(run, "parts_sent_at", None)
    if run.status != Status.RUNNING or sent_at is None or sent_at >= now - timedelta(seconds=RESEND_AFTER_SECONDS):
        return []
    return [name for name in run.pending if name not in set(run.parts_started)]


# --------------------------------------------------------------------------- claim and ownership


def run_claim(*, kind: RunKind, run_id: int) -> Claim:
    """Claim a run for a new attempt (see the module docstring)."""
    now = timezone.now()
    lease = run_lease_seconds()
    _fail_exhausted(kind, now - timedelta(seconds=lease), pk=run_id)
    claimable = Q(status=Status.QUEUED) | Q(status=Status.RUNNING, started_at__lt=now - timedelta(seconds=lease))
    claimed = kind.model.objects.filter(claimable, pk=run_id).update(
        status=Status.RUNNING, started_at=now, attempts=F("attempts") + 1, step="claimed", error=""
    )
    row = kind.model.objects.filter(pk=run_id).values("status", "started_at", "attempts").first()
    if row is None:
        return Claim(attempt=None, status="missing")
    if claimed:
        return Claim(attempt=row["attempts"], status=row["status"])
    return Claim(attempt=None, status=row["status"])


def _owned(kind: RunKind, run_id: int, attempt: int) -> models.QuerySet:
    return kind.model.objects.filter(pk=run_id, attempts=attempt, status=Status.RUNNING)


def _lock_owned(kind: RunKind, run_id: int, attempt: int) -> None:
    """Inside a transaction: lock the run row, or raise if ``attempt`` no longer owns the run.

    The lock makes the check and the writes that follow one step: a newer
    attempt's claim (an UPDATE of the same row) waits until they are committed,
    and afterwards this attempt's ownership check fails.
    """
    if _owned(kind, run_id, attempt).select_for_update().first() is None:
        raise RunSuperseded(f"{kind.label} {run_id}: attempt {attempt} no longer owns the run")


def run_step(*, kind: RunKind, run_id: int, attempt: int, step: str) -> None:
    """Record the step an attempt is in (for the monitor); stop if the run was taken over."""
    if not _owned(kind, run_id, attempt).update(step=step):
        raise RunSuperseded(f"{kind.label} {run_id}: attempt {attempt} no longer owns the run")


class RunSteps:
    """Times the steps of one attempt and marks the current one on its run (raising if it was taken over)."""

    def __init__(self, mark: Callable[[str], None]):
        self.mark = mark
        self.timings: dict[str, float] = {}
        self.current = "start"

    @contextmanager
    def step(self, name: str) -> Iterator[None]:
        self.current = name
        self.mark(name)
        began = time.perf_counter()
        yield
        self.timings[name] = round(time.perf_counter() - began, 3)


# --------------------------------------------------------------------------- persist


def _table_payload(frame: pd.DataFrame) -> tuple[list[str], list[list]]:
    # pandas' JSON writer turns NaN/NA into null and numpy scalars into plain numbers.
    split = json.loads(frame.to_json(orient="split", index=False, date_format="iso", double_precision=15))
    rows = split["data"]
    # ... but it stops at 15 significant digits, so a p of 3.820460904919432e-09 lost its last
    # digits: put every finite float back as itself (the JSON encoder writes repr, which round-trips).
    for j in range(frame.shape[1]):
        for i, value in enumerate(frame.iloc[:, j].tolist()):
            if isinstance(value, (float, np.floating)) and math.isfinite(value):
                rows[i][j] = float(value)
    return [str(c) for c in split["columns"]], rows


def _tables_write(kind: RunKind, run_id: int, tables: Mapping[str, pd.DataFrame], notes: Mapping[str, str]) -> None:
    kind.table_model.objects.filter(run_id=run_id, name__in=list(tables)).delete()
    objects = []
    for name, frame in tables.items():
        columns, rows = _table_payload(frame)
        objects.append(kind.table_model(run_id=run_id, name=name, columns=columns, rows=rows, note=notes.get(name, "")))
    kind.table_model.objects.bulk_create(objects)


def run_tables_persist(
    *, kind: RunKind, run_id: int, attempt: int, tables: Mapping[str, pd.DataFrame], notes: Mapping[str, str] | None = None
) -> None:
    """Store tables of a run by name, replacing earlier ones of the same names, if ``attempt`` still owns the run."""
    with transaction.atomic():
        _lock_owned(kind, run_id, attempt)
        _tables_write(kind, run_id, tables, notes or {})


def _nan_to_none(value: float) -> float | None:
    return None if pd.isna(value) else float(value)


def analysis_run_quality_persist(
    *, run_id: int, study_id: int, attempt: int, result: QualityResult, pending: Sequence[str] = ()
) -> None:
    """Replace the run's participant results and flow tables in one transaction, if ``attempt`` owns the run.

    The attempt starts afresh here: a dead attempt's tables and failures go, and
    ``pending`` names the statistics tables this attempt will land.
    """
    with transaction.atomic():
        _lock_owned(ANALYSIS, run_id, attempt)
        ResultTable.objects.filter(run_id=run_id).delete()
        ParticipantResult.objects.filter(run_id=run_id).delete()
        ids = dict(Participant.objects.filter(study_id=study_id, is_preview=False).values_list("pseudonym", "id"))
        results = result.participants
        ParticipantResult.objects.bulk_create(
            [
                ParticipantResult(
                    run_id=run_id,
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
        _tables_write(
            ANALYSIS, run_id,
            # The per-subgroup flow exists only for a study that declares subgroups.
            {"filter_flow": result.filter_flow}
            | ({"filter_flow_by_subgroup": result.filter_flow_by_subgroup} if result.filter_flow_by_subgroup is not None else {}),
            {"filter_flow": "DESIGN 3.2; step 0 counts everyone enrolled (non-preview)."
                            + withdrawal.withdrawals_note(study_id=study_id)},
        )
        AnalysisRun.objects.filter(pk=run_id).update(
            n_participants=len(results), n_retained=int((results["excluded_by"] == "").sum()),
            pending=list(pending), failures={}, parts_sent_at=None, parts_started=[],
        )
    # Those the rules exclude give their blocks back to the pool (studies that allocate blocks).
    allocation_reconcile(study=Study.objects.get(pk=study_id))


def analysis_run_tables_land(
    *, run_id: int, attempt: int, names: Sequence[str], computed: pipeline.Statistics, timings: Mapping[str, float]
) -> bool:
    """Store the tables ``names`` of an attempt (or their failures) and strike them from its pending list.

    ``timings`` join the run's. The landing that leaves nothing pending
    finishes the run; True when this one did. Raises ``RunSuperseded`` when
    ``attempt`` no longer owns the run: then nothing is written.
    """
    with transaction.atomic():
        run = _owned(ANALYSIS, run_id, attempt).select_for_update().first()
        if run is None:
            raise RunSuperseded(f"run {run_id}: attempt {attempt} no longer owns the run")
        _tables_write(ANALYSIS, run_id, {n: computed.tables[n] for n in names if n in computed.tables}, {})
        pending = [name for name in run.pending if name not in set(names)]
        fields: dict[str, Any] = {
            "pending": pending, "failures": {**run.failures, **{n: computed.failures[n] for n in names
                                                                 if n in computed.failures}},
            "timings": {**run.timings, **timings}, "step": "parts" if pending else "done",
        }
        if not pending:
            now = timezone.now()
            fields["timings"]["total"] = round((now - run.started_at).total_seconds(), 3)
            fields.update(status=Status.DONE, finished_at=now)
        AnalysisRun.objects.filter(pk=run_id).update(**fields)
    if pending:
        return False
    fanout.frames_discard(run_id=run_id, attempt=attempt)
    logger.info("run %s done (attempt %s) in %.2fs", run_id, attempt, fields["timings"]["total"])
    return True


# --------------------------------------------------------------------------- finish


def run_finish(*, kind: RunKind, run_id: int, attempt: int, timings: Mapping[str, float], **fields: Any) -> bool:
    """Mark the attempt's run done (with ``fields`` of its row); False when another attempt owns it now."""
    return bool(
        _owned(kind, run_id, attempt).update(
            status=Status.DONE, finished_at=timezone.now(), step="done", timings=dict(timings), **fields
        )
    )


def run_fail(*, kind: RunKind, run_id: int, attempt: int, error: str, timings: Mapping[str, float]) -> bool:
    """Mark the attempt's run failed with a readable error (its tables are never shown)."""
    if kind is ANALYSIS:
        fanout.frames_discard(run_id=run_id, attempt=attempt)
    return bool(
        _owned(kind, run_id, attempt).update(
            status=Status.FAILED, finished_at=timezone.now(), error=error[:5000], timings=dict(timings)
        )
    )


# --------------------------------------------------------------------------- the steps of each kind


def _with_quality(participants: pd.DataFrame, result: QualityResult) -> pd.DataFrame:
    """The participants frame with the quality columns the statistics read (``excluded_by``, sd, mae, ...)."""
    return participants.merge(
        result.participants.drop(columns=["duration_minutes", "attention_failures"]), on="participant_id"
    )


def _statistics_timings(computed: pipeline.Statistics) -> dict[str, float]:
    return {f"statistics.{name}": seconds for name, seconds in computed.timings.items()}


def _analysis_steps(run: AnalysisRun, attempt: int, steps: RunSteps) -> None:
    """The run's own task: frames, quality rules, the paper's tables; then the part tasks do the rest.

    The parts are sent once the paper's tables have landed, so that those come
    first even where the workers are fewer than the cores they share. Returns
    None: the run is finished by whichever landing leaves no table pending.
    """
    with steps.step("frames"):
        design = study_design(run.study_id)
        analyses = registry.statistics_analyses(design=design.features)
        built = frame_builders.frames_build(run.study_id, design, frame_builders.frames_needed(analyses))
    with steps.step("quality"):
        result = quality.apply_quality_rules(built["ratings"], built["participants"], built["gold"], run.thresholds,
                                             design.subgroups)
    seconds = _table_seconds_of_last_run(run)
    plan = fanout.statistics_plan(analyses, seconds=seconds)
    with steps.step("persist"):
        analysis_run_quality_persist(run_id=run.pk, study_id=run.study_id, attempt=attempt, result=result,
                                     pending=plan.table_names)
    shared = {**built, "participants": _with_quality(built["participants"], result)}
    if plan.parts and parts_computed_here():
        _paper_and_parts_here(run, attempt, steps, plan, shared, design, seconds)
        return
    with steps.step("statistics"):
        computed = _statistics(shared, plan.paper, design)
    if plan.parts:
        with steps.step("fan-out"):
            _frames_share(run.pk, attempt, shared)
    _paper_land(run.pk, attempt, plan, computed, steps)
    _parts_send(run.pk, attempt, plan.parts)


def _paper_land(run_id: int, attempt: int, plan: fanout.Plan, computed: pipeline.Statistics, steps: RunSteps) -> None:
    analysis_run_tables_land(run_id=run_id, attempt=attempt, names=[a.name for a in plan.paper], computed=computed,
                             timings={**steps.timings, **_statistics_timings(computed)})


def _statistics(
    shared: frame_builders.Frames, analyses: Sequence[registry.Analysis], design: Design
) -> pipeline.Statistics:
    """The tables of ``analyses`` for a study of ``design``, with numpy's BLAS on one thread.

    A run's tasks already keep every core busy, one task per worker process;
    a BLAS thread pool per task oversubscribes the cores, and for the
    mid-sized matrices of these models costs more in synchronisation than it
    gains (the mixed model at 10,000 participants: 12.6 s on two threads,
    5.8 s on one, alone on an idle two-core machine).
    """
    with threadpool_limits(limits=1, user_api="blas"):
        return pipeline.compute_statistics(shared, analyses=analyses, design=design)


def _table_seconds_of_last_run(run: AnalysisRun) -> dict[str, float]:
    """Seconds per table in the study's latest finished run: how long each part will take, roughly."""
    latest = selectors.analysis_run_latest_done(study=run.study)
    prefix = "statistics."
    return {key.removeprefix(prefix): seconds for key, seconds in (latest.timings if latest else {}).items()
            if key.startswith(prefix)}


def _frames_share(run_id: int, attempt: int, shared: frame_builders.Frames) -> None:
    try:
        fanout.frames_store(run_id=run_id, attempt=attempt, frames=shared)
    except OSError as exc:
        # Not fatal: each part then builds the frames again from the database.
        logger.warning("run %s: could not leave the frames for its parts (%s)", run_id, exc)


def parts_computed_here() -> bool:
    """Whether a run's own process computes its parts side by side (``analysis.running.side_by_side``) instead
    of sending them to the broker: ``ANALYSIS_PARTS`` "here" or "broker"; by default ("auto") here when every
    worker is on this machine (tasks in-process, or the filesystem broker), where the broker would only add
    its polling to each part, or compute the parts one after the other."""
    mode = getattr(settings, "ANALYSIS_PARTS", "auto")
    if mode != "auto":
        return mode == "here"
    return bool(settings.CELERY_TASK_ALWAYS_EAGER) or str(current_app.conf.broker_url or "").startswith("filesystem://")


def _paper_and_parts_here(run: AnalysisRun, attempt: int, steps: RunSteps, plan: fanout.Plan,
                          shared: frame_builders.Frames, design: Design, seconds: Mapping[str, float]) -> None:
    """The paper's tables here, and the others in processes forked here (``analysis.running.side_by_side``),
    one table an item, the longest first; each lands as it arrives, after the paper's.

    The other tables are marked begun first, so that no pass of ``analysis_run_parts_resend`` sends them:
    if this process dies, the run's lease expires and the whole run is sent again.
    """
    _, begun = _part_begin(run.pk, attempt, [name for names in plan.parts for name in names])
    # ``seconds``: each table's time in the study's last run. Without them the plan's order stands: the slow
    # analyses first.
    todo = sorted(begun, key=lambda name: -seconds.get(name, math.inf))

    def compute(name: str) -> pipeline.Statistics:
        return pipeline.compute_statistics(shared, analyses=[registry.ANALYSES[name]], design=design)

    def paper() -> None:
        with steps.step("statistics"):
            computed = pipeline.compute_statistics(shared, analyses=plan.paper, design=design)
        _paper_land(run.pk, attempt, plan, computed, steps)

    # A researcher watching a worker's run sees the paper's tables first: they are computed before the others
    # begin. Tasks in-process answer when the whole run is done: then they are computed meanwhile.
    watched = not settings.CELERY_TASK_ALWAYS_EAGER
    # BLAS on one thread, as in _statistics: the children are forked inside the limit and keep it.
    with threadpool_limits(limits=1, user_api="blas"):
        if watched:
            paper()
        with side_by_side.SideBySide(compute, todo) as others:
            if not watched:
                paper()
            for name, computed in others.results():
                analysis_run_tables_land(run_id=run.pk, attempt=attempt, names=[name], computed=computed,
                                         timings=_statistics_timings(computed))


def _parts_send(run_id: int, attempt: int, parts: Sequence[Sequence[str]]) -> None:
    """Send one task per part; a part the broker does not take is computed here and now.

    Without a broker (tasks in-process) each part runs inline, through the same code.
    The sending time is recorded first, so that a pass of ``analysis_run_parts_resend``
    can tell a part whose message was lost.
    """
    _owned(ANALYSIS, run_id, attempt).update(parts_sent_at=timezone.now())
    unsent = []
    for names in parts:
        if settings.CELERY_TASK_ALWAYS_EAGER:
            _send(PART_TASK_NAME, (run_id, attempt, list(names)))
            continue
        try:
            _send(PART_TASK_NAME, (run_id, attempt, list(names)))
        except Exception as exc:  # noqa: BLE001 - kombu/redis raise many kinds; any means "not sent"
            logger.warning("run %s: part %s not sent (%s); computing it here", run_id, names, type(exc).__name__)
            unsent.append(names)
    for names in unsent:
        analysis_run_part(run_id=run_id, attempt=attempt, names=names)


def _frames_rebuilt(run: AnalysisRun, design: Design) -> dict[str, pd.DataFrame]:
    """The frames of a run's attempt on a machine without its file: built again from the database.

    Exclusions are those the attempt persisted, and participants who enrolled
    since are left out, so every table of the run describes the same people.
    """
    built = frame_builders.frames_build(
        run.study_id, design, frame_builders.frames_needed(registry.statistics_analyses(design=design.features)))
    participants = built["participants"]
    enriched = _with_quality(participants, quality.apply_quality_rules(
        built["ratings"], participants, built["gold"], run.thresholds, design.subgroups))
    persisted = dict(
        ParticipantResult.objects.filter(run_id=run.pk).values_list("participant__pseudonym", "excluded_by")
    )
    enriched = enriched[enriched["participant_id"].isin(persisted)]
    return {**built, "participants": enriched.assign(excluded_by=enriched["participant_id"].map(persisted))}


def analysis_run_part(*, run_id: int, attempt: int, names: Sequence[str]) -> str:
    """What a part task does: compute the tables ``names`` of the attempt and land them.

    Idempotent: a delivery for a superseded attempt, a finished run or tables
    already landed or begun by another delivery does nothing. A failure outside
    the analyses themselves (each analysis's own error is recorded as its
    failure) fails the run.
    """
    run, todo = _part_begin(run_id, attempt, names)
    if not todo:
        logger.info("run %s part %s: nothing to do (landed, begun, superseded or finished)", run_id, list(names))
        return "nothing to do"
    began = time.perf_counter()
    try:
        design = study_design(run.study_id)
        shared = fanout.frames_load(run_id=run_id, attempt=attempt)
        source = "file" if shared is not None else "database"
        shared = shared or _frames_rebuilt(run, design)
        # A part is named by its first table in the timings.
        loaded = {f"part.{todo[0]}.frames": round(time.perf_counter() - began, 3)}
        logger.info("run %s part %s: frames from the %s in %.2fs", run_id, todo, source, *loaded.values())
        computed = _statistics(shared, [registry.ANALYSES[name] for name in todo], design)
        analysis_run_tables_land(run_id=run_id, attempt=attempt, names=todo, computed=computed,
                                 timings={**_statistics_timings(computed), **loaded})
    except RunSuperseded:
        logger.warning("run %s: attempt %s was superseded; part %s leaves it to the newer attempt",
                       run_id, attempt, todo)
        return "superseded"
    except Exception as exc:  # noqa: BLE001 - any failure must end up readable on the run
        logger.exception("run %s failed in part %s", run_id, todo)
        run_fail(kind=ANALYSIS, run_id=run_id, attempt=attempt, timings=run.timings,
                 error=f"statistics ({', '.join(todo)}): {type(exc).__name__}: {exc}")
        return "failed"
    return "landed"


def _part_begin(run_id: int, attempt: int, names: Sequence[str]) -> tuple[AnalysisRun | None, list[str]]:
    """Mark the tables of ``names`` still pending and not yet begun as begun by this delivery; returns them.

    Under the run row's lock, so that of two deliveries of one part (a message
    sent again) only one computes it.
    """
    with transaction.atomic():
        run = _owned(ANALYSIS, run_id, attempt).select_for_update().first()
        if run is None:
            return None, []
        todo = [name for name in names if name in run.pending and name not in set(run.parts_started)]
        if todo:
            AnalysisRun.objects.filter(pk=run_id).update(parts_started=[*run.parts_started, *todo])
    return run, todo


ANALYSIS = run_kind_register(RunKind(AnalysisRun, ResultTable, "analysis.run_analysis", "run", _analysis_steps))


def run_execute(*, kind: RunKind, run_id: int, attempt: int) -> None:
    """Compute a claimed run and finish it (done, or failed with the step and the error)."""
    run = kind.model.objects.select_related("study").get(pk=run_id)
    steps = RunSteps(lambda name: run_step(kind=kind, run_id=run_id, attempt=attempt, step=name))
    began = time.perf_counter()
    try:
        fields = kind.steps(run, attempt, steps)
    except RunSuperseded:
        logger.warning("%s %s: attempt %s was superseded; leaving it to the newer attempt", kind.label, run_id, attempt)
        return
    except Exception as exc:  # noqa: BLE001 - any failure must end up readable on the run
        if not isinstance(exc, kind.expected_failures):
            logger.exception("%s %s failed in step %s", kind.label, run_id, steps.current)
        steps.timings["total"] = round(time.perf_counter() - began, 3)
        run_fail(kind=kind, run_id=run_id, attempt=attempt, timings=steps.timings,
                 error=f"{steps.current}: {type(exc).__name__}: {exc}")
        return
    if fields is None:
        return
    steps.timings["total"] = round(time.perf_counter() - began, 3)
    if run_finish(kind=kind, run_id=run_id, attempt=attempt, timings=steps.timings, **fields):
        logger.info("%s %s done (attempt %s) in %.2fs", kind.label, run_id, attempt, steps.timings["total"])


def task_body(*, kind: RunKind, run_id: int) -> str:
    """What a run's Celery task does: claim the run and compute it.

    A delivery for a finished run, or for one another attempt holds, does nothing.
    """
    claim = run_claim(kind=kind, run_id=run_id)
    if claim.attempt is None:
        # Running means another attempt holds a live lease: if its worker died,
        # beat's pass sends the run again once the lease has expired.
        logger.info("%s %s is %s; nothing to do", kind.label, run_id, claim.status)
        return claim.status
    run_execute(kind=kind, run_id=run_id, attempt=claim.attempt)
    return kind.model.objects.filter(pk=run_id).values_list("status", flat=True).first() or "missing"
