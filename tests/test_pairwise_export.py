"""A pairwise study end to end on the researcher's side: the run computes the pairwise tables (and nothing that
needs ratings), the results page shows them, and pairwise.csv (DESIGN 3.3) holds the retained participants'
answered pairs, escaped, on the exports page, in the zip with its codebook and README, from the export command
and under the API as CSV and as paginated JSON records."""

from __future__ import annotations

import csv
import io
import zipfile

import pytest
from django.core.management import call_command
from django.test import override_settings

from analysis import selectors
from analysis.models import AnalysisRun, ParticipantResult
from surveys.models import BlockVisit, FreeTextAnswer, FreeTextQuestion, ItemPlacement, Participant, Study, System
from tests.support.downloads import csv_rows, response_bytes
from tests.support.researcher import fill_with_bots, finished_run
from tests.support.shared import in_process_tasks, rows_kept_until_exit
from tests.support.studies import load_fixture

PAIRWISE_HEADER = ["participant_id", "block_id", "scenario", "left_response_id", "right_response_id", "left_model",
                   "right_model", "left_condition", "right_condition", "preference", "seconds_on_block"]
PAIRWISE_TABLES = {"pairwise_win_rates", "pairwise_bradley_terry", "pairwise_position_bias"}
FORMULA_SYSTEM = "=HYPERLINK(\"http://x\")"


@pytest.fixture(scope="module")
def _pw_rows(django_db_setup, django_db_blocker):
    """The pairwise study: 14 bots answering through the services (some excluded by the quality rules), a
    formula-like system name and reason, and a finished run; built once for the module (every test here
    reads it; tests/support/shared.py) and rolled back after it. Returns (study pk, run pk)."""
    with rows_kept_until_exit(django_db_blocker), override_settings(ANALYSIS_BOOTSTRAP_SAMPLES=30), in_process_tasks():
        study = load_fixture("pairwise.json")
        fill_with_bots(study, 14)
        System.objects.filter(study=study, name="Qwen2.5-3B").update(name=FORMULA_SYSTEM)
        visit = BlockVisit.objects.filter(participant__study=study).exclude(preference="").first()
        FreeTextAnswer.objects.update_or_create(
            participant=visit.participant, question=FreeTextQuestion.objects.get(study=study, key="reason"),
            visit=visit, defaults={"text": "=1+2 because"})
        run = finished_run(study)
        yield study.pk, run.pk


@pytest.fixture
def pairwise(_pw_rows, db):
    """The module's pairwise study (conftest's ``pairwise`` would load a second one under the same slug)."""
    return Study.objects.get(pk=_pw_rows[0])


@pytest.fixture
def pw_run(_pw_rows, pairwise, owner):
    """The module's finished run of ``pairwise``, which ``owner`` owns (for this test)."""
    pairwise.owners.add(owner)
    return AnalysisRun.objects.get(pk=_pw_rows[1])


def retained_visits(run):
    """The answered pairwise visits of the run's retained participants, from the stored rows."""
    kept = ParticipantResult.objects.filter(run=run, excluded_by="").values("participant_id")
    return (BlockVisit.objects.filter(participant_id__in=kept, submitted_at__isnull=False).exclude(preference="")
            .select_related("participant", "block__scenario").order_by("participant_id", "sequence"))


def expected_rows(run) -> list[list[str]]:
    """pairwise.csv's rows written here from the stored rows (a cell starting with = escaped with a quote)."""
    escape = lambda text: "'" + text if text.startswith("=") else text  # noqa: E731
    rows = []
    for visit in retained_visits(run):
        left, right = (ItemPlacement.objects.select_related("item__system", "item__condition")
                       .get(visit=visit, position=position).item for position in (1, 2))
        seconds = (visit.submitted_at - visit.shown_at).total_seconds()
        rows.append([visit.participant.pseudonym, visit.block.key, visit.block.scenario.key, left.key, right.key,
                     escape(left.system.name), escape(right.system.name), left.condition.name, right.condition.name,
                     visit.preference, repr(seconds)])
    return rows


