"""The dashboard's attention-check counts (read through the study's checks), its per-block counts (one pass over the visits, released assignments subtracted) and its
position counts (the study's placements less the previews'), against independent counts from the rows.

The study: 12 prompts, 3 blocks per participant, r = 4, filled half by scripted participants, some of whom
leave early (their assignments are released), plus a preview who was shown every page:
previews count nowhere (a preview's answers are not recorded, but its pages and placements are).
"""

from __future__ import annotations

import pandas as pd
import pytest

from bots import selectors as bot_selectors
from surveys import services
from surveys.coverage import block_counts
from surveys.definition import parse_definition
from surveys.loader import study_load
from surveys.models import BlockAssignment, BlockVisit, ItemPlacement
from surveys.monitoring import (attention_summary, dashboard_snapshot, heatmap_rows, position_coverage,
                                position_heatmap)
from tests.support.generated_outputs import definition_from_outputs, outputs_rows
from tests.support.researcher import fill_with_bots

pytestmark = pytest.mark.django_db


@pytest.fixture
def with_preview(owner):
    definition = definition_from_outputs(outputs_rows(12), slug="counted",
                                         allocation={"blocks_per_participant": 3, "judgements_per_block": 4})
    definition["quality"] = {"duration_min_minutes": 0}
    study = study_load(definition=parse_definition(definition)).study
    study.owners.add(owner)
    fill_with_bots(study, 8, seed=5, mix={"honest": 0.6, "early_exit": 0.4})
    preview = services.participant_enroll(study=study, external_id="preview-1", is_preview=True, seed=9)
    for page in bot_selectors.participant_pages(participant=preview):  # a preview's answers are not kept
        services.visit_mark_shown(visit_id=page.visit.pk)
    return study


def _visits(study) -> pd.DataFrame:
    visits = pd.DataFrame(
        BlockVisit.objects.filter(participant__study=study, block__isnull=False)
        .values_list("participant_id", "block__key", "shown_at", "submitted_at", "participant__is_preview"),
        columns=["participant", "block", "shown_at", "submitted_at", "preview"])
    released = set(BlockAssignment.objects.filter(study=study, state="released")
                   .values_list("participant_id", "block__key"))
    visits["released"] = [(p, b) in released for p, b in zip(visits["participant"], visits["block"])]
    return visits


def test_the_fixture_has_a_preview_shown_every_page_and_released_blocks_that_were_answered(with_preview):
    visits = _visits(with_preview)
    preview = visits[visits["preview"]]
    assert preview["shown_at"].notna().all()
    assert (visits["released"] & visits["submitted_at"].notna()).any()  # some released blocks were answered


def test_block_counts_are_each_blocks_visits_shown_answered_and_judged_without_previews(with_preview):
    visits = _visits(with_preview)
    kept = visits[~visits["preview"]]
    by_block = kept.groupby("block")
    blocks = list(with_preview.blocks.order_by("order", "pk").values_list("key", flat=True))
    counts = block_counts(with_preview)
    assert [row["key"] for row in counts] == blocks
    answered = kept["submitted_at"].notna()
    expected = {
        "visits": by_block.size(),
        "shown": kept[kept["shown_at"].notna()].groupby("block").size(),
        "answered": kept[answered].groupby("block").size(),
        "judged": kept[answered & ~kept["released"]].groupby("block").size(),
    }
    for column, series in expected.items():
        assert [row[column] for row in counts] == [int(series.get(block, 0)) for block in blocks], column
    held = BlockAssignment.objects.filter(study=with_preview).exclude(state="released").values_list("block__key")
    allocated = pd.Series([key for (key,) in held]).value_counts()
    assert [row["allocated"] for row in counts] == [int(allocated.get(block, 0)) for block in blocks]


def test_the_snapshots_block_table_and_coverage_agree_with_the_counts(with_preview):
    snapshot = dashboard_snapshot(with_preview)
    counts = block_counts(with_preview)
    assert snapshot["block_coverage"] == [{"block": row["key"], "shown": row["shown"], "answered": row["answered"]}
                                          for row in counts if row["visits"]]
    assert snapshot["coverage"]["judged"] == sum(row["judged"] for row in counts)


def test_position_counts_leave_out_the_previews_placements(with_preview):
    placements = pd.DataFrame(
        ItemPlacement.objects.filter(visit__participant__study=with_preview)
        .values_list("item__key", "position", "visit__participant__is_preview"),
        columns=["item", "position", "preview"])
    assert placements["preview"].any()
    kept = placements[~placements["preview"]].groupby(["item", "position"]).size()
    coverage = position_coverage(with_preview)
    shown = {(row["item"], row["position"]): row["n"] for row in coverage if row["n"]}
    assert shown == {key: int(n) for key, n in kept.items()}
    assert position_heatmap(with_preview) == heatmap_rows(coverage)


def test_the_grouped_heatmap_is_heatmap_rows_of_the_coverage(with_preview):
    coverage = position_coverage(with_preview)
    for limit in (1, 5, 7):  # 24 items: groups of 24, 5 and 4 items
        assert position_heatmap(with_preview, limit=limit) == heatmap_rows(coverage, limit=limit)


def test_attention_counts_are_the_submitted_checks_of_participants_not_previews(filled):
    preview = services.participant_enroll(study=filled, external_id="preview-1", is_preview=True, seed=9)
    for page in bot_selectors.participant_pages(participant=preview):
        services.visit_mark_shown(visit_id=page.visit.pk)
    checks = pd.DataFrame(
        BlockVisit.objects.filter(participant__study=filled, attention_check__isnull=False)
        .values_list("participant_id", "submitted_at", "attention_passed", "participant__is_preview"),
        columns=["participant", "submitted_at", "passed", "preview"])
    answered = checks[~checks["preview"] & checks["submitted_at"].notna()]
    failed = answered[answered["passed"] == False]  # noqa: E712 (a column of True, False and None)
    assert len(failed) and checks["preview"].any()  # failures to count, and a preview to leave out
    assert attention_summary(filled) == {"answered": len(answered), "failed": len(failed),
                                         "participants_failing": failed["participant"].nunique()}
