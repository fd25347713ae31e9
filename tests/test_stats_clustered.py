"""Baseline vs treatment where raters and items are both random (issue 26, item 1).

The crossed test (``level="crossed"`` of ``dimension_wilcoxon``) is checked
against statsmodels' REML fit of the crossed random-intercept model of the
differences and against the two-way ANOVA mean squares of statsmodels' OLS;
the levels a table leads with follow the design; and the false-positive rates
under the null are simulated (bench/null_rates.py): a small deterministic run
here, the full one as a slow test.
"""

from __future__ import annotations

import itertools
import math
import warnings

import numpy as np
import pandas as pd
import pytest
import statsmodels.formula.api as smf
from scipy import stats
from statsmodels.stats.anova import anova_lm

from analysis import stats as S
from analysis.stats.paired_dimensions import INCOMPLETE_CROSSED_NOTE, INDEPENDENT_PAIRS_NOTE, crossed_mean_test
from bench.null_rates import DESIGNS, NullDesign, null_rates, simulate
from tests.test_stats_designs import BASELINE, TREATMENT, panel


def crossed_differences(seed: int, raters: int = 6, items: int = 30) -> np.ndarray:
    """A raters x items table of differences with clearly positive rater and item variance components."""
    rng = np.random.default_rng(seed)
    return (0.3 + rng.normal(0, 0.6, (raters, 1)) + rng.normal(0, 0.8, (1, items))
            + rng.normal(0, 0.5, (raters, items)))


def long_form(differences: np.ndarray) -> pd.DataFrame:
    raters, items = differences.shape
    return pd.DataFrame({"rater": np.repeat(np.arange(raters), items), "item": np.tile(np.arange(items), raters),
                         "d": differences.ravel(), "one": 1})


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_crossed_test_is_statsmodels_reml_fit_of_the_crossed_model(seed):
    differences = crossed_differences(seed)
    ours = crossed_mean_test(differences)
    data = long_form(differences)
    model = smf.mixedlm("d ~ 1", data, groups="one", re_formula="0",
                        vc_formula={"rater": "0 + C(rater)", "item": "0 + C(item)"})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = model.fit(reml=True)
    assert ours["mean"] == pytest.approx(fit.fe_params["Intercept"], rel=1e-9)
    standard_error = ours["mean"] / ours["t"]
    assert standard_error == pytest.approx(fit.bse_fe["Intercept"], rel=1e-3)


@pytest.mark.parametrize("seed", [0, 3])
def test_its_degrees_of_freedom_are_satterthwaites_from_the_anova_mean_squares(seed):
    differences = crossed_differences(seed, raters=5, items=12)
    table = anova_lm(smf.ols("d ~ C(rater) + C(item)", long_form(differences)).fit())
    ms_r, ms_i, ms_e = table["mean_sq"].tolist()
    df_r, df_i, df_e = table["df"].tolist()
    assert ms_r > ms_e and ms_i > ms_e  # both components positive: the full combination
    combined = ms_r + ms_i - ms_e
    df = combined ** 2 / (ms_r ** 2 / df_r + ms_i ** 2 / df_i + ms_e ** 2 / df_e)
    t = differences.mean() / math.sqrt(combined / differences.size)
    ours = crossed_mean_test(differences)
    assert ours["df"] == pytest.approx(df, rel=1e-9)
    assert ours["t"] == pytest.approx(t, rel=1e-9)
    assert ours["p"] == pytest.approx(2 * stats.t.sf(abs(t), df), rel=1e-9)


def test_a_negative_component_is_dropped_from_the_variance():
    # No rater variance at all (every rater's row shifted by the same amount): MS_R < MS_E is likely.
    rng = np.random.default_rng(7)
    differences = rng.normal(0, 0.8, (1, 40)) + rng.normal(0, 1.0, (4, 40))
    table = anova_lm(smf.ols("d ~ C(rater) + C(item)", long_form(differences)).fit())
    ms_r, ms_i, ms_e = table["mean_sq"].tolist()
    assert ms_r < ms_e < ms_i
    ours = crossed_mean_test(differences)
    # Only the item component stays: the variance of the mean is MS_I / (R I) on I - 1 degrees of freedom.
    assert ours["df"] == pytest.approx(39, rel=1e-12)
    assert ours["t"] == pytest.approx(differences.mean() / math.sqrt(ms_i / differences.size), rel=1e-9)