def test_the_run_computes_the_pairwise_tables_and_nothing_that_needs_ratings(pw_run):
    # The demographics table reads the retained participants, not ratings: it belongs to every study that asks them.
    assert set(selectors.result_table_names(run=pw_run)) == {"filter_flow", "demographics_table", *PAIRWISE_TABLES}
    assert not pw_run.failures
    # The bots answered every block they submitted with one of the four verdicts.
    submitted = BlockVisit.objects.filter(participant__study=pw_run.study, block__isnull=False,
                                          submitted_at__isnull=False)
    assert submitted.exists() and not submitted.filter(preference="").exists()
    assert set(submitted.values_list("preference", flat=True)) == {"left", "right", "tie", "both_bad"}
    position = selectors.result_table_frame(run=pw_run, name="pairwise_position_bias").iloc[0]
    assert position["judgements"] == retained_visits(pw_run).count()
    # Some bots were excluded, so "retained only" below is tested.
    assert 0 < pw_run.n_retained < pw_run.n_participants


def test_the_results_page_shows_the_pairwise_tables_and_the_strength_figure(owner_client, pw_run):
    response = owner_client.get(f"/studies/{pw_run.study.slug}/runs/{pw_run.pk}/")
    assert response.status_code == 200
    page = response.content.decode()
    for title in ("Pairwise win rates", "Bradley-Terry strengths from the pairwise judgements",
                  "Left/right position bias"):
        assert title in page
    assert "pairwise_strength" in page
    for name in PAIRWISE_TABLES:
        table = owner_client.get(f"/studies/{pw_run.study.slug}/runs/{pw_run.pk}/tables/{name}.csv")
        assert table.status_code == 200 and len(csv_rows(table)) > 1


def test_pairwise_csv_holds_the_retained_participants_answered_pairs_escaped(owner_client, pw_run):
    response = owner_client.get(f"/studies/{pw_run.study.slug}/exports/pairwise.csv")
    assert response.status_code == 200 and response.streaming
    rows = csv_rows(response)
    assert rows[0] == PAIRWISE_HEADER
    assert rows[1:] == expected_rows(pw_run) and len(rows) > 100
    excluded = set(ParticipantResult.objects.filter(run=pw_run).exclude(excluded_by="")
                   .values_list("participant__pseudonym", flat=True))
    assert excluded and not excluded & {row[0] for row in rows[1:]}
    text = response_bytes(owner_client.get(f"/studies/{pw_run.study.slug}/exports/pairwise.csv")).decode()
    assert "'" + FORMULA_SYSTEM.replace('"', '""') in text and "," + FORMULA_SYSTEM not in text


def test_pairwise_csv_is_the_same_in_frames_of_a_few_participants(owner_client, pw_run, monkeypatch):
    from analysis.exporting import exports

    monkeypatch.setattr(exports, "_PARTICIPANTS_PER_FRAME", 2)  # several frames, and batches splitting them
    monkeypatch.setattr(exports, "_ROWS_PER_BATCH", 7)
    rows = csv_rows(owner_client.get(f"/studies/{pw_run.study.slug}/exports/pairwise.csv"))
    assert rows == [PAIRWISE_HEADER, *expected_rows(pw_run)] and len({row[0] for row in rows[1:]}) > 2


def test_the_exports_page_lists_pairwise_csv_only_for_a_pairwise_study(owner_client, pw_run, done_run):
    page = owner_client.get(f"/studies/{pw_run.study.slug}/exports/")
    assert page.status_code == 200
    body = page.content.decode()
    assert "pairwise.csv" in body and "pairwise_win_rates.csv" in body and "choices.csv" not in body
    assert "pairwise.csv" not in owner_client.get(f"/studies/{done_run.study.slug}/exports/").content.decode()


