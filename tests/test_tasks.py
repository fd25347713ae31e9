"""Analysis runs: creation, the conditional claim, idempotent redelivery, failure and takeover."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone

from analysis import quality, registry
from analysis.running import fanout, runs
from analysis.automatic_metrics import metrics_run
from analysis.models import AnalysisRun, ParticipantResult, ResultTable
from analysis.selectors import analysis_run_latest_done, result_table_frame
from analysis.tasks import run_analysis
from config.celery import app
from tests.support.quality_data import planted_import, planted_population
from tests.support.researcher import narrow_analyses


@pytest.fixture
def eager():
    """Run tasks in-process even when the environment names a broker."""
    previous = app.conf.task_always_eager
    app.conf.task_always_eager = True
    yield
    app.conf.task_always_eager = previous


@pytest.fixture
def small_study(tide):
    planted_import(tide, [p for p in planted_population(n_honest=6) if not p.live])
    return tide


def claim_run(run_id: int) -> runs.Claim:
    return runs.run_claim(kind=runs.ANALYSIS, run_id=run_id)


def execute(run: AnalysisRun, attempt: int) -> None:
    runs.run_execute(kind=runs.ANALYSIS, run_id=run.pk, attempt=attempt)


def queued_run(study) -> AnalysisRun:
    return AnalysisRun.objects.create(study=study, thresholds=study.quality_thresholds)


def test_creating_a_run_copies_the_thresholds_and_runs_it_after_commit(small_study, eager, django_capture_on_commit_callbacks,
                                                                      monkeypatch):
    # The tables whose timings are checked below, one of them a part of its own (the fan-out); the
    # other models would only add their minutes.
    narrow_analyses(monkeypatch, ("win_table", "ttests", "anova", "mixed_model"))
    small_study.duration_min_minutes = 9.0
    small_study.save()
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        run = runs.analysis_run_create(study=small_study, requested_by="alice")
        assert AnalysisRun.objects.get(pk=run.pk).status == "queued"  # nothing runs before the commit
    assert len(callbacks) == 1
    run.refresh_from_db()
    assert run.status == "done" and run.requested_by == "alice" and run.attempts == 1
    assert run.thresholds == {**small_study.quality_thresholds, "duration_min_minutes": 9.0}
    # In-process, the part (mixed_model) is computed side by side here: no frames file, no part task.
    steps = {key for key in run.timings if not key.startswith(("statistics.", "part."))}
    assert steps == {"frames", "quality", "persist", "statistics", "total"}
    assert {"statistics.win_table", "statistics.ttests", "statistics.anova", "statistics.mixed_model"
            } == {key for key in run.timings if key.startswith(("statistics.", "part."))}
    assert run.finished_at is not None and run.step == "done" and run.pending == []


def test_the_claim_takes_a_queued_run_once(small_study):
    run = queued_run(small_study)
    first = claim_run(run.pk)
    assert (first.attempt, first.status) == (1, "running")
    second = claim_run(run.pk)
    assert second == runs.Claim(attempt=None, status="running")
    run.refresh_from_db()
    assert run.attempts == 1 and run.started_at is not None


def test_the_claim_takes_over_a_running_run_whose_lease_expired(small_study, settings):
    settings.ANALYSIS_RUN_LEASE_SECONDS = 60
    run = queued_run(small_study)
    claim_run(run.pk)
    AnalysisRun.objects.filter(pk=run.pk).update(started_at=timezone.now() - timedelta(seconds=61))
    claim = claim_run(run.pk)
    assert claim.attempt == 2


def test_the_claim_leaves_finished_and_missing_runs_alone(small_study, quick_stats):  # any run will do
    run = queued_run(small_study)
    assert run_analysis(run.pk) == "done"
    assert claim_run(run.pk) == runs.Claim(attempt=None, status="done")
    assert claim_run(run.pk + 1000).status == "missing"


def test_a_second_delivery_of_the_same_message_does_nothing(small_study, quick_stats):  # any run will do
    run = queued_run(small_study)
    assert run_analysis(run.pk) == "done"
    results = list(ParticipantResult.objects.filter(run=run).values_list("id", flat=True))
    finished = AnalysisRun.objects.get(pk=run.pk).finished_at
    assert run_analysis(run.pk) == "done"
    run.refresh_from_db()
    assert run.attempts == 1 and run.finished_at == finished
    assert list(ParticipantResult.objects.filter(run=run).values_list("id", flat=True)) == results


def test_a_retried_attempt_overwrites_the_results_of_the_dead_one(small_study, settings, quick_stats):
    settings.ANALYSIS_RUN_LEASE_SECONDS = 60
    run = queued_run(small_study)
    first = claim_run(run.pk)
    # The first attempt persisted its results and then died before finishing.
    execute(run, first.attempt)
    AnalysisRun.objects.filter(pk=run.pk).update(status="running", finished_at=None, started_at=timezone.now() - timedelta(hours=1))
    assert run_analysis(run.pk) == "done"
    run.refresh_from_db()
    n_participants = small_study.participants.count()
    assert run.attempts == 2
    assert ParticipantResult.objects.filter(run=run).count() == n_participants
    assert ParticipantResult.objects.filter(run=run).values("participant").distinct().count() == n_participants
    assert ResultTable.objects.filter(run=run, name="filter_flow").count() == 1


def test_a_superseded_attempt_writes_nothing_and_does_not_finish_the_run(small_study, settings):
    settings.ANALYSIS_RUN_LEASE_SECONDS = 60
    run = queued_run(small_study)
    claim_run(run.pk)
    AnalysisRun.objects.filter(pk=run.pk).update(started_at=timezone.now() - timedelta(hours=1))
    claim_run(run.pk)  # attempt 2 takes over
    execute(run, 1)  # the old attempt wakes up
    run.refresh_from_db()
    assert (run.status, run.attempts) == ("running", 2)
    assert not ParticipantResult.objects.filter(run=run).exists()


def test_a_failing_step_marks_the_run_failed_and_its_tables_are_never_shown(small_study, monkeypatch, quick_stats):
    good = queued_run(small_study)
    run_analysis(good.pk)

    def broken(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(quality, "apply_quality_rules", broken)
    bad = queued_run(small_study)
    assert run_analysis(bad.pk) == "failed"
    bad.refresh_from_db()
    assert bad.error == "quality: RuntimeError: boom"
    assert "frames" in bad.timings and bad.finished_at is not None
    assert analysis_run_latest_done(study=small_study) == good
    assert result_table_frame(run=bad, name="filter_flow") is None


def test_tables_of_a_run_that_is_not_done_are_not_shown(small_study, quick_stats):  # only filter_flow is read
    run = queued_run(small_study)
    run_analysis(run.pk)
    AnalysisRun.objects.filter(pk=run.pk).update(status="running")
    assert result_table_frame(run=run, name="filter_flow") is None
    assert analysis_run_latest_done(study=small_study) is None


@pytest.mark.django_db(transaction=True)  # on_commit must fire when the command's transaction commits
def test_the_command_runs_the_analysis_in_process_without_a_broker(small_study, eager, capsys, quick_stats):
    call_command("run_analysis", "--study", "tide", "--wait", "--timeout", "60")
    out = capsys.readouterr().out
    assert "done" in out and f"{small_study.participants.count()} participant(s)" in out


def test_an_attempt_whose_lease_expired_during_the_statistics_cannot_overwrite_the_newer_attempts_tables(
        small_study, settings, monkeypatch, quick_stats):  # the quick tables: win_table and one part
    """The statistics step is the longest: a worker may lose its lease in it, and must then write nothing."""
    from analysis import pipeline

    settings.ANALYSIS_RUN_LEASE_SECONDS = 60
    # Everything in this process: the takeover below is started from inside the statistics, which a
    # side-by-side child may not do (it has no database).
    settings.ANALYSIS_PROCESSES = 1
    run = queued_run(small_study)
    real_statistics = pipeline.compute_statistics
    calls = []

    def statistics_while_another_attempt_takes_over(*args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            # Attempt 1 is computing; its lease runs out and a redelivery (attempt 2) does the whole run.
            AnalysisRun.objects.filter(pk=run.pk).update(started_at=timezone.now() - timedelta(hours=1))
            assert run_analysis(run.pk) == "done"
            stale = real_statistics(*args, **kwargs)
            stale.tables["win_table"] = stale.tables["win_table"].assign(winner="stale attempt")
            stale.tables["stale_only"] = stale.tables["win_table"]
            return stale
        return real_statistics(*args, **kwargs)

    monkeypatch.setattr(pipeline, "compute_statistics", statistics_while_another_attempt_takes_over)
    assert run_analysis(run.pk) == "done"  # attempt 1 ends: superseded, it leaves the run as attempt 2 left it
    run.refresh_from_db()
    # Attempt 1's paper tables, then attempt 2's paper tables and its other tables one by one, here; no attempt
    # sent a part.
    others = [name for part in fanout.statistics_plan(registry.statistics_analyses()).parts for name in part]
    assert (run.status, run.attempts, len(calls)) == ("done", 2, 2 + len(others))
    assert "stale attempt" not in set(result_table_frame(run=run, name="win_table")["winner"])
    assert not ResultTable.objects.filter(run=run, name="stale_only").exists()


def test_persisting_tables_checks_that_the_attempt_still_owns_the_run(small_study, settings):
    settings.ANALYSIS_RUN_LEASE_SECONDS = 60
    run = queued_run(small_study)
    first = claim_run(run.pk)
    AnalysisRun.objects.filter(pk=run.pk).update(started_at=timezone.now() - timedelta(hours=1))
    second = claim_run(run.pk)
    table = {"win_table": quality.pd.DataFrame({"x": [1]})}
    with pytest.raises(runs.RunSuperseded):
        runs.run_tables_persist(kind=runs.ANALYSIS, run_id=run.pk, attempt=first.attempt, tables=table)
    assert not ResultTable.objects.filter(run=run).exists()
    runs.run_tables_persist(kind=runs.ANALYSIS, run_id=run.pk, attempt=second.attempt, tables=table)
    assert ResultTable.objects.filter(run=run, name="win_table").count() == 1


def test_an_analysis_that_raises_is_recorded_on_the_run_and_the_other_tables_stand(small_study, monkeypatch):
    from dataclasses import replace

    from analysis import registry

    def broken(ratings, **kwargs):
        return ratings["no such column"]

    monkeypatch.setattr(registry, "ANALYSES", {
        "descriptives": registry.ANALYSES["descriptives"],
        "win_table": replace(registry.ANALYSES["win_table"], function=broken),
    })
    run = queued_run(small_study)
    assert run_analysis(run.pk) == "done"
    run.refresh_from_db()
    assert set(run.failures) == {"win_table"} and run.failures["win_table"].startswith("KeyError: ")
    assert result_table_frame(run=run, name="descriptives") is not None
    assert result_table_frame(run=run, name="win_table") is None  # no quiet "could not run" row instead


@pytest.mark.slow(reason="with the metrics stack installed, the metrics run really computes")
def test_a_metrics_run_is_requeued_like_an_analysis_run(small_study):
    from analysis.models import MetricsRun

    analysis_run = queued_run(small_study)
    metrics = MetricsRun.objects.create(study=small_study)
    assert runs.runs_requeue() == {"run": [analysis_run.pk], "metrics run": [metrics.pk]}
    analysis_run.refresh_from_db()
    metrics.refresh_from_db()
    assert (analysis_run.status, analysis_run.attempts) == ("done", 1)
    # Without the optional stack the run fails with the install hint; with it, it is done.
    assert metrics.attempts == 1 and metrics.status in {"done", "failed"}
    assert metrics.status == "done" or "pip install" in metrics.error


def test_a_request_for_a_run_identical_to_a_queued_one_gets_that_run(small_study):
    first = runs.analysis_run_create(study=small_study, requested_by="alice")  # on_commit does not fire here: queued
    again = runs.analysis_run_create(study=small_study, requested_by="bob")
    assert again.pk == first.pk and AnalysisRun.objects.filter(study=small_study).count() == 1
    small_study.duration_min_minutes = 9.0
    small_study.save()
    other = runs.analysis_run_create(study=small_study, requested_by="alice")  # other thresholds: another run
    assert other.pk != first.pk
    assert metrics_run.metrics_run_create(study=small_study).pk == metrics_run.metrics_run_create(study=small_study).pk


def _closed_port() -> int:
    import socket

    with socket.socket() as probe:  # a port nothing listens on: a broker that is down
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def broker_down(settings):
    """Tasks are sent for real, to a broker that is down (so every send fails and runs stay queued)."""
    previous = (app.conf.task_always_eager, app.conf.broker_url, app._pool, app.amqp._producer_pool)
    settings.CELERY_TASK_ALWAYS_EAGER = app.conf.task_always_eager = False
    app.conf.broker_url = f"redis://127.0.0.1:{_closed_port()}/0"
    app._pool = app.amqp._producer_pool = None  # connect anew, to the new URL
    yield
    app.conf.task_always_eager, app.conf.broker_url, app._pool, app.amqp._producer_pool = previous


@pytest.mark.django_db(transaction=True)
def test_concurrent_requests_for_the_same_run_queue_it_once(tide, broker_down):
    from tests.support.threads import in_threads

    ids = in_threads(6, lambda i: runs.analysis_run_create(study=tide, requested_by=f"user{i}").pk)
    assert len(set(ids)) == 1
    assert list(AnalysisRun.objects.filter(study=tide).values_list("status", flat=True)) == ["queued"]


def _enqueue_each_kind_in_a_fresh_process(broker_port: int) -> list[tuple[str, str, float]]:
    """(kind, sent, seconds) of ``runs.run_enqueue`` for every run kind, in a fresh process (as a web worker)
    whose broker is redis on ``broker_port``."""
    import os
    import subprocess
    import sys

    script = (
        "import time, django; django.setup(); import analysis.tasks; from analysis.running import runs\n"
        "for kind in runs.KINDS.values():\n"
        "    began = time.perf_counter(); sent = runs.run_enqueue(kind=kind, run_id=1)\n"
        "    print(kind.label, sent, round(time.perf_counter() - began, 3))\n"
    )
    env = {**os.environ, "CELERY_BROKER_URL": f"redis://127.0.0.1:{broker_port}/0",
           "DJANGO_SETTINGS_MODULE": "config.settings"}
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return [(label, sent, float(seconds)) for label, sent, seconds in
            (line.rsplit(" ", 2) for line in out.stdout.splitlines())]


def test_starting_a_run_with_the_broker_down_answers_at_once_and_leaves_the_run_queued():
    """run_enqueue must not sleep between its retries (kombu's default waits 2 s)."""
    lines = _enqueue_each_kind_in_a_fresh_process(_closed_port())
    assert [(label, sent) for label, sent, _ in lines] == [("run", "False"), ("metrics run", "False")]
    assert all(seconds < 1.0 for _, _, seconds in lines), lines  # was 2.1 s


def test_starting_a_run_with_a_hung_broker_answers_within_a_second_and_leaves_the_run_queued():
    """A broker that accepts connections and never answers (Redis stopped with SIGSTOP): the send gives up
    after RUN_PUBLISH_TIMEOUT_SECONDS instead of the pool's 5 s socket timeout."""
    import socket

    with socket.socket() as hung:
        hung.bind(("127.0.0.1", 0))
        hung.listen(16)  # the kernel completes the handshakes; nothing ever reads or answers
        lines = _enqueue_each_kind_in_a_fresh_process(hung.getsockname()[1])
    assert [(label, sent) for label, sent, _ in lines] == [("run", "False"), ("metrics run", "False")]
    assert all(seconds < 1.0 for _, _, seconds in lines), lines  # was 5 s (socket_timeout)


def test_a_run_whose_every_attempt_died_is_failed_with_a_reason_instead_of_retried(small_study, settings):
    from analysis.tasks import requeue_stale_runs

    settings.ANALYSIS_RUN_LEASE_SECONDS = 60
    settings.ANALYSIS_RUN_MAX_ATTEMPTS = 2
    run = queued_run(small_study)
    for _ in range(2):  # two attempts whose workers died mid-run
        assert claim_run(run.pk).attempt is not None
        AnalysisRun.objects.filter(pk=run.pk).update(started_at=timezone.now() - timedelta(hours=1))
    assert requeue_stale_runs() == {"run": [], "metrics run": [], "parts": []}  # the beat task: nothing to send again
    run.refresh_from_db()
    assert (run.status, run.attempts) == ("failed", 2)
    assert "stopped without finishing 2 times" in run.error and run.finished_at is not None
    assert claim_run(run.pk) == runs.Claim(attempt=None, status="failed")  # a late redelivery does nothing


def test_a_late_delivery_for_an_exhausted_run_fails_it_visibly(small_study, settings):
    settings.ANALYSIS_RUN_LEASE_SECONDS = 60
    settings.ANALYSIS_RUN_MAX_ATTEMPTS = 1
    run = queued_run(small_study)
    claim_run(run.pk)
    AnalysisRun.objects.filter(pk=run.pk).update(started_at=timezone.now() - timedelta(hours=1))
    assert run_analysis(run.pk) == "failed"
    assert AnalysisRun.objects.get(pk=run.pk).attempts == 1


def test_beat_sends_stale_runs_every_minute(settings):
    schedule = settings.CELERY_BEAT_SCHEDULE["requeue-stale-runs"]
    assert schedule["task"] == "analysis.requeue_stale_runs" and schedule["schedule"] <= 60
    assert schedule["task"] in app.tasks


def test_the_dashboard_says_when_a_run_waits_for_a_worker_or_its_worker_died(client, small_study, settings):
    from django.contrib.auth import get_user_model

    settings.ANALYSIS_RUN_LEASE_SECONDS = 60
    user = get_user_model().objects.create_user("watcher", password="pw-watcher-1")
    small_study.owners.add(user)
    client.force_login(user)
    run = queued_run(small_study)
    page = client.get(f"/studies/{small_study.slug}/").content.decode()
    assert "data-run-waiting" not in page  # just queued: nothing to worry about
    AnalysisRun.objects.filter(pk=run.pk).update(created_at=timezone.now() - timedelta(minutes=5))
    assert "no worker has taken it" in client.get(f"/studies/{small_study.slug}/").content.decode()
    claim_run(run.pk)
    AnalysisRun.objects.filter(pk=run.pk).update(started_at=timezone.now() - timedelta(hours=1))
    assert "Its worker stopped answering" in client.get(f"/studies/{small_study.slug}/").content.decode()


def test_a_kind_of_run_registered_outside_runs_is_computed_by_its_own_steps(small_study, monkeypatch):
    # runs.py names only the analysis run; the metrics run registers itself from metrics_run.py, as this one does.
    assert {"run", "metrics run"} <= set(runs.KINDS)
    monkeypatch.setattr(runs, "KINDS", dict(runs.KINDS))
    computed = []

    def steps(run, attempt, timer):
        with timer.step("count"):
            computed.append((run.pk, attempt))
        return {}

    kind = runs.run_kind_register(runs.RunKind(AnalysisRun, ResultTable, "tests.throwaway", "throwaway run", steps))
    run = AnalysisRun.objects.create(study=small_study)
    claim = runs.run_claim(kind=kind, run_id=run.pk)
    runs.run_execute(kind=kind, run_id=run.pk, attempt=claim.attempt)
    run.refresh_from_db()
    assert computed == [(run.pk, 1)] and run.status == "done" and "count" in run.timings
    assert runs.KINDS["throwaway run"] is kind
