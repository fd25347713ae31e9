"""The vectorised bootstrap of metric_human_agreement against scipy called once per resample.

numpy and scipy only: runs without the optional metrics stack. The data are
means of small integers, as mean ratings are, so ties are everywhere.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from analysis.automatic_metrics import metrics, metrics_bootstrap
from analysis.automatic_metrics.metrics_bootstrap import rank_correlations_resampled


def per_resample_scipy(x: np.ndarray, y: np.ndarray, resamples: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The definition: scipy on each resample row (NaN, with a warning, where a row is constant)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        spearman = np.array([stats.spearmanr(x[i], y[i]).statistic for i in resamples])
        kendall = np.array([stats.kendalltau(x[i], y[i]).statistic for i in resamples])
    return spearman, kendall


def tied_data(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """A metric with few distinct values, and mean ratings of three raters on a 1-5 scale."""
    x = rng.integers(0, 6, n) / 5
    y = rng.integers(1, 6, size=(n, 3)).mean(axis=1)
    return x, y


@pytest.fixture(params=["matmul", "bit_levels"])
def kendall_path(request, monkeypatch):
    """Both ways of counting Kendall's S: the matrix product (few points) and the y-rank bits (many)."""
    if request.param == "bit_levels":
        monkeypatch.setattr(metrics_bootstrap, "KENDALL_MATMUL_MAX_POINTS", 0)
    return request.param


@pytest.mark.parametrize("n", [3, 7, 40, 150])
def test_it_matches_scipy_on_every_resample_with_ties(n, kendall_path):
    rng = np.random.default_rng(n)
    x, y = tied_data(rng, n)
    resamples = rng.integers(0, n, size=(300, n))
    expected_spearman, expected_kendall = per_resample_scipy(x, y, resamples)
    spearman, kendall = rank_correlations_resampled(x=x, y=y, resamples=resamples)
    np.testing.assert_allclose(spearman, expected_spearman, rtol=0, atol=1e-12)
    np.testing.assert_allclose(kendall, expected_kendall, rtol=0, atol=1e-12)
    if n == 3:  # a sample of 3 draws constant rows: NaN exactly where scipy says NaN
        assert np.isnan(expected_kendall).any() and np.isnan(expected_spearman).any()


def test_it_matches_scipy_on_continuous_data_and_in_small_chunks(kendall_path, monkeypatch):
    rng = np.random.default_rng(5)
    x, y = rng.normal(size=80), rng.normal(size=80)
    y[::7] = x[::7]  # some joint structure, plus exact ties in y
    y[::5] = 0.5
    resamples = rng.integers(0, 80, size=(200, 80))
    expected = per_resample_scipy(x, y, resamples)
    whole = rank_correlations_resampled(x=x, y=y, resamples=resamples)
    monkeypatch.setattr(metrics_bootstrap, "CHUNK_CELLS", 80 * 7)  # 7 rows per chunk, a ragged last one
    chunked = rank_correlations_resampled(x=x, y=y, resamples=resamples)
    for got, chunk_got, want in zip(whole, chunked, expected):
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)
        np.testing.assert_array_equal(chunk_got, got)


def agreement_inputs(n: int = 90) -> tuple[pd.DataFrame, pd.DataFrame]:
    rng = np.random.default_rng(11)
    x, y = tied_data(rng, n)
    per_response = pd.DataFrame({"response_id": [f"R{i}" for i in range(n)], "model": np.array(["A", "B", "C"])[np.arange(n) % 3],
                                 "rouge_l": x, "meteor": np.round(x + rng.normal(scale=0.2, size=n), 1)})
    human = pd.DataFrame({"response_id": per_response["response_id"], "mean_rating": y})
    return per_response, human


def test_it_gives_the_cis_of_a_per_resample_scipy_loop_for_the_same_seed(kendall_path):
    per_response, human = agreement_inputs()
    agreement = metrics.metric_human_agreement(per_response, human, metrics=("rouge_l", "meteor"), n_boot=500, seed=4)
    joined = per_response.merge(human, on="response_id")
    for scope, group in [("all", joined), *((m, g) for m, g in joined.groupby("model"))]:
        for metric in ("rouge_l", "meteor"):
            x, y = group[metric].to_numpy(), group["mean_rating"].to_numpy()
            # The resamples the product draws: the same generator, seed and shape.
            resamples = np.random.default_rng(4).integers(0, len(x), size=(500, len(x)))
            for method, boot in zip(("spearman", "kendall"), per_resample_scipy(x, y, resamples)):
                row = agreement.set_index(["model", "metric", "method"]).loc[(scope, metric, method)]
                low, high = np.nanpercentile(boot, [2.5, 97.5])
                assert row["ci_low"] == pytest.approx(low, abs=1e-12)
                assert row["ci_high"] == pytest.approx(high, abs=1e-12)


# --------------------------------------------------------------------------- near-ties


def test_it_rounds_float_noise_away_but_keeps_real_differences():
    noisy = np.array([0.1 + 0.2, 0.3, 7 / 3, (1 + 2 + 4) / 3, 1e-14, 2e-14, np.nan, -0.5])
    rounded = metrics.round_for_ranking(noisy)
    assert 0.1 + 0.2 != 0.3 and rounded[0] == rounded[1] == 0.3
    assert rounded[2] == rounded[3]
    assert rounded[4] != rounded[5] and np.isnan(rounded[6]) and rounded[7] == -0.5
    assert metrics.round_for_ranking(np.array([1.0 + 1e-10]))[0] != 1.0  # 12 significant digits stay


def test_it_ranks_values_differing_by_1e_16_as_ties():
    # Mean ratings of identical rating sets, summed in a different order, and a metric computed two ways.
    ratings = [0.3, 0.1 + 0.2, 0.6, 0.7, 0.6 + 1e-16 * 0.6 * 2, 1.0, 0.3]
    metric = [0.5, 0.5, 0.2, 0.9, 0.2 + 2.7e-17, 0.8, 0.4]
    assert len(set(ratings)) == 6 and len(set(metric)) == 6  # unrounded, the near-ties are distinct values
    per_response = pd.DataFrame({"response_id": list("abcdefg"), "model": "A", "rouge_l": metric})
    human = pd.DataFrame({"response_id": list("abcdefg"), "mean_rating": ratings})
    agreement = metrics.metric_human_agreement(per_response, human, metrics=("rouge_l",), n_boot=50).set_index(
        ["model", "method"])
    x, y = np.round(metric, 12), np.round(ratings, 12)
    assert len(set(x)) == 5 and len(set(y)) == 4
    for method, test in (("spearman", stats.spearmanr), ("kendall", stats.kendalltau)):
        on_rounded, on_raw = test(x, y), test(metric, ratings)
        assert agreement.loc[("all", method), "r"] == pytest.approx(on_rounded.statistic, abs=1e-15)
        assert agreement.loc[("all", method), "p"] == pytest.approx(on_rounded.pvalue, abs=1e-15)
        assert on_raw.statistic != pytest.approx(on_rounded.statistic, abs=1e-6)  # the rounding changes the answer
