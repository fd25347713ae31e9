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
