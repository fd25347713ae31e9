"""Analyses on incomplete designs: each participant judges a share of the blocks (issue 25, item 6).

A generated study where every participant keeps k of the blocks (``share_of_blocks``): each
analysis that uses what each block got is checked against a second computation on the
same incomplete data (scipy or statsmodels called directly on pairs and tables built with
loops), and the one pairing that needs every participant to judge every block (rater means)
is left out with a note saying why.
"""

from __future__ import annotations

import math
from collections import defaultdict

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from analysis import stats as S
from analysis.stats.paired_dimensions import INCOMPLETE_RATER_MEAN_NOTE
from tests.support import stats_data as data
from tests.test_stats import brute_force_alpha
from tests.test_stats_designs import BASELINE, DIMENSIONS, TREATMENT, loop_pairs, panel
from tests.test_stats_mixed_reml import assert_same_fit, model_frame, statsmodels_fit

TOL = 1e-9


@pytest.fixture(scope="module")
def shared_panel() -> pd.DataFrame:
    """30 raters x 20 dialogues, 4 dialogues each: every dialogue judged 6 times."""
    return data.share_of_blocks(panel(raters=30, blocks=20, seed=5), 4)


@pytest.fixture(scope="module")
def shared_tide() -> tuple[pd.DataFrame, pd.DataFrame]:
    """A TIDE-shaped study of 72 participants judging 6 of its 24 blocks each (18 judgements per block)."""
    ratings, participants = data.make_study(72, seed=11)
    return data.share_of_blocks(ratings, 6), participants


def test_the_generated_design_is_incomplete_and_balanced(shared_panel, shared_tide):
    for ratings, k, per_block in ((shared_panel, 4, 6), (shared_tide[0], 6, 18)):
        blocks_of = ratings.groupby("participant_id", observed=True)["block_id"].nunique()
        judges_of = ratings.groupby("block_id", observed=True)["participant_id"].nunique()
        assert (blocks_of == k).all() and (judges_of == per_block).all()


def test_rater_means_are_left_out_with_the_reason_when_blocks_are_shared(shared_panel):
    table = S.dimension_wilcoxon(shared_panel, baseline=BASELINE, treatment=TREATMENT,
                                 complete_blocks=False).set_index(["level", "dimension"])
    for dimension in DIMENSIONS:
        row = table.loc[("rater_mean", dimension)]
        assert math.isnan(row["p"]) and math.isnan(row["W"]) and row["n_pairs"] == 0
        assert row["note"] == INCOMPLETE_RATER_MEAN_NOTE
    # The same data declared complete gets its rater-means test (the flag, not the data, decides).
    declared_complete = S.dimension_wilcoxon(shared_panel, baseline=BASELINE, treatment=TREATMENT)
    assert declared_complete.query("level == 'rater_mean'")["p"].notna().all()


@pytest.mark.parametrize("level", ["rater_item", "item"])
def test_the_item_and_rater_item_pairings_use_what_each_block_got(shared_panel, level):
    table = S.dimension_wilcoxon(shared_panel, baseline=BASELINE, treatment=TREATMENT,
                                 complete_blocks=False).set_index(["level", "dimension"])
    for dimension in DIMENSIONS:
        row = table.loc[(level, dimension)]
        baseline, treatment = loop_pairs(shared_panel, dimension, level)
        assert row["n_pairs"] == len(baseline) == {"rater_item": 30 * 4, "item": 20}[level]
        expected = stats.wilcoxon(treatment, baseline)
        assert row["W"] == pytest.approx(expected.statistic, abs=TOL)
        assert row["p"] == pytest.approx(expected.pvalue, abs=TOL)
        assert row["mean_treatment"] == pytest.approx(np.mean(treatment), abs=TOL)
        assert row["n_raters"] == 30


def test_the_item_pairing_finds_the_planted_gain_of_an_incomplete_panel(shared_panel):
    table = S.dimension_wilcoxon(shared_panel, baseline=BASELINE, treatment=TREATMENT,
                                 complete_blocks=False).set_index(["level", "dimension"])
    gained = table.loc[("item", "resonance")]  # panel() plants +0.8 on resonance
    assert gained["p"] < 0.01 and gained["rank_biserial"] > 0


@pytest.mark.parametrize("measurement", ["nominal", "interval"])
def test_alpha_uses_each_unit_s_own_raters(shared_panel, measurement):
    table = S.krippendorff_alpha(shared_panel, measurement).query("scenario == 'all'").set_index("dimension")
    for dimension in DIMENSIONS:
        units: dict[str, list[float]] = defaultdict(list)
        for row in shared_panel.itertuples():
            if row.dimension == dimension:
                units[row.response_id].append(row.rating)
        assert {len(values) for values in units.values()} == {6}
        assert table.loc[dimension, "alpha"] == pytest.approx(brute_force_alpha(units, measurement), abs=TOL)
        assert table.loc[dimension, "n_raters"] == 30


def test_friedman_per_block_ranks_within_each_block_s_own_raters(shared_tide):
    ratings, _ = shared_tide
    table = S.friedman_by_block(ratings).set_index("block_id")
    ranks: dict[str, dict[str, dict[str, float]]] = defaultdict(lambda: defaultdict(dict))
    for row in ratings.itertuples():
        ranks[row.block_id][row.participant_id][row.response_id] = row.rank
    assert len(table) == 24
    for block_id, by_rater in ranks.items():
        responses = sorted(next(iter(by_rater.values())))
        columns = [[by_rater[rater][response] for rater in sorted(by_rater)] for response in responses]
        expected = stats.friedmanchisquare(*columns)
        assert table.loc[block_id, "n"] == len(by_rater) == 18
        assert table.loc[block_id, "chi2"] == pytest.approx(expected.statistic, abs=TOL)
        assert table.loc[block_id, "p"] == pytest.approx(expected.pvalue, abs=TOL)


