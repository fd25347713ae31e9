"""CSV exports (DESIGN 3.3) from the latest finished run."""

from __future__ import annotations

import csv

import pytest
from django.core.management import CommandError, call_command

from analysis.design import study_design
from analysis.exporting.exports import EXPORTS, IDENTIFIER_EXPORT_COLUMNS, csv_cell, participant_export_columns
from analysis.models import AnalysisRun
from analysis.tasks import run_analysis
from surveys.models import Participant
from tests.support.quality_data import expected_flow, planted_import, planted_population
from tests.support.studies import set_answers

FORMULA = '=HYPERLINK("http://evil.example","click")'
DDE = "+cmd|' /C calc'!A0"


@pytest.fixture
def analysed(tide, quick_stats):
    # The exports read the quality rules and the filter flow, which every run computes;
    # the mixed and ordinal models (~20 s, checked in tests/test_stats.py) add nothing here.
    people = [p for p in planted_population(n_honest=6) if not p.live]
    planted_import(tide, people)
    # Formula-like answers, as a participant could type them: every participant's gender is a formula,
    # every other participant's education starts with "+" (a DDE payload; tests/test_escaping.py's
    # bot-and-full-run journey checked these cells before, merged here), honest000's with "=".
    set_answers(Participant.objects.filter(study=tide), gender=FORMULA, education=DDE)
    honest = Participant.objects.get(external_id="honest000")
    honest.demographics = {**honest.demographics, "education": "=HYPERLINK(\"http://x\")"}
    honest.save(update_fields=["demographics"])
    run = AnalysisRun.objects.create(study=tide, thresholds=tide.quality_thresholds)
    run_analysis(run.pk)
    return people


def read(path) -> list[dict]:
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


@pytest.mark.parametrize(
    ("value", "cell"),
    [("=SUM(A1)", "'=SUM(A1)"), ("+1", "'+1"), ("-x", "'-x"), ("@me", "'@me"), ("\tx", "'\tx"), ("\rx", "'\rx"),
     ("plain", "plain"), (-1.5, "-1.5"), (3, "3"), (None, ""), (float("nan"), ""), (True, "true"), (False, "false")],
)
def test_csv_cells_are_safe_to_open_in_a_spreadsheet(value, cell):
    assert csv_cell(value) == cell


def test_it_exports_participants_with_pseudonyms_and_quality_fields(analysed, tmp_path):
    call_command("export", "--study", "tide", "--what", "participants", "--out", str(tmp_path))
    rows = read(tmp_path / "participants.csv")
    with open(tmp_path / "participants.csv", newline="") as handle:
        header = next(csv.reader(handle))
    assert header == participant_export_columns(study_design(Participant.objects.first().study_id))
    assert header[:6] == ["participant_id", "started_at", "finished_at", "attention_passed", "age", "sex"]
    assert header[-8:] == ["region", "duration_minutes", "sd", "mae", "fast_share", "excluded_by", "payable",
                           "reject_reason"]
    people = {p.external_id: p for p in analysed}
    by_pseudonym = dict(Participant.objects.values_list("pseudonym", "external_id"))
    assert len(rows) == len(people)
    for row in rows:
        assert row["participant_id"].startswith("p_") and row["participant_id"] in by_pseudonym
        assert row["excluded_by"] == people[by_pseudonym[row["participant_id"]]].excluded_by
    text = (tmp_path / "participants.csv").read_text()
    assert not any(external_id in text for external_id in people)
    honest = next(r for r in rows if by_pseudonym[r["participant_id"]] == "honest000")
    assert honest["education"] == "'=HYPERLINK(\"http://x\")"
    for row in rows:  # formula-like answers come out as text, in every row
        assert row["gender"] == "'" + FORMULA
        assert row is honest or row["education"] == "'" + DDE
    assert honest["state"] == "CA" and honest["region"] == "West" and honest["attention_passed"] == "true"
    assert honest["payable"] == "true" and honest["reject_reason"] == ""
    assert float(honest["duration_minutes"]) == 28.0


def test_it_exports_the_filter_flow_and_the_identifiers(analysed, tmp_path):
    call_command("export", "--study", "tide", "--what", "filter-flow", "--what", "identifiers", "--out", str(tmp_path))
    flow = read(tmp_path / "filter_flow.csv")
    assert [{k: (v if k == "rule" else int(v)) for k, v in row.items()} for row in flow] == expected_flow(analysed)
    identifiers = read(tmp_path / "identifiers.csv")
    assert list(identifiers[0]) == IDENTIFIER_EXPORT_COLUMNS
    exited = next(r for r in identifiers if r["external_id"] == "exit_early")
    assert (exited["payable"], exited["completion_code"]) == ("false", "")


def test_it_refuses_to_export_before_a_run_has_finished(tide, tmp_path):
    with pytest.raises(CommandError, match="no finished analysis run"):
        call_command("export", "--study", "tide", "--what", "participants", "--out", str(tmp_path))
    assert not (tmp_path / "participants.csv").exists()


def test_exports_are_a_registry():
    assert {"participants", "filter-flow", "identifiers"} <= set(EXPORTS)
    assert EXPORTS["filter-flow"].filename == "filter_flow.csv"


def test_the_export_help_lists_every_export_with_its_percent_signs():
    # argparse %-formats help texts; the descriptives' "95% CI" once crashed `manage.py export --help`.
    from analysis.management.commands.export import Command

    help_text = " ".join(Command().create_parser("manage.py", "export").format_help().split())
    assert "95% CI" in help_text
    last = list(EXPORTS)[-1]
    assert f"{last}: {EXPORTS[last].description.split()[0]}" in help_text
