"""A run's other tables computed side by side in forked processes where every worker is on this machine
(analysis.running.side_by_side), and the run that uses them (analysis.running.runs)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from concurrent.futures.process import BrokenProcessPool

import billiard
import pytest

from analysis import registry
from analysis.models import AnalysisRun, ResultTable
from analysis.running import runs, side_by_side
from analysis.running.side_by_side import SideBySide
from config.celery import app
from tests.support.held_broker import held_broker, held_messages  # noqa: F401  (held_broker is a fixture)
from tests.support.paths import ROOT
from tests.support.quality_data import planted_import, planted_population
from tests.support.researcher import narrow_analyses


def _square_and_pid(number: int) -> tuple[int, int]:
    return number * number, os.getpid()


# ---------------------------------------------------------------- the helper


def test_each_item_is_computed_in_a_forked_process_and_comes_back_once():
    with SideBySide(_square_and_pid, list(range(10)), processes=2) as computation:
        assert computation.forked
        results = list(computation.results())
    assert sorted(item for item, _ in results) == list(range(10))
    assert all(square == item * item for item, (square, _) in results)
    pids = {pid for _, (_, pid) in results}
    assert os.getpid() not in pids and 1 <= len(pids) <= 2


def test_a_closure_over_unpicklable_state_reaches_the_children_as_it_is():
    state = {"frames": (n for n in range(3)), "offset": 7}  # a generator cannot be pickled

    def function(item: int) -> int:
        return item + state["offset"]

    with SideBySide(function, [1, 2, 3], processes=2) as computation:
        assert sorted(result for _, result in computation.results()) == [8, 9, 10]


def test_with_one_process_or_one_item_everything_is_computed_here_in_order(settings):
    settings.ANALYSIS_PROCESSES = 1
    with SideBySide(_square_and_pid, [3, 1, 2]) as computation:
        assert not computation.forked
        assert list(computation.results()) == [(3, (9, os.getpid())), (1, (1, os.getpid())), (2, (4, os.getpid()))]
    settings.ANALYSIS_PROCESSES = 2
    with SideBySide(_square_and_pid, [5]) as computation:
        assert not computation.forked and list(computation.results()) == [(5, (25, os.getpid()))]


def test_a_second_computation_while_one_is_forked_is_computed_here():
    with SideBySide(_square_and_pid, [1, 2], processes=2) as outer:
        with SideBySide(_square_and_pid, [3, 4], processes=2) as inner:
            assert outer.forked and not inner.forked
            assert [pid for _, (_, pid) in inner.results()] == [os.getpid(), os.getpid()]
        assert {pid for _, (_, pid) in outer.results()} - {os.getpid()}
    with SideBySide(_square_and_pid, [5, 6], processes=2) as after:  # the first one let go
        assert after.forked


def _fails_on_three(number: int) -> int:
    if number == 3:
        raise ValueError("three is not allowed")
    return number


def test_an_exception_in_a_child_is_raised_here():
    with pytest.raises(ValueError, match="three is not allowed"):
        with SideBySide(_fails_on_three, [1, 2, 3, 4], processes=2) as computation:
            list(computation.results())


def _dies_on_two(number: int) -> int:
    if number == 2:
        os.kill(os.getpid(), signal.SIGKILL)
    return number


def test_a_child_that_is_killed_breaks_the_computation_instead_of_hanging_it():
    with pytest.raises(BrokenProcessPool):
        with SideBySide(_dies_on_two, [1, 2, 3], processes=2) as computation:
            list(computation.results())


def _count_studies(_: int) -> int:
    from surveys.models import Study

    return Study.objects.count()


@pytest.mark.django_db
def test_a_child_that_asks_for_the_database_is_refused_and_the_parents_connection_still_works(tide):
    with pytest.raises(side_by_side.ChildUsedTheDatabase):
        with SideBySide(_count_studies, [1, 2], processes=2) as computation:
            list(computation.results())
    assert _count_studies(0) >= 1  # the parent's session on the server was not ended by the children


def _grandchildren_pids(_: int) -> tuple[int, bool, list[int]]:
    """Inside a process of celery's pool (billiard marks it daemonic): its pid, whether it forked, and the
    pids of the processes that computed the items."""
    with SideBySide(_square_and_pid, [1, 2, 3, 4], processes=2) as computation:
        return os.getpid(), computation.forked, sorted({pid for _, (_, pid) in computation.results()})


def test_a_process_of_celerys_prefork_pool_may_fork_its_children():
    pool = billiard.Pool(1)
    try:
        pool_worker, forked, pids = pool.apply(_grandchildren_pids, (0,))
    finally:
        pool.terminate()
    # Computed in the pool worker's own children, not by the worker itself nor by this process.
    assert forked and pids and pool_worker not in pids and os.getpid() not in pids


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_the_children_are_killed_with_the_process_that_forked_them(tmp_path):
    pids_file = tmp_path / "children"
    script = textwrap.dedent(f"""
        import os, sys, time
        sys.path.insert(0, {str(ROOT)!r})
        from analysis.running.side_by_side import SideBySide

        def work(item):
            with open({str(pids_file)!r}, "a") as out:
                out.write(f"{{os.getpid()}}\\n")
            time.sleep(120)  # far longer than the test waits: only the parent's death ends it

        with SideBySide(work, [1, 2], processes=2) as computation:
            list(computation.results())
    """)
    parent = subprocess.Popen([sys.executable, "-c", script], cwd=ROOT,
                              env={**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings"})
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not (pids_file.exists() and len(pids_file.read_text().split()) == 2):
            time.sleep(0.05)
        children = [int(pid) for pid in pids_file.read_text().split()]
        assert len(children) == 2
        parent.kill()
        parent.wait(timeout=10)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(_alive(pid) for pid in children):
            time.sleep(0.05)
        assert not any(_alive(pid) for pid in children)
    finally:
        parent.kill()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is dead but not yet reaped (its parent, the killed process, is gone: init reaps it).
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


# ---------------------------------------------------------------- where a run's parts are computed


def test_parts_are_computed_here_when_every_worker_is_on_this_machine(settings, monkeypatch):
    monkeypatch.delenv("CELERY_BROKER_URL", raising=False)  # Celery prefers it to the broker_url set below
    settings.ANALYSIS_PARTS = "auto"
    previous = app.conf.broker_url
    try:
        settings.CELERY_TASK_ALWAYS_EAGER = True
        assert runs.parts_computed_here()  # no broker: tasks in-process
        settings.CELERY_TASK_ALWAYS_EAGER = False
        app.conf.broker_url = "filesystem://"
        assert runs.parts_computed_here()  # bin/run's broker
        app.conf.broker_url = "redis://127.0.0.1:6379/0"
        assert not runs.parts_computed_here()  # any worker on any machine may take a part
        settings.ANALYSIS_PARTS = "here"
        assert runs.parts_computed_here()
        settings.CELERY_TASK_ALWAYS_EAGER = True
        settings.ANALYSIS_PARTS = "broker"
        assert not runs.parts_computed_here()
    finally:
        app.conf.broker_url = previous


def test_a_bad_analysis_parts_setting_stops_the_process_with_a_message():
    result = subprocess.run([sys.executable, "-c", "import django; django.setup()"], cwd=ROOT, capture_output=True,
                            text=True, env={**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings",
                                            "ANALYSIS_PARTS": "everywhere"})
    assert result.returncode != 0 and "ANALYSIS_PARTS='everywhere': use auto, broker or here" in result.stderr


PAPER = ("win_table", "ttests", "anova", "sensitivity_win_table")
OTHERS = ("descriptives", "region_means", "bradley_terry", "rater_loo", "friedman")


@pytest.fixture
def planted_study(tide, monkeypatch):
    planted_import(tide, [p for p in planted_population(n_honest=6) if not p.live])
    narrow_analyses(monkeypatch, (*PAPER, *OTHERS))
    return tide


def test_a_run_in_process_computes_its_other_tables_side_by_side_and_finishes(planted_study, settings):
    settings.ANALYSIS_PROCESSES = 2
    run = AnalysisRun.objects.create(study=planted_study, thresholds=planted_study.quality_thresholds)
    assert runs.task_body(kind=runs.ANALYSIS, run_id=run.pk) == "done"
    run.refresh_from_db()
    assert (run.status, run.step, run.pending, run.failures) == ("done", "done", [], {})
    assert set(ResultTable.objects.filter(run=run).values_list("name", flat=True)) == {
        "filter_flow", "filter_flow_by_subgroup", *PAPER, *OTHERS}
    # Every other table was marked begun before it was computed, and no part was sent to a broker.
    assert set(run.parts_started) == set(OTHERS) and run.parts_sent_at is None
    assert {f"statistics.{name}" for name in (*PAPER, *OTHERS)} <= set(run.timings)


def test_the_tables_computed_side_by_side_are_those_part_tasks_compute(planted_study, held_broker, settings):
    staged = AnalysisRun.objects.create(study=planted_study, thresholds=planted_study.quality_thresholds)
    runs.task_body(kind=runs.ANALYSIS, run_id=staged.pk)
    for _, args in held_messages():
        runs.analysis_run_part(run_id=args[0], attempt=args[1], names=args[2])
    settings.CELERY_TASK_ALWAYS_EAGER = app.conf.task_always_eager = True
    settings.ANALYSIS_PROCESSES = 2
    here = AnalysisRun.objects.create(study=planted_study, thresholds=planted_study.quality_thresholds)
    assert runs.task_body(kind=runs.ANALYSIS, run_id=here.pk) == "done"
    staged.refresh_from_db()
    assert staged.status == "done"
    for name in (*PAPER, *OTHERS):
        mine, theirs = (ResultTable.objects.get(run=r, name=name) for r in (staged, here))
        assert (mine.columns, mine.rows) == (theirs.columns, theirs.rows), name


def test_an_analysis_that_raises_in_a_child_is_recorded_and_the_run_still_finishes(planted_study, monkeypatch,
                                                                                 settings):
    from dataclasses import replace

    def broken(ratings, **kwargs):
        return ratings["no such column"]

    settings.ANALYSIS_PROCESSES = 2
    monkeypatch.setitem(registry.ANALYSES, "descriptives", replace(registry.ANALYSES["descriptives"], function=broken))
    run = AnalysisRun.objects.create(study=planted_study, thresholds=planted_study.quality_thresholds)
    assert runs.task_body(kind=runs.ANALYSIS, run_id=run.pk) == "done"
    run.refresh_from_db()
    assert set(run.failures) == {"descriptives"} and run.failures["descriptives"].startswith("KeyError: ")
    assert not ResultTable.objects.filter(run=run, name="descriptives").exists()
    assert ResultTable.objects.filter(run=run, name="bradley_terry").exists()


def test_a_child_killed_fails_the_run_with_a_reason(planted_study, monkeypatch, settings):
    from dataclasses import replace

    def killed(ratings, **kwargs):
        os.kill(os.getpid(), signal.SIGKILL)

    settings.ANALYSIS_PROCESSES = 2
    monkeypatch.setitem(registry.ANALYSES, "rater_loo", replace(registry.ANALYSES["rater_loo"], function=killed))
    run = AnalysisRun.objects.create(study=planted_study, thresholds=planted_study.quality_thresholds)
    assert runs.task_body(kind=runs.ANALYSIS, run_id=run.pk) == "failed"
    run.refresh_from_db()
    assert run.status == "failed" and "BrokenProcessPool" in run.error, run.error


def test_the_other_tables_are_taken_longest_first_by_the_studys_last_run(planted_study, settings):
    settings.ANALYSIS_PROCESSES = 1  # one after the other, here: the order they land in is the order taken
    first = AnalysisRun.objects.create(study=planted_study, thresholds=planted_study.quality_thresholds)
    assert runs.task_body(kind=runs.ANALYSIS, run_id=first.pk) == "done"
    made_up = {"friedman": 5.0, "rater_loo": 4.0, "descriptives": 3.0, "region_means": 2.0, "bradley_terry": 1.0}
    AnalysisRun.objects.filter(pk=first.pk).update(
        timings={**first.timings, **{f"statistics.{name}": s for name, s in made_up.items()}})
    second = AnalysisRun.objects.create(study=planted_study, thresholds=planted_study.quality_thresholds)
    assert runs.task_body(kind=runs.ANALYSIS, run_id=second.pk) == "done"
    landed = list(ResultTable.objects.filter(run=second, name__in=OTHERS).order_by("pk").values_list("name", flat=True))
    assert landed == sorted(made_up, key=made_up.get, reverse=True)