@pytest.mark.slow(reason="statsmodels' own Powell fit, the reference, takes several seconds")
def test_the_mixed_model_on_an_incomplete_design_is_statsmodels_fit(shared_tide):
    ratings, _ = shared_tide
    frame = model_frame(ratings)
    reference, _ = statsmodels_fit(frame)
    table = S.mixed_model(ratings, **data.PAIR).set_index("term")
    fixed = table.iloc[:len(reference.fe_params)]
    assert_same_fit(fixed["coef"], fixed["se"], table.loc[["var(item)", "var(participant)"], "coef"],
                    table.loc["var(residual)", "coef"], reference)
    assert (table["n_obs"] == len(frame)).all()


def test_the_per_system_pairing_counts_only_participants_who_saw_both_conditions(shared_tide):
    ratings, _ = shared_tide
    table = S.paired_zs_ft(ratings, **data.PAIR).set_index("model")
    for system, cells in ratings.groupby("model", observed=True):
        sides: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
        for row in cells.itertuples():
            sides[row.participant_id][row.condition].append(row.rating)
        pairs = [(np.mean(s[data.PAIR["baseline"]]), np.mean(s[data.PAIR["treatment"]]))
                 for s in sides.values() if s[data.PAIR["baseline"]] and s[data.PAIR["treatment"]]]
        if not pairs:
            continue
        assert table.loc[system, "n"] == len(pairs)
        expected = stats.wilcoxon([t for _, t in pairs], [b for b, _ in pairs])
        assert table.loc[system, "p"] == pytest.approx(expected.pvalue, abs=TOL)


def test_every_ratings_analysis_gives_a_table_on_an_incomplete_design(shared_tide):
    ratings, participants = shared_tide
    for name, analysis in data.registered_analyses().items():
        options = {"complete_blocks": False} if "complete_blocks" in analysis.design_options else {}
        table = data.run_registered(name, ratings, participants, **options)
        assert isinstance(table, pd.DataFrame) and len(table) > 0, name


def test_a_study_that_allocates_blocks_is_an_incomplete_design_for_its_analyses():
    import json

    from analysis import registry
    from analysis.design import design_of
    from surveys.definition import parse_definition
    from tests.support.paths import FIXTURES

    definition = json.loads((FIXTURES / "tide.json").read_text())
    assert design_of(parse_definition(definition)).complete_blocks is True
    definition["allocation"] = {"blocks_per_participant": 4, "judgements_per_block": 25}
    design = design_of(parse_definition(definition))
    assert design.complete_blocks is False
    options = design.options_for(registry.ANALYSES["dimension_wilcoxon"].design_options)
    assert options["complete_blocks"] is False


def test_alpha_per_scenario_and_descriptives_equal_one_computation_per_group():
    """The per-scenario alpha and the descriptives are computed for all groups at once (issue 25's size: 2,000
    scenarios); each group computed on its own (alpha_from_values, mean_ci) gives the same, on an incomplete
    design with a scenario whose units have one rating each."""
    import numpy as np
    import pandas as pd

    from analysis.stats.comparisons import descriptives
    from analysis.stats.primitives import mean_ci
    from analysis.stats.reliability import alpha_from_values, krippendorff_alpha

    rng = np.random.default_rng(1)
    n = 4000
    df = pd.DataFrame({"participant_id": rng.integers(0, 80, n), "scenario": rng.integers(0, 60, n).astype(str),
                       "model": rng.choice(list("ABCD"), n), "condition": rng.choice(["b", "t"], n),
                       "rating": rng.integers(1, 6, n).astype(float), "dimension": rng.choice(["x", "y"], n)})
    df["response_id"] = df["scenario"] + "-" + df["model"] + df["condition"]
    df.loc[:5, "scenario"] = "lonely"
    df.loc[:5, "response_id"] = [f"solo{i}" for i in range(6)]
    for level in ("ordinal", "interval", "nominal", "ratio"):
        table = krippendorff_alpha(df, level).set_index(["dimension", "scenario"])
        data = df.drop_duplicates(subset=["participant_id", "response_id", "dimension"])
        for dimension, rows in data.groupby("dimension"):
            for scenario, cells in [("all", rows), *rows.groupby("scenario")]:
                one = alpha_from_values(cells["response_id"].to_numpy(), cells["rating"].to_numpy(), level)
                got = table.loc[(dimension, scenario)]
                assert got["alpha"] == pytest.approx(one["alpha"], abs=1e-12, nan_ok=True), (level, scenario)
                assert (got["n_units"], got["n_values"], got["n_raters"]) == (
                    one["n_units"], one["n_values"], cells["participant_id"].nunique())
        assert "no unit has two or more ratings" in table.loc[("x", "lonely"), "note"] + table.loc[("y", "lonely"), "note"]
    table = descriptives(df).set_index(["model", "condition", "scenario", "dimension"])
    for key, cells in df.groupby(["model", "condition", "scenario", "dimension"]):
        for field, value in mean_ci(cells["rating"].to_numpy()).items():
            assert table.loc[key, field] == pytest.approx(value, abs=1e-12, nan_ok=True), (key, field)
