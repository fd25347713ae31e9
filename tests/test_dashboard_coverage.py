"""The dashboard's counterbalancing heatmap: observed minus expected per item and position."""

from __future__ import annotations

import pandas as pd
import pytest

from surveys.models import ItemPlacement
from surveys.monitoring import position_coverage

pytestmark = pytest.mark.django_db


def test_the_heatmap_data_is_each_items_count_minus_an_even_split_over_its_blocks_positions(filled):
    placements = pd.DataFrame(
        ItemPlacement.objects.filter(visit__participant__study=filled, visit__participant__is_preview=False)
        .values_list("item__key", "item__block__key", "position"), columns=["item", "block", "position"])
    assert not placements.empty
    coverage = pd.DataFrame(position_coverage(filled))

    # Independently: every item of a block at every position that block used, zeros included.
    observed = placements.groupby(["item", "position"]).size()
    block_positions = placements.groupby("block")["position"].unique()
    for item, block in placements.drop_duplicates("item")[["item", "block"]].itertuples(index=False):
        shown = int((placements["item"] == item).sum())
        rows = coverage[coverage["item"] == item].set_index("position")
        assert sorted(rows.index) == sorted(block_positions[block])
        expected = shown / len(block_positions[block])
        for position, row in rows.iterrows():
            n = int(observed.get((item, position), 0))
            assert row["n"] == n
            assert row["expected"] == pytest.approx(expected, abs=1e-3)
            assert row["deviation"] == pytest.approx(n - expected, abs=1e-3)
    # Each item's deviations cancel out: it is shown as often as it is shown.
    assert coverage.groupby("item")["deviation"].sum().abs().max() == pytest.approx(0, abs=0.01)


def test_a_large_heatmap_groups_items_and_keeps_the_worst_deviation():
    from surveys.monitoring import heatmap_rows

    # 250 items of 2 positions: item i shown 4 times, at position 1 i % 5 times (so deviation i % 5 - 2).
    coverage = [{"item": f"I{i}", "block": f"B{i}", "position": p, "n": (i % 5) if p == 1 else 4 - i % 5,
                 "expected": 2.0, "deviation": float((i % 5) - 2 if p == 1 else 2 - i % 5)}
                for i in range(250) for p in (1, 2)]
    assert heatmap_rows(coverage[:200], limit=100) == coverage[:200]  # 100 items: one row each
    grouped = heatmap_rows(coverage, limit=100)
    labels = list(dict.fromkeys(row["item"] for row in grouped))
    assert len(labels) == 84 and labels[0] == "items 1-3 (worst)" and labels[-1] == "items 250-250 (worst)"
    first = {row["position"]: row for row in grouped if row["item"] == labels[0]}
    # Items 0, 1, 2: position 1 shown 0, 1, 2 times against 2 expected each (deviations -2, -1, 0); the worst
    # is item 0's, shown with its own counts; position 2: 4, 3, 2 times (deviations 2, 1, 0), item 0's again.
    assert (first[1]["n"], first[1]["expected"], first[1]["deviation"]) == (0, 2.0, -2.0)
    assert (first[2]["n"], first[2]["expected"], first[2]["deviation"]) == (4, 2.0, 2.0)
    # Every cell is one item's: its observed - expected is its colour.
    assert all(row["n"] - row["expected"] == row["deviation"] for row in grouped)
