"""Real Celery workers on Redis and PostgreSQL: a run completes, and completes exactly once
when its worker is killed mid-run and another worker takes over.

Skipped unless CELERY_BROKER_URL is set (and the database is PostgreSQL);
with REQUIRE_SERVICES=1 a missing service fails the test instead.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import quote

import pytest
from django.conf import settings
from django.db import connection

from analysis.models import AnalysisRun, ParticipantResult, ResultTable
from analysis.running.runs import analysis_run_create
from tests.support.external_services import require_service
from tests.support.paths import ROOT
from tests.support.quality_data import planted_import, planted_population

pytestmark = pytest.mark.worker


@pytest.fixture
def broker():
    url = os.environ.get("CELERY_BROKER_URL", "")
    require_service(bool(url), "CELERY_BROKER_URL is not set")
    require_service(connection.vendor == "postgresql", "the worker tests need DATABASE_URL on PostgreSQL")
    import redis

    client = redis.Redis.from_url(url)
    try:
        client.ping()
    except redis.RedisError as exc:
        require_service(False, f"Redis at {url} is not reachable: {exc}")
    client.flushdb()
    yield url
    client.flushdb()


def _test_database_url() -> str:
    db = settings.DATABASES["default"]
    auth = quote(db["USER"] or "") + (":" + quote(db["PASSWORD"]) if db.get("PASSWORD") else "")
    return f"postgres://{auth}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


class Worker:
    def __init__(self, name: str, app: str, log: Path, *, beat: bool = False, **env: str):
        self.log = log
        full_env = {**os.environ, "DATABASE_URL": _test_database_url(), "PYTHONPATH": str(ROOT), **env}
        # Celery beat inside the worker, as bin/serve-production runs it (its schedule file beside the log).
        beat_args = ["--beat", "--schedule", str(log.with_suffix(".beat"))] if beat else []
        self.process = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", app, "worker", "--pool=solo", "--concurrency=1", "-l", "info",
             "-n", f"{name}@%h", "--without-gossip", "--without-mingle", "--without-heartbeat", *beat_args],
            cwd=ROOT, env=full_env, stdout=log.open("w"), stderr=subprocess.STDOUT, start_new_session=True,
        )

    def kill(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(10)

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.kill()

    def output(self) -> str:
        return self.log.read_text() if self.log.exists() else ""


@pytest.fixture
def workers(tmp_path):
    started: list[Worker] = []

    def start(name: str, app: str = "config", *, beat: bool = False, **env: str) -> Worker:
        worker = Worker(name, app, tmp_path / f"{name}.log", beat=beat, **env)
        started.append(worker)
        return worker

    yield start
    for worker in started:
        worker.stop()


@pytest.fixture
def imported(transactional_db, tide):
    planted_import(tide, [p for p in planted_population(n_honest=30) if not p.live])
    return tide


def wait_for(predicate, timeout: float, what: str, workers_to_show=()):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.3)
    logs = "\n".join(f"--- {w.log.name}\n{w.output()[-3000:]}" for w in workers_to_show)
    pytest.fail(f"timed out after {timeout}s waiting for {what}\n{logs}")


def status_of(run: AnalysisRun) -> str:
    run.refresh_from_db()
    return run.status


def test_a_real_worker_computes_a_queued_run(broker, imported, workers):
    worker = workers("solo")
    run = analysis_run_create(study=imported, requested_by="worker test")
    wait_for(lambda: status_of(run) in {"done", "failed"}, 90, "the run to finish", [worker])
    assert run.status == "done", run.error
    assert run.attempts == 1
    assert ParticipantResult.objects.filter(run=run).count() == imported.participants.count()
    assert "done (attempt 1)" in worker.output()


def test_a_run_whose_worker_is_killed_completes_exactly_once_on_another_worker(broker, imported, workers):
    slow = workers("doomed", app="tests.support.celery_test_app", TEST_STATISTICS_DELAY="300", TEST_VISIBILITY_TIMEOUT="3600")
    run = analysis_run_create(study=imported, requested_by="kill test")

    def in_statistics() -> bool:
        run.refresh_from_db()
        return run.status == "running" and run.step == "statistics"

    wait_for(in_statistics, 90, "the first attempt to reach the statistics step", [slow])
    # Its quality results are written; now the machine dies.
    assert ParticipantResult.objects.filter(run=run).count() == imported.participants.count()
    slow.kill()
    run.refresh_from_db()
    assert (run.status, run.attempts) == ("running", 1)

    # A delivery that finds the dead attempt's lease live does nothing (no countdown retry holding the
    # message); beat's pass sends the run again once the lease has expired.
    rescuer = workers("rescuer", app="tests.support.celery_test_app", beat=True, TEST_VISIBILITY_TIMEOUT="3",
                      TEST_RUN_LEASE_SECONDS="5", ANALYSIS_REQUEUE_SECONDS="1")
    wait_for(lambda: status_of(run) in {"done", "failed"}, 120, "the redelivered run to finish", [slow, rescuer])
    assert run.status == "done", run.error
    assert run.attempts == 2
    n = imported.participants.count()
    assert ParticipantResult.objects.filter(run=run).count() == n
    assert ParticipantResult.objects.filter(run=run).values("participant").distinct().count() == n
    assert ResultTable.objects.filter(run=run, name="filter_flow").count() == 1
    log = slow.output() + rescuer.output()
    assert log.count(f"run {run.pk} done") == 1
    assert "done (attempt 2)" in rescuer.output()


def test_two_workers_share_a_run_as_part_tasks_and_give_the_tables_of_an_in_process_run(
        broker, imported, workers, settings):
    from analysis import registry
    from analysis.running import fanout
    from analysis.tasks import run_analysis
    from config.celery import app

    pair = [workers("left"), workers("right")]
    for worker in pair:
        wait_for(lambda w=worker: "ready." in w.output(), 60, f"{worker.log.name} to start", pair)
    run = analysis_run_create(study=imported, requested_by="fan-out test")
    wait_for(lambda: status_of(run) in {"done", "failed"}, 120, "the run to finish", pair)
    assert run.status == "done" and run.pending == [], run.error

    # The run was split: each part task logs where it read its frames; both workers took parts.
    parts = fanout.statistics_plan(registry.statistics_analyses()).parts
    per_worker = [w.output().count(f"run {run.pk} part ") for w in pair]
    assert sum(per_worker) == len(parts) > 1 and all(per_worker), per_worker
    assert sum(w.output().count("frames from the file") for w in pair) == len(parts)

    settings.CELERY_TASK_ALWAYS_EAGER = app.conf.task_always_eager = True
    try:
        in_process = AnalysisRun.objects.create(study=imported, thresholds=imported.quality_thresholds)
        assert run_analysis(in_process.pk) == "done"
    finally:
        settings.CELERY_TASK_ALWAYS_EAGER = app.conf.task_always_eager = False
    tables = {r.pk: {t.name: (t.columns, t.rows) for t in ResultTable.objects.filter(run=r)} for r in (run, in_process)}
    assert set(tables[run.pk]) == set(tables[in_process.pk])
    assert [name for name in tables[run.pk] if tables[run.pk][name] != tables[in_process.pk][name]] == []
