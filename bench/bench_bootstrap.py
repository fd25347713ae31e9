"""Time the bootstrap CIs of metric_human_agreement: the old per-resample loop vs the vectorised code.

The old code (kept here as a reference, not in the product) called
``scipy.stats.kendalltau`` once per resample; Spearman was already ranked row
by row with ``rankdata(axis=1)``. The default workload is the one of the issue:
8 systems, so 9 scopes (all + each system) x 4 metrics x 2,000 resamples =
72,000 Kendall statistics. Ratings are means of five 1-5 ratings and the
lexical metrics are short fractions, so ties are common, as in a real study.

Prints both timings, the speed-up with PASS/FAIL against 20x, and whether
both give the same table (r, p and the CIs equal to 1e-12).

Usage::

    python bench/bench_bootstrap.py
    python bench/bench_bootstrap.py --responses 2000 --boot 1000
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from analysis.automatic_metrics import metrics

TARGET_SPEEDUP = 20.0
TOLERANCE = 1e-12


# --------------------------------------------------------------------------- the old code, for reference


def old_rank_correlations_resampled(
    *, x: np.ndarray, y: np.ndarray, resamples: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The product's code before: Spearman ranked row by row with rankdata(axis=1), Kendall by one scipy call per resample."""
    rank_x = stats.rankdata(x[resamples], axis=1)
    rank_y = stats.rankdata(y[resamples], axis=1)
    rank_x -= rank_x.mean(axis=1, keepdims=True)
    rank_y -= rank_y.mean(axis=1, keepdims=True)
    denominator = np.sqrt((rank_x**2).sum(axis=1) * (rank_y**2).sum(axis=1))
    with np.errstate(invalid="ignore", divide="ignore"):
        spearman = np.where(denominator > 0, (rank_x * rank_y).sum(axis=1) / denominator, np.nan)
    kendall = np.empty(len(resamples))
    for i, index in enumerate(resamples):
        kendall[i] = stats.kendalltau(x[index], y[index]).statistic
    return spearman, kendall


@contextmanager
def old_bootstrap() -> Iterator[None]:
    """metric_human_agreement with the old per-resample statistics; everything else unchanged."""
    new = metrics.rank_correlations_resampled
    metrics.rank_correlations_resampled = old_rank_correlations_resampled
    try:
        yield
    finally:
        metrics.rank_correlations_resampled = new


# --------------------------------------------------------------------------- data


def synthetic_study(n: int, n_models: int, seed: int = 0) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per-response metrics and mean ratings of n responses from n_models systems, with many ties."""
    rng = np.random.default_rng(seed)
    quality = rng.normal(size=n)
    ratings = np.clip(np.rint(3 + quality[:, None] + rng.normal(size=(n, 5))), 1, 5)
    per_response = pd.DataFrame({
        "response_id": [f"R{i}" for i in range(n)],
        "model": [f"model-{i % n_models}" for i in range(n)],
        "embedding_cosine": 0.6 + 0.1 * quality + rng.normal(scale=0.1, size=n),
        "bertscore_f1": 0.5 + 0.05 * quality + rng.normal(scale=0.05, size=n),
        # LCS and METEOR-like scores of short texts: few distinct values.
        "rouge_l": np.round(np.clip(0.3 + 0.1 * quality + rng.normal(scale=0.1, size=n), 0, 1), 2),
        "meteor": np.round(np.clip(0.3 + 0.1 * quality + rng.normal(scale=0.1, size=n), 0, 1), 2),
    })
    human = pd.DataFrame({"response_id": per_response["response_id"], "mean_rating": ratings.mean(axis=1)})
    return per_response, human


def timed(action: Callable[[], pd.DataFrame]) -> tuple[float, pd.DataFrame]:
    start = time.perf_counter()
    result = action()
    return time.perf_counter() - start, result


def same_table(old: pd.DataFrame, new: pd.DataFrame) -> tuple[bool, float]:
    """Equal identifying columns, and r, p, CIs within TOLERANCE (NaN where the other is NaN)."""
    keys = ["model", "metric", "method", "n", "n_boot"]
    if not old[keys].equals(new[keys]):
        return False, float("inf")
    numbers = ["r", "p", "ci_low", "ci_high"]
    a, b = old[numbers].to_numpy(float), new[numbers].to_numpy(float)
    if not np.array_equal(np.isnan(a), np.isnan(b)):
        return False, float("inf")
    worst = float(np.nanmax(np.abs(a - b))) if np.isfinite(a).any() else 0.0
    return worst <= TOLERANCE, worst


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--responses", type=int, default=480)
    parser.add_argument("--models", type=int, default=8)
    parser.add_argument("--boot", type=int, default=2000)
    args = parser.parse_args()

    per_response, human = synthetic_study(args.responses, args.models)
    scopes = 1 + args.models
    n_metrics = len(metrics.REFERENCE_METRICS)
    print(f"{args.responses} responses, {args.models} systems: {scopes} scopes x {n_metrics} metrics x "
          f"{args.boot} resamples = {scopes * n_metrics * args.boot:,} Kendall (and Spearman) statistics")
    print("load average at start: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))

    def run() -> pd.DataFrame:
        return metrics.metric_human_agreement(per_response, human, n_boot=args.boot, seed=0)

    run()  # warm up imports and caches before either timing
    with old_bootstrap():
        old_seconds, old = timed(run)
    new_seconds, new = timed(run)
    speedup = old_seconds / new_seconds
    same, worst = same_table(old, new)
    print(f"old (scipy.kendalltau per resample)  {old_seconds:8.2f} s")
    print(f"new (vectorised over resamples)      {new_seconds:8.2f} s")
    print(f"speed-up {speedup:.1f}x (target {TARGET_SPEEDUP:.0f}x): {'PASS' if speedup >= TARGET_SPEEDUP else 'FAIL'}")
    print(f"same CIs (r, p, ci_low, ci_high within {TOLERANCE:g}; largest difference {worst:.1e}): "
          f"{'PASS' if same else 'FAIL'}")
    print("load average at end:   {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))


if __name__ == "__main__":
    main()
