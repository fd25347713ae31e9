"""Analysis runs: creation, the conditional claim, idempotent redelivery, failure and takeover."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone

from analysis import quality, services
from analysis.models import AnalysisRun, ParticipantResult, ResultTable
from analysis.selectors import analysis_run_latest_done, result_table_frame
from analysis.tasks import analysis_run_execute, run_analysis
from config.celery import app
from tests.support.quality_data import planted_import, planted_population


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


def queued_run(study) -> AnalysisRun:
    return AnalysisRun.objects.create(study=study, thresholds=study.quality_thresholds)


def test_creating_a_run_copies_the_thresholds_and_runs_it_after_commit(small_study, eager, django_capture_on_commit_callbacks):
    small_study.duration_min_minutes = 9.0
    small_study.save()
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        run = services.analysis_run_create(study=small_study, requested_by="alice")
        assert AnalysisRun.objects.get(pk=run.pk).status == "queued"  # nothing runs before the commit
    assert len(callbacks) == 1
    run.refresh_from_db()
    assert run.status == "done" and run.requested_by == "alice" and run.attempts == 1
    assert run.thresholds == {**small_study.quality_thresholds, "duration_min_minutes": 9.0}
    steps = {key for key in run.timings if not key.startswith("statistics.")}
    assert steps == {"frames", "quality", "persist", "statistics", "total"}
    assert {"statistics.win_table", "statistics.ttests", "statistics.anova"} <= set(run.timings)
    assert run.finished_at is not None and run.step == "done"


def test_the_claim_takes_a_queued_run_once(small_study):
    run = queued_run(small_study)
    first = services.analysis_run_claim(run_id=run.pk)
    assert (first.attempt, first.status) == (1, "running")
    second = services.analysis_run_claim(run_id=run.pk)
    assert second.attempt is None and second.retry_in is not None and second.retry_in > 0
    run.refresh_from_db()
    assert run.attempts == 1 and run.started_at is not None


def test_the_claim_takes_over_a_running_run_whose_lease_expired(small_study, settings):
    settings.ANALYSIS_RUN_LEASE_SECONDS = 60
    run = queued_run(small_study)
    services.analysis_run_claim(run_id=run.pk)
    AnalysisRun.objects.filter(pk=run.pk).update(started_at=timezone.now() - timedelta(seconds=61))
    claim = services.analysis_run_claim(run_id=run.pk)
    assert claim.attempt == 2


def test_the_claim_leaves_finished_and_missing_runs_alone(small_study):
    run = queued_run(small_study)
    assert run_analysis(run.pk) == "done"
    assert services.analysis_run_claim(run_id=run.pk) == services.Claim(attempt=None, status="done")
    assert services.analysis_run_claim(run_id=run.pk + 1000).status == "missing"


def test_a_second_delivery_of_the_same_message_does_nothing(small_study):
    run = queued_run(small_study)
    assert run_analysis(run.pk) == "done"
    results = list(ParticipantResult.objects.filter(run=run).values_list("id", flat=True))
    finished = AnalysisRun.objects.get(pk=run.pk).finished_at
    assert run_analysis(run.pk) == "done"
    run.refresh_from_db()
    assert run.attempts == 1 and run.finished_at == finished
    assert list(ParticipantResult.objects.filter(run=run).values_list("id", flat=True)) == results


def test_a_retried_attempt_overwrites_the_results_of_the_dead_one(small_study, settings):
    settings.ANALYSIS_RUN_LEASE_SECONDS = 60
    run = queued_run(small_study)
    first = services.analysis_run_claim(run_id=run.pk)
    # The first attempt persisted its results and then died before finishing.
    analysis_run_execute(run, first.attempt)
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
    services.analysis_run_claim(run_id=run.pk)
    AnalysisRun.objects.filter(pk=run.pk).update(started_at=timezone.now() - timedelta(hours=1))
    services.analysis_run_claim(run_id=run.pk)  # attempt 2 takes over
    analysis_run_execute(run, 1)  # the old attempt wakes up
    run.refresh_from_db()
    assert (run.status, run.attempts) == ("running", 2)
    assert not ParticipantResult.objects.filter(run=run).exists()


def test_a_failing_step_marks_the_run_failed_and_its_tables_are_never_shown(small_study, monkeypatch):
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


def test_tables_of_a_run_that_is_not_done_are_not_shown(small_study):
    run = queued_run(small_study)
    run_analysis(run.pk)
    AnalysisRun.objects.filter(pk=run.pk).update(status="running")
    assert result_table_frame(run=run, name="filter_flow") is None
    assert analysis_run_latest_done(study=small_study) is None


@pytest.mark.django_db(transaction=True)  # on_commit must fire when the command's transaction commits
def test_the_command_runs_the_analysis_in_process_without_a_broker(small_study, eager, capsys):
    call_command("run_analysis", "--study", "tide", "--wait", "--timeout", "60")
    out = capsys.readouterr().out
    assert "done" in out and f"{small_study.participants.count()} participant(s)" in out
