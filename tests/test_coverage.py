"""Coverage (issue 25, item 5): judgements per block against r on the dashboard, in coverage.csv and in the API.

Checked against an independent count from the stored visits and participants (pandas), not the counters.
"""

from __future__ import annotations

import csv
import io
import zipfile

import pandas as pd
import pytest

from analysis.exporting import codebook, exports
from surveys.coverage import COVERAGE_COLUMNS, block_coverage_rows, coverage_summary
from surveys.definition import parse_definition
from surveys.loader import study_load
from surveys.models import BlockAssignment, BlockVisit
from tests.support.generated_outputs import definition_from_outputs, outputs_rows
from tests.support.researcher import fill_with_bots, finished_run

pytestmark = pytest.mark.django_db

R = 4


@pytest.fixture
def allocated(owner):
    """12 prompts, 3 blocks per participant, 4 judgements per block (target 16), half filled by scripted
    participants (some of whom leave early and so release their blocks)."""
    definition = definition_from_outputs(outputs_rows(12), slug="allocated",
                                         allocation={"blocks_per_participant": 3, "judgements_per_block": R})
    # Three blocks take a few minutes: no finisher is excluded as too fast, so judgements stay.
    definition["quality"] = {"duration_min_minutes": 0}
    study = study_load(definition=parse_definition(definition)).study
    study.owners.add(owner)
    fill_with_bots(study, 8, seed=3, mix={"honest": 0.6, "early_exit": 0.4})
    return study


def _independent(study) -> pd.DataFrame:
    """Judged per block: submitted visits of participants who did not leave; allocated: participants who did
    not leave and were given the block."""
    visits = pd.DataFrame(
        BlockVisit.objects.filter(participant__study=study, block__isnull=False)
        .values_list("block__key", "submitted_at", "participant__status"),
        columns=["block", "submitted_at", "status"])
    stays = visits["status"] != "exited"
    judged = visits[stays & visits["submitted_at"].notna()].groupby("block").size()
    allocated = visits[stays].groupby("block").size()
    blocks = list(study.blocks.order_by("order").values_list("key", flat=True))
    return pd.DataFrame({"block_id": blocks,
                         "judged": [int(judged.get(b, 0)) for b in blocks],
                         "allocated": [int(allocated.get(b, 0)) for b in blocks]})


def test_coverage_counts_the_judgements_of_participants_who_kept_their_blocks(allocated):
    statuses = set(allocated.participants.values_list("status", flat=True))
    assert statuses == {"completed", "exited"}  # both kinds, or the test proves little
    rows = pd.DataFrame(block_coverage_rows(allocated))
    expected = _independent(allocated)
    assert rows["block_id"].tolist() == expected["block_id"].tolist()
    assert rows["judged"].tolist() == expected["judged"].tolist()
    assert rows["allocated"].tolist() == expected["allocated"].tolist()
    assert (rows["missing"] == (R - expected["judged"]).clip(lower=0)).all()
    assert (rows["complete"] == (expected["judged"] >= R)).all()
    assert set(rows["judgements_per_block"]) == {R}


def test_the_summary_says_blocks_complete_and_lists_the_gaps_furthest_from_r(allocated):
    expected = _independent(allocated)
    summary = coverage_summary(allocated)
    assert summary["blocks"] == 12 and summary["needed"] == 12 * R
    assert summary["complete"] == int((expected["judged"] >= R).sum())
    assert summary["judged"] == int(expected["judged"].sum())
    assert {level["judged"]: level["blocks"] for level in summary["levels"]} == expected["judged"].value_counts().to_dict()
    gaps = [gap["judged"] for gap in summary["gaps"]]
    assert gaps == sorted(gaps) and gaps[0] == expected["judged"].min()
    assert summary["gap_blocks"] == int((expected["judged"] < R).sum())


def test_the_dashboard_shows_coverage_and_the_target_it_follows_from(allocated, owner_client):
    page = owner_client.get("/studies/allocated/").content.decode()
    summary = coverage_summary(allocated)
    assert 'id="coverage"' in page
    assert "the target of 16 completions is\n  4 × 12 / 3, rounded up" in page
    assert f'<strong data-field="coverage.complete">{summary["complete"]}</strong> of 12' in page
    data = owner_client.get("/studies/allocated/dashboard.json").json()
    assert data["coverage"] == summary


def test_a_study_where_everyone_judges_every_block_has_no_coverage_section(study, owner_client):
    page = owner_client.get(f"/studies/{study.slug}/").content.decode()
    assert 'id="coverage"' not in page
    assert coverage_summary(study)["judgements_per_block"] is None


def test_coverage_csv_is_the_rows_and_is_in_the_exports_zip_and_codebook(allocated, owner_client, quick_stats):
    run = finished_run(allocated)
    assert not run.participant_results.exclude(excluded_by__in=["", "incomplete"]).exists()
    response = owner_client.get("/studies/allocated/coverage.csv")
    assert response.status_code == 200
    lines = list(csv.reader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert lines[0] == COVERAGE_COLUMNS
    expected = _independent(allocated)
    assert [int(line[3]) for line in lines[1:]] == expected["judged"].tolist()
    assert [line[0] for line in lines[1:]] == expected["block_id"].tolist()

    assert "coverage" in exports.exports_of(run)
    listing = owner_client.get("/studies/allocated/exports/").content.decode()
    assert "coverage.csv" in listing
    archive = zipfile.ZipFile(io.BytesIO(b"".join(owner_client.get("/studies/allocated/exports/everything.zip").streaming_content)))
    assert archive.read("coverage.csv").decode().splitlines() == [",".join(line) for line in lines]
    book = list(csv.reader(io.StringIO(archive.read("codebook.csv").decode())))
    described = {row[1]: row[2] for row in book if row[0] == "coverage.csv"}
    assert set(described) == set(COVERAGE_COLUMNS)
    assert codebook.UNDESCRIBED.meaning not in described.values()


def test_the_api_gives_the_same_coverage(allocated, owner_api):
    body = owner_api.get("/api/studies/allocated/coverage/").json()
    assert body["rows"] == block_coverage_rows(allocated)
    assert {key: value for key, value in body.items() if key != "rows"} == coverage_summary(allocated)


def test_an_excluded_participants_judgements_leave_the_coverage(allocated):
    finisher = allocated.participants.filter(status="completed").first()
    before = {row["block_id"]: row["judged"] for row in block_coverage_rows(allocated)}
    BlockAssignment.objects.filter(participant=finisher).update(state="released")
    after = {row["block_id"]: row["judged"] for row in block_coverage_rows(allocated)}
    theirs = set(BlockVisit.objects.filter(participant=finisher, block__isnull=False).values_list("block__key", flat=True))
    assert {key for key in before if before[key] != after[key]} == theirs
    assert all(after[key] == before[key] - 1 for key in theirs)


def test_the_recruitment_page_says_the_target_follows_from_the_allocation(allocated, owner_client, prolific):
    page = owner_client.get("/studies/allocated/prolific/").content.decode()
    assert "and 16 places" in page
    assert "Each participant judges 3 of the 12 blocks" in page and "4 × 12 / 3, rounded up" in page
