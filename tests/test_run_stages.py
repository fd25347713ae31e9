"""An analysis run in stages: the paper's tables land first, part tasks land the rest, the last one finishes it.

The run's task sends its part tasks to a real (in-memory) kombu broker that
holds them, so a test sees the run between its stages and then delivers each
part as a worker would.
"""

from __future__ import annotations

import io
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone

from analysis import registry
from analysis.running import fanout, runs
from analysis.exporting.exports import ExportUnavailable, export_run
from analysis.models import AnalysisRun, ResultTable
from analysis.selectors import analysis_run_latest_done, result_table_frame, result_tables_so_far
from analysis.tasks import run_analysis, run_analysis_part
from config.celery import app
from tests.support.held_broker import held_broker, held_messages  # noqa: F401  (held_broker is a fixture)
from tests.support.quality_data import planted_import, planted_population
from tests.support.researcher import narrow_analyses

PAPER = ("win_table", "ttests", "anova", "sensitivity_win_table")
OTHERS = ("descriptives", "region_means", "bradley_terry", "rater_loo")


@pytest.fixture
def staged_study(tide, monkeypatch):
    planted_import(tide, [p for p in planted_population(n_honest=6) if not p.live])
    narrow_analyses(monkeypatch, (*PAPER, *OTHERS))
    return tide


def queued_run(study) -> AnalysisRun:
    return AnalysisRun.objects.create(study=study, thresholds=study.quality_thresholds)


def landed(run: AnalysisRun) -> set[str]:
    return set(ResultTable.objects.filter(run=run).values_list("name", flat=True))


def test_the_paper_tables_land_first_and_part_tasks_land_the_rest(staged_study, held_broker):
    run = queued_run(staged_study)
    assert run_analysis(run.pk) == "running"
    run.refresh_from_db()
    assert landed(run) == {"filter_flow", "filter_flow_by_subgroup", *PAPER}
    assert set(run.pending) == set(OTHERS) and (run.status, run.step) == ("running", "parts")
    assert set(result_tables_so_far(run=run)) == landed(run)
    # Nothing of a running run reads as final: not the tables, not the latest done run, not the exports.
    assert result_table_frame(run=run, name="win_table") is None
    assert analysis_run_latest_done(study=staged_study) is None
    with pytest.raises(ExportUnavailable):
        export_run(study=staged_study)

    parts = held_messages()
    # The slow analyses one task each, first; the quick ones together.
    assert parts == [(runs.PART_TASK_NAME, [run.pk, 1, names]) for names in
                     (["bradley_terry"], ["rater_loo"], ["descriptives", "region_means"])]
    for _, args in parts[:-1]:
        assert run_analysis_part.apply(args=args).get() == "landed"
        run.refresh_from_db()
        assert run.status == "running" and args[2][0] in landed(run) and args[2][0] not in run.pending
    assert run_analysis_part.apply(args=parts[-1][1]).get() == "landed"
    run.refresh_from_db()
    assert (run.status, run.step, run.pending, run.failures) == ("done", "done", [], {})
    assert landed(run) == {"filter_flow", "filter_flow_by_subgroup", *PAPER, *OTHERS}
    assert run.finished_at is not None and run.timings["total"] > 0
    assert {f"statistics.{name}" for name in (*PAPER, *OTHERS)} <= set(run.timings)
    assert not fanout.frames_path(run_id=run.pk, attempt=1).exists()  # the shared frames are removed
    assert analysis_run_latest_done(study=staged_study) == run

    # A redelivered part finds its tables landed and does nothing.
    finished = run.finished_at
    assert run_analysis_part.apply(args=parts[0][1]).get() == "nothing to do"
    run.refresh_from_db()
    assert run.finished_at == finished


def test_a_staged_run_gives_the_tables_of_a_run_computed_in_process(staged_study, held_broker, settings):
    staged = queued_run(staged_study)
    run_analysis(staged.pk)
    parts = held_messages()
    # One part runs on a machine without the frames file: it rebuilds them from the database.
    fanout.frames_discard(run_id=staged.pk, attempt=1)
    for _, args in parts:
        run_analysis_part.apply(args=args)
    staged.refresh_from_db()
    assert staged.status == "done"

    settings.CELERY_TASK_ALWAYS_EAGER = app.conf.task_always_eager = True
    in_process = queued_run(staged_study)
    assert run_analysis(in_process.pk) == "done"
    for name in (*PAPER, *OTHERS):
        mine, theirs = (ResultTable.objects.get(run=r, name=name) for r in (staged, in_process))
        assert (mine.columns, mine.rows) == (theirs.columns, theirs.rows), name