def test_the_zip_holds_pairwise_csv_its_codebook_rows_and_its_readme_line(owner_client, pw_run):
    response = owner_client.get(f"/studies/{pw_run.study.slug}/exports/everything.zip")
    assert response.status_code == 200
    archive = zipfile.ZipFile(io.BytesIO(response_bytes(response)))
    names = set(archive.namelist())
    assert {"pairwise.csv", "free_text.csv", *(f"{name}.csv" for name in PAIRWISE_TABLES)} <= names
    read = {name: list(csv.reader(io.StringIO(archive.read(name).decode()))) for name in names
            if name.endswith(".csv")}
    assert read["pairwise.csv"] == [PAIRWISE_HEADER, *expected_rows(pw_run)]
    described = {(row[0], row[1]) for row in read["codebook.csv"][1:]}
    for name, rows in read.items():
        if name != "codebook.csv":
            assert all((name, column) in described for column in rows[0]), name
    assert "pairwise.csv" in archive.read("README.txt").decode()
    # The formula-like reason is escaped in free_text.csv; no cell of any file starts a formula.
    assert any(row[-1] == "'=1+2 because" for row in read["free_text.csv"][1:])
    assert not any(cell.startswith("=") for rows in read.values() for row in rows for cell in row)


def test_the_export_command_writes_pairwise_csv(pw_run, tmp_path):
    call_command("export", "--study", pw_run.study.slug, "--what", "pairwise", "--out", str(tmp_path))
    with (tmp_path / "pairwise.csv").open(newline="", encoding="utf-8") as handle:
        assert list(csv.reader(handle)) == [PAIRWISE_HEADER, *expected_rows(pw_run)]


def test_the_api_serves_pairwise_as_csv_and_as_paginated_json_records(owner_api, pw_run):
    base = f"/api/studies/{pw_run.study.slug}/exports"
    listed = [e["name"] for e in owner_api.get(base + "/").json()]
    assert "pairwise" in listed and "pairwise-bradley-terry" in listed and "choices" not in listed
    as_csv = csv_rows(owner_api.get(base + "/pairwise.csv"))
    assert as_csv[0] == PAIRWISE_HEADER and as_csv[1:] == expected_rows(pw_run)
    records, url, pages = [], base + "/pairwise/", 0
    while url:
        response = owner_api.get(url)
        assert response.status_code == 200
        body = response.json()
        records += body["results"]
        url, pages = body["next"], pages + 1
    assert pages > 1 and list(records[0]) == PAIRWISE_HEADER
    assert len(records) == len(as_csv) - 1
    for record, row in zip(records, as_csv[1:]):
        # JSON carries the raw text and numbers; the CSV escapes formula-like cells.
        assert [str(v) for v in record.values()] == [cell.removeprefix("'") for cell in row]
    assert FORMULA_SYSTEM in {r["left_model"] for r in records} | {r["right_model"] for r in records}


def test_the_api_answers_404_to_others_and_without_a_run(owner_api, pw_run, other, client, pairwise):
    client.force_login(other)
    for path in ("exports/pairwise/", "exports/pairwise.csv"):
        assert client.get(f"/api/studies/{pw_run.study.slug}/{path}").status_code == 404, path
    ParticipantResult.objects.filter(run=pw_run).delete()
    pw_run.delete()
    assert owner_api.get(f"/api/studies/{pairwise.slug}/exports/pairwise/").status_code == 404


@pytest.mark.parametrize("page", ["abc", "0", "-1", "999999", "1e400"])
def test_odd_pages_of_the_records_are_a_clear_404_never_a_500(owner_api, pw_run, page):
    response = owner_api.get(f"/api/studies/{pw_run.study.slug}/exports/pairwise/", {"page": page})
    assert response.status_code == 404 and "detail" in response.json()


def test_a_participant_id_that_looks_like_a_formula_is_escaped(owner_client, pw_run):
    kept = ParticipantResult.objects.filter(run=pw_run, excluded_by="").values_list("participant_id", flat=True)
    Participant.objects.filter(pk=kept[0]).update(pseudonym="-2+3")
    rows = csv_rows(owner_client.get(f"/studies/{pw_run.study.slug}/exports/pairwise.csv"))
    assert "'-2+3" in {row[0] for row in rows} and "-2+3" not in {row[0] for row in rows}
