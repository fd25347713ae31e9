"""End to end on planted data: import -> task -> persisted results, checked against the planted truth."""

from __future__ import annotations

import pytest

from analysis.models import AnalysisRun, ParticipantResult
from analysis.quality import OUTSIDE_GROUPS
from analysis.selectors import result_table_frame
from analysis.tasks import run_analysis
from surveys.models import Study
from tests.support.quality_data import (
    GENDERS,
    RULES,
    expected_flow,
    expected_reject_reason,
    live_participants_create,
    planted_import,
    planted_population,
    too_fast_cutoff,
)
from tests.support.shared import in_process_tasks, rows_kept_until_exit
from tests.support.studies import load_fixture


@pytest.fixture(scope="module")
def _planted_rows(django_db_setup, django_db_blocker):
    """TIDE with the planted population imported, its live participants and a finished run, built once:
    every test here only reads them (tests/support/shared.py). Returns (study pk, people, run pk)."""
    with rows_kept_until_exit(django_db_blocker), in_process_tasks():
        study = load_fixture("tide.json")
        people = planted_population()
        planted_import(study, people)
        live_participants_create(study, people)
        run = AnalysisRun.objects.create(study=study, thresholds=study.quality_thresholds)
        assert run_analysis(run.pk) == "done"
        yield study.pk, people, run.pk


@pytest.fixture
def tide(_planted_rows, db):
    return Study.objects.get(pk=_planted_rows[0])


@pytest.fixture
def planted(_planted_rows):
    return _planted_rows[1]


@pytest.fixture
def planted_run(_planted_rows, db):
    return AnalysisRun.objects.get(pk=_planted_rows[2])


def _results(run):
    return {r.participant.external_id: r for r in ParticipantResult.objects.filter(run=run).select_related("participant")}


def test_it_excludes_every_planted_participant_by_the_planted_rule(planted, planted_run):
    results = _results(planted_run)
    assert {k: r.excluded_by for k, r in results.items()} == {p.external_id: p.excluded_by for p in planted}


def test_the_filter_flow_is_the_planted_one(planted, planted_run):
    flow = result_table_frame(run=planted_run, name="filter_flow")
    assert list(flow.columns) == ["step", "rule", "excluded", "remaining", "flagged_alone"]
    assert flow.to_dict("records") == expected_flow(planted)
    assert planted_run.n_participants == len(planted)
    assert planted_run.n_retained == sum(p.excluded_by == "" for p in planted)


def test_the_flow_by_subgroup_counts_the_planted_exclusions(planted, planted_run):
    """TIDE's gender comparison (Woman vs Man): the planted non-binary and blank answers are in neither group."""
    table = result_table_frame(run=planted_run, name="filter_flow_by_subgroup")
    assert list(table.columns) == ["step", "rule", "grouping", "group", "excluded"]
    gender = table[table["grouping"] == "gender"]
    got = {(row.rule, row.group): row.excluded for row in gender.itertuples()}

    def group_of(answer: str) -> str:
        return answer if answer in ("Woman", "Man") else OUTSIDE_GROUPS

    expected = {
        (rule, label): sum(p.excluded_by == rule and group_of(p.gender) == label for p in planted)
        for rule in RULES
        for label in {group_of(g) for g in GENDERS}
    }
    assert got == expected
    assert set(table["grouping"]) == {"age", "education", "gender", "race"}


def test_payment_decisions_follow_the_prolific_grounds(planted, planted_run):
    cutoff = too_fast_cutoff(planted)
    # The data set must actually exercise both grounds and keep clear of the cutoff.
    assert 10.0 < cutoff < 25.0
    assert all(abs(p.duration_minutes - cutoff) > 0.5 for p in planted if p.completed)
    results = _results(planted_run)
    expected = {p.external_id: expected_reject_reason(p, planted) for p in planted}
    assert {k: r.reject_reason for k, r in results.items()} == expected
    assert expected["live_two_failures"] == "failed_attention_checks"
    assert expected["exactly_10_minutes"] == "too_fast"
    assert {k: r.payable for k, r in results.items()} == {
        p.external_id: p.completed and expected[p.external_id] == "" for p in planted
    }


def test_boundary_near_misses_are_measured_exactly(planted, planted_run):
    results = _results(planted_run)
    assert results["exactly_10_minutes"].duration_minutes == 10.0
    assert results["exactly_75_minutes"].duration_minutes == 75.0
    assert results["quarter_fast_with_10s_block"].fast_share == 0.25
    assert results["low_sd_good_mae"].sd == 0.0 and results["low_sd_good_mae"].mae == pytest.approx(0.6)
    assert results["high_mae_varied"].mae > 0.9 and results["high_mae_varied"].sd > 0.6
    assert results["live_two_failures"].attention_failures == 2