def test_a_part_of_a_superseded_attempt_writes_nothing(staged_study, held_broker, settings):
    settings.ANALYSIS_RUN_LEASE_SECONDS = 60
    run = queued_run(staged_study)
    run_analysis(run.pk)
    stale_parts = held_messages()
    # Attempt 1's worker died; attempt 2 takes the run over and lands its own paper tables.
    AnalysisRun.objects.filter(pk=run.pk).update(started_at=run.created_at.replace(year=2000))
    assert run_analysis(run.pk) == "running"
    for _, args in stale_parts:
        assert run_analysis_part.apply(args=args).get() == "nothing to do"
    run.refresh_from_db()
    assert run.attempts == 2 and set(run.pending) == set(OTHERS)
    assert not landed(run) & set(OTHERS)
    for _, args in held_messages():
        assert args[1] == 2
        run_analysis_part.apply(args=args)
    run.refresh_from_db()
    assert run.status == "done" and landed(run) >= set(OTHERS)


def test_a_part_that_cannot_read_its_frames_fails_the_run_with_a_reason(staged_study, held_broker):
    run = queued_run(staged_study)
    run_analysis(run.pk)
    fanout.frames_path(run_id=run.pk, attempt=1).write_bytes(b"not a pickle")
    first = held_messages()[0][1]
    assert run_analysis_part.apply(args=first).get() == "failed"
    run.refresh_from_db()
    assert run.status == "failed" and run.error.startswith("statistics (bradley_terry): UnpicklingError")
    assert result_tables_so_far(run=run) == {}  # a failed run's tables are never shown


def test_an_analysis_that_raises_in_a_part_is_recorded_and_the_run_still_finishes(staged_study, held_broker,
                                                                                   monkeypatch):
    from dataclasses import replace

    def broken(ratings, **kwargs):
        return ratings["no such column"]

    monkeypatch.setitem(registry.ANALYSES, "descriptives", replace(registry.ANALYSES["descriptives"], function=broken))
    run = queued_run(staged_study)
    run_analysis(run.pk)
    for _, args in held_messages():
        run_analysis_part.apply(args=args)
    run.refresh_from_db()
    assert run.status == "done" and run.pending == []
    assert set(run.failures) == {"descriptives"} and run.failures["descriptives"].startswith("KeyError: ")
    assert "region_means" in landed(run) and "descriptives" not in landed(run)


def test_with_the_broker_gone_the_run_computes_its_parts_itself(staged_study, settings, monkeypatch):
    from tests.test_tasks import _closed_port

    monkeypatch.delenv("CELERY_BROKER_URL", raising=False)  # Celery would prefer it to the closed port
    previous = (app.conf.task_always_eager, app.conf.broker_url, app._pool, app.amqp._producer_pool)
    settings.CELERY_TASK_ALWAYS_EAGER = app.conf.task_always_eager = False
    app.conf.broker_url = f"redis://127.0.0.1:{_closed_port()}/0"
    app._pool = app.amqp._producer_pool = None
    try:
        run = queued_run(staged_study)
        assert run_analysis(run.pk) == "done"
    finally:
        app.conf.task_always_eager, app.conf.broker_url, app._pool, app.amqp._producer_pool = previous
    assert landed(run) == {"filter_flow", "filter_flow_by_subgroup", *PAPER, *OTHERS}


# ---------------------------------------------------------------- parts lost to a broker outage (issue 30, item 2)


def test_parts_whose_messages_were_lost_are_sent_again_and_finish_the_run(staged_study, held_broker):
    run = queued_run(staged_study)
    assert run_analysis(run.pk) == "running"
    sent = held_messages()  # taken off the broker and dropped: a restarted Redis starts empty
    assert len(sent) == 3
    run.refresh_from_db()
    assert run.parts_sent_at is not None and run.parts_started == []
    # Beat's pass leaves parts sent a moment ago alone (they may be waiting for a busy worker)...
    assert runs.analysis_run_parts_resend(sent_before_seconds=runs.RESEND_AFTER_SECONDS) == []
    assert held_messages() == []
    # ...and a reconnected worker's pass (or the command, for cron) sends every part no worker began,
    # grouped as before.
    out = io.StringIO()
    call_command("requeue_stale_runs", "--older-than", "0", stdout=out)
    assert f"re-sent the parts of 1 run(s): {run.pk}" in out.getvalue()
    again = held_messages()
    assert sorted(tuple(args[2]) for _, args in again) == sorted(tuple(args[2]) for _, args in sent)
    for _, args in again:
        assert run_analysis_part.apply(args=args).get() == "landed"
    run.refresh_from_db()
    assert run.status == "done" and landed(run) == {"filter_flow", "filter_flow_by_subgroup", *PAPER, *OTHERS}


def test_a_part_begun_by_one_delivery_is_neither_sent_again_nor_computed_twice(staged_study, held_broker):
    run = queued_run(staged_study)
    run_analysis(run.pk)
    first, *rest = held_messages()
    runs._part_begin(run.pk, 1, first[1][2])  # a worker has begun the first part and is computing it
    assert runs.analysis_run_parts_resend(sent_before_seconds=0) == [run.pk]
    resent = [tuple(args[2]) for _, args in held_messages()]
    assert tuple(first[1][2]) not in resent and sorted(resent) == sorted(tuple(args[2]) for _, args in rest)
    # A second delivery of the begun part (its message sent twice) leaves it to the first one.
    assert run_analysis_part.apply(args=first[1]).get() == "nothing to do"
    assert not set(first[1][2]) & landed(run)