def test_the_crossed_row_tests_the_rater_by_block_differences_built_by_hand():
    ratings = panel(raters=5, blocks=20, seed=4)
    table = S.dimension_wilcoxon(ratings, baseline=BASELINE, treatment=TREATMENT).set_index(["level", "dimension"])
    for dimension in ("resonance", "coherence", "advice"):
        cells = {}
        for row in ratings[ratings["dimension"] == dimension].itertuples():
            cells.setdefault((row.participant_id, row.block_id), {}).setdefault(row.condition, []).append(row.rating)
        raters = sorted({r for r, _ in cells})
        blocks = sorted({b for _, b in cells})
        matrix = np.array([[np.mean(cells[(r, b)][TREATMENT]) - np.mean(cells[(r, b)][BASELINE]) for b in blocks]
                           for r in raters])
        expected = crossed_mean_test(matrix)
        row = table.loc[("crossed", dimension)]
        assert row["n_pairs"] == matrix.size and row["valid_for_design"]
        assert row["t"] == pytest.approx(expected["t"], rel=1e-12)
        assert row["p"] == pytest.approx(expected["p"], rel=1e-12)
        assert math.isnan(row["W"])
    crossed = table.loc["crossed"]
    assert crossed["p_holm"].tolist() == pytest.approx(S.holm(crossed["p"].tolist()).tolist(), rel=1e-12)
    assert table.loc["rater_item"]["note"].str.endswith(INDEPENDENT_PAIRS_NOTE).all()


@pytest.mark.parametrize(("raters", "items", "complete", "leading"), [
    (5, 100, True, ["item", "crossed"]),
    (150, 24, True, ["rater_mean", "crossed"]),
    (60, 40, False, ["item"]),
])
def test_the_table_leads_with_the_levels_valid_for_the_design(raters, items, complete, leading):
    design = NullDesign("d", raters=raters, items=items, per_rater=items if complete else 8)
    table = S.dimension_wilcoxon(simulate(design, np.random.default_rng(0)), baseline="base", treatment="tuned",
                                 complete_blocks=complete)
    assert table["level"].tolist()[:len(leading)] == leading
    assert table["valid_for_design"].tolist() == [True] * len(leading) + [False] * (4 - len(leading))
    if not complete:
        assert table.set_index("level").loc["crossed", "note"] == INCOMPLETE_CROSSED_NOTE


def test_a_small_null_simulation_is_deterministic_and_separates_the_levels():
    panel_design = NullDesign("panel", raters=5, items=60, per_rater=60, item_benefit_sd=0.8)
    rates, valid = null_rates(panel_design, studies=25, seed=3)
    assert rates == null_rates(panel_design, studies=25, seed=3)[0]
    assert valid == ("item", "crossed") and set(rates) == set(S.TABLE_LEVELS)
    # Treating 300 pairs as independent when the benefit varies by item rejects far more often than the item test.
    assert rates["rater_item"] > rates["item"] + 0.1
    assert rates["rater_mean"] == 0  # 5 rater means can never reach p < .05


# 600 studies per design make the rates meaningful (the standard error of a rate of .05 is .009).
@pytest.mark.slow(reason="600 simulated studies per design: about a minute of CPU on a quiet machine")
@pytest.mark.parametrize("design", DESIGNS, ids=lambda d: d.name)
def test_the_valid_levels_keep_their_false_positive_rate_under_the_null(design):
    rates, valid = null_rates(design, studies=600, seed=11)
    for level in valid:
        assert 0.03 <= rates[level] <= 0.07, (level, rates)