def test_a_delivery_for_a_run_another_attempt_holds_returns_at_once_instead_of_waiting(staged_study, held_broker):
    run = queued_run(staged_study)
    run_analysis(run.pk)
    held_messages()
    # Was a retry with a countdown of the lease's remainder (up to 1,830 s), a message held unacknowledged.
    assert run_analysis.apply(args=[run.pk]).get() == "running"
    assert held_messages() == []


def test_the_dashboard_lists_an_older_run_stuck_in_its_parts(staged_study, held_broker, owner_client, owner):
    staged_study.owners.add(owner)
    stuck = queued_run(staged_study)
    run_analysis(stuck.pk)
    held_messages()  # its parts' messages are lost
    AnalysisRun.objects.filter(pk=stuck.pk).update(parts_sent_at=timezone.now() - timedelta(minutes=5))
    newer = AnalysisRun.objects.create(study=staged_study, thresholds={**staged_study.quality_thresholds, "x": 1})
    dashboard = owner_client.get(f"/studies/{staged_study.slug}/").content.decode()
    assert f"Latest run <strong>#{newer.pk}</strong>" in dashboard
    listed = dashboard[dashboard.index("data-unfinished-runs"):]
    assert f"/runs/{stuck.pk}/" in listed and "4 tables still computing" in listed
    assert "no worker has begun" in listed


# ---------------------------------------------------------------- what researchers see meanwhile


def test_the_results_page_of_a_running_run_shows_the_paper_tables_and_lists_the_rest(
        staged_study, held_broker, owner_client, owner):
    staged_study.owners.add(owner)
    run = queued_run(staged_study)
    run_analysis(run.pk)
    url = f"/studies/{staged_study.slug}/runs/{run.pk}/"
    page = owner_client.get(url).content.decode()
    assert 'id="t-win_table"' in page and 'id="t-ttests"' in page and 'id="t-descriptives"' not in page
    assert "Still computing" in page and "4 tables to come" in page
    for name in OTHERS:
        assert registry.ANALYSES[name].title in page
    assert "run_progress.js" in page and f'data-status-url="{url[:-1]}.json"' in page
    assert "tables/win_table.csv" not in page  # downloads wait for the whole run
    status = owner_client.get(f"{url[:-1]}.json").json()
    assert status["status"] == "running" and set(status["pending"]) == set(OTHERS)
    dashboard = owner_client.get(f"/studies/{staged_study.slug}/").content.decode()
    assert "Results so far" in dashboard and "4 tables still computing" in dashboard
    assert owner_client.get(f"/studies/{staged_study.slug}/runs/{run.pk}/tables/win_table.csv").status_code == 404

    for _, args in held_messages():
        run_analysis_part.apply(args=args)
    page = owner_client.get(url).content.decode()
    assert "Still computing" not in page and "run_progress.js" not in page
    assert 'id="t-descriptives"' in page and "tables/win_table.csv" in page


def test_the_api_shows_what_is_pending_and_serves_no_table_until_the_run_is_done(
        staged_study, held_broker, owner, owner_api):
    staged_study.owners.add(owner)
    run = queued_run(staged_study)
    run_analysis(run.pk)
    detail = owner_api.get(f"/api/runs/{run.pk}/").json()
    assert detail["status"] == "running" and set(detail["pending"]) == set(OTHERS) and detail["tables_url"] is None
    response = owner_api.get(f"/api/studies/{staged_study.slug}/runs/{run.pk}/tables/")
    assert response.status_code == 409 and "running" in response.json()["detail"]
    assert owner_api.get(f"/api/studies/{staged_study.slug}/exports/participants.csv").status_code == 404
    for _, args in held_messages():
        run_analysis_part.apply(args=args)
    assert owner_api.get(f"/api/runs/{run.pk}/").json()["pending"] == []
    assert owner_api.get(f"/api/studies/{staged_study.slug}/runs/{run.pk}/tables/").status_code == 200


def test_the_plan_sends_the_longest_part_first_when_an_earlier_run_timed_the_tables():
    analyses = [registry.ANALYSES[name] for name in (*PAPER, *OTHERS)]
    plan = fanout.statistics_plan(analyses)
    assert [a.name for a in plan.paper] == list(PAPER)
    assert plan.parts == (("bradley_terry",), ("rater_loo",), ("descriptives", "region_means"))
    timed = fanout.statistics_plan(analyses, seconds={"bradley_terry": 1.0, "rater_loo": 4.0, "descriptives": 2.5,
                                                      "region_means": 2.5})
    assert timed.parts == (("descriptives", "region_means"), ("rater_loo",), ("bradley_terry",))
    assert sorted(timed.table_names) == sorted((*PAPER, *OTHERS))
