"""Building blocks shared by every family of analyses: constants, notes, corrections, effect sizes.

Nothing here runs a study-level analysis. It holds the condition labels and
defaults, the helpers that build one-row ``note`` tables, Holm's correction,
the t-based interval of a mean, the effect sizes (Cohen's d, eta squared,
rank-biserial) and the small frame helpers (one dimension, participant
subsampling, quiet library calls) that the analysis modules share.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

#: What ``analysis.stats`` re-exports of this family.
__all__ = [
    "ALPHA", "CONFIDENCE", "MISSING_ANSWERS", "cohen_d", "eta_squared", "holm", "mean_ci", "rank_biserial",
    "signed_rank_test",
]

ALPHA = 0.05
CONFIDENCE = 0.95

# The smallest two-sided exact binomial p of n trials at 0.5 is 2 * 0.5**n: 0.0625 at n = 5, so with fewer
# trials the test cannot reach p < 0.05 (0.03125 at n = 6).
BINOMIAL_MIN_N = 6

#: Values that mean "no answer" (a blank cell, a missing value; or no region).
MISSING_ANSWERS = frozenset({"", "nan", "none"})


# ---------------------------------------------------------------------------
# Shared helpers
# ---------------------------------------------------------------------------


def friedman_reach_note(n: int, k: int, described: str) -> str:
    """A note (``described``: what the n sets of k are) when n complete sets of k cannot give Friedman's test
    p < .05: its chi-squared is at most n (k - 1), reached when every set orders the k alike (Kendall's
    W = 1), so its smallest p is the chi-squared tail there; "" when p < .05 can be reached.

    >>> friedman_reach_note(2, 3, "2 complete rankings of 3")
    '2 complete rankings of 3: the test cannot reach p < 0.05'
    >>> friedman_reach_note(3, 3, "3 complete rankings of 3")
    ''
    """
    if stats.chi2.sf(n * (k - 1), k - 1) >= ALPHA:
        return f"{described}: the test cannot reach p < 0.05"
    return ""


def _note_frame(columns: Sequence[str], note: str, **values: Any) -> pd.DataFrame:
    """One row with every column missing except ``values`` and ``note``."""
    row: dict[str, Any] = {column: np.nan for column in columns}
    row.update(values)
    row["note"] = note
    return pd.DataFrame([row], columns=list(columns))


def _join_notes(*notes: str) -> str:
    return "; ".join(note for note in notes if note)


def _missing_columns_note(frame: pd.DataFrame, columns: Sequence[str]) -> str:
    missing = [column for column in columns if column not in frame.columns]
    if missing:
        return "missing columns: " + ", ".join(missing)
    if frame.empty:
        return "no data"
    return ""


def holm(pvalues: Sequence[float] | np.ndarray) -> np.ndarray:
    """Holm-adjusted p-values; missing p-values stay missing and are not counted.

    Examples
    --------
    >>> holm([0.01, 0.04, 0.03, np.nan]).round(3).tolist()
    [0.03, 0.06, 0.06, nan]
    """
    values = np.asarray(pvalues, dtype=float)
    adjusted = np.full(values.shape, np.nan)
    finite = np.isfinite(values)
    if finite.any():
        adjusted[finite] = _holm_step_down(values[finite])
    return adjusted


def _holm_step_down(pvalues: np.ndarray) -> np.ndarray:
    """``multipletests(p, method="holm")[1]``, step for step (same sort, same clipping).

    statsmodels runs ``gc.collect()`` on every Holm call, which costs a
    quarter of a second per table once a large study's frames are in memory.
    """
    order = np.argsort(pvalues)
    stepped = np.maximum.accumulate(pvalues[order] * np.arange(len(pvalues), 0, -1))
    stepped[stepped > 1] = 1
    adjusted = np.empty_like(stepped)
    adjusted[order] = stepped
    return adjusted


def mean_ci(values: Sequence[float] | np.ndarray, confidence: float = CONFIDENCE) -> dict[str, float]:
    """n, mean, SD (ddof=1) and the t-based confidence interval of the mean.

    Examples
    --------
    >>> {k: round(v, 3) for k, v in mean_ci([2, 4, 4, 5]).items()}
    {'n': 4, 'mean': 3.75, 'sd': 1.258, 'ci_low': 1.748, 'ci_high': 5.752}
    """
    array = np.asarray(values, dtype=float)
    array = array[np.isfinite(array)]
    n = int(array.size)
    if n == 0:
        return {"n": 0, "mean": np.nan, "sd": np.nan, "ci_low": np.nan, "ci_high": np.nan}
    mean = float(array.mean())
    if n < 2:
        return {"n": n, "mean": mean, "sd": np.nan, "ci_low": np.nan, "ci_high": np.nan}
    sd = float(array.std(ddof=1))
    half_width = stats.t.ppf((1 + confidence) / 2, n - 1) * sd / np.sqrt(n)
    return {"n": n, "mean": mean, "sd": sd, "ci_low": float(mean - half_width), "ci_high": float(mean + half_width)}


def _single_dimension(
    ratings: pd.DataFrame, dimension: str | None, column: str
) -> tuple[pd.DataFrame, str]:
    """Rows of one rating dimension, so multi-dimension studies never mix scales."""
    if column not in ratings.columns:
        return ratings, ""
    present = list(pd.unique(ratings[column].dropna()))
    if dimension is not None:
        note = "" if dimension in present else f"dimension {dimension!r} not in data"
        return ratings[ratings[column] == dimension], note
    if len(present) <= 1:
        return ratings, ""
    chosen = present[0]
    note = f"dimension {chosen!r} only ({len(present)} in data; pass dimension= for the others)"
    return ratings[ratings[column] == chosen], note


def each_dimension(
    compute: Callable[[str | None], pd.DataFrame], ratings: pd.DataFrame, dimension: str | None, column: str,
    columns: Sequence[str],
) -> pd.DataFrame:
    """``compute(dimension)`` for every rating dimension in ``ratings``, stacked with a ``dimension`` column.

    ``dimension`` given: that one only. A frame without a dimension column is one dimension, labelled "".
    The result has ``columns`` (which hold ``dimension``), so a one-dimension study gets the same table shape.

    Examples
    --------
    >>> ratings = pd.DataFrame({"dimension": ["b", "a", "b"], "rating": [1.0, 2, 3]})
    >>> each_dimension(lambda d: pd.DataFrame({"mean": [ratings.loc[ratings["dimension"] == d, "rating"].mean()]}),
    ...                ratings, None, "dimension", ["dimension", "mean"])
      dimension  mean
    0         a   2.0
    1         b   2.0
    """
    if column not in ratings.columns:
        return compute(None).assign(dimension="").reindex(columns=list(columns))
    if dimension is not None:
        chosen = [dimension]
    else:
        chosen = sorted(pd.unique(ratings[column].dropna()), key=str) or [None]
    parts = [compute(value).assign(dimension="" if value is None else value) for value in chosen]
    return pd.concat(parts, ignore_index=True).reindex(columns=list(columns))


def _subsample_participants(
    data: pd.DataFrame, max_rows: int | None, seed: int, participant: str
) -> tuple[pd.DataFrame, str]:
    """Keep whole participants, in a seeded random order, until max_rows is reached."""
    if max_rows is None or len(data) <= max_rows:
        return data, ""
    sizes = data.groupby(participant, sort=True).size()
    order = np.random.default_rng(seed).permutation(len(sizes))
    cumulative = sizes.iloc[order].cumsum()
    kept = cumulative.index[cumulative <= max_rows]
    if len(kept) == 0:
        kept = cumulative.index[:1]
    subset = data[data[participant].isin(kept)]
    note = (
        f"subsampled {len(kept)} of {len(sizes)} participants "
        f"({len(subset)} of {len(data)} rows; max_rows={max_rows}, seed={seed})"
    )
    return subset, note


def _quietly(function: Callable, *args: Any, **kwargs: Any) -> Any:
    """Call pingouin/statsmodels without the pandas-4 deprecation chatter."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", pd.errors.Pandas4Warning)
        warnings.simplefilter("ignore", FutureWarning)
        return function(*args, **kwargs)


def _first_present(frame: pd.DataFrame, names: Sequence[str]) -> pd.Series:
    """The first of several spellings a library version may use for a column."""
    for name in names:
        if name in frame.columns:
            return frame[name]
    return pd.Series(np.nan, index=frame.index)


def _is_missing_answer(answer: Any) -> bool:
    if answer is None or (np.ndim(answer) == 0 and pd.isna(answer)):
        return True
    return str(answer).strip().lower() in MISSING_ANSWERS


# ---------------------------------------------------------------------------
# Effect sizes
# ---------------------------------------------------------------------------


def cohen_d(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray) -> float:
    """Signed Cohen's d, ``(mean_a - mean_b) / pooled SD`` (pingouin's is unsigned).

    Examples
    --------
    >>> round(cohen_d([1, 2, 3], [3, 4, 5]), 3)
    -2.0
    """
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    n_a, n_b = a.size, b.size
    if n_a < 2 or n_b < 2:
        return np.nan
    pooled_variance = ((n_a - 1) * a.var(ddof=1) + (n_b - 1) * b.var(ddof=1)) / (n_a + n_b - 2)
    if pooled_variance <= 0:
        return np.nan
    return float((a.mean() - b.mean()) / np.sqrt(pooled_variance))


def eta_squared(groups: Sequence[np.ndarray]) -> float:
    """Between-group sum of squares over the total sum of squares.

    Examples
    --------
    >>> round(eta_squared([np.array([1.0, 2, 3]), np.array([4.0, 5, 6])]), 4)
    0.7714
    """
    values = np.concatenate(groups)
    grand_mean = values.mean()
    total = ((values - grand_mean) ** 2).sum()
    between = sum(group.size * (group.mean() - grand_mean) ** 2 for group in groups)
    return float(between / total) if total > 0 else np.nan


def rank_biserial(differences: Sequence[float] | np.ndarray) -> float:
    """Matched-pairs rank-biserial correlation ``(W+ - W-) / (W+ + W-)`` over non-zero differences.

    Positive when the differences are mostly positive.

    Examples
    --------
    >>> rank_biserial([1.0, 2.0, -0.5, 0.0])
    0.6666666666666666
    """
    values = np.asarray(differences, dtype=float)
    values = values[values != 0]
    if values.size == 0:
        return np.nan
    ranks = stats.rankdata(np.abs(values))
    positive, negative = ranks[values > 0].sum(), ranks[values < 0].sum()
    return float((positive - negative) / (positive + negative))


# scipy's wilcoxon uses an exact permutation test over all 2**n sign flips when there are ties or zeros
# and n <= 13; it builds that null with its generic permutation_test (0.8 s a call), so the same null is
# enumerated here at once as a bit matrix (under 1 ms). Beyond 13, or with neither ties nor zeros, scipy
# itself is fast and is called.
_PERMUTATION_MAX_N = 13


def signed_rank_test(differences: Sequence[float] | np.ndarray) -> tuple[float, float]:
    """Wilcoxon signed-rank ``(W, p)`` of paired differences: what ``scipy.stats.wilcoxon(differences)`` gives.

    ``W`` is ``min(W+, W-)``; ``p`` is two-sided. Zeros are dropped from the ranks (``zero_method="wilcox"``).
    With ties or zeros among at most 13 differences the p value is the exact permutation p over every
    sign flip, equal to scipy's bit for bit (tests/test_stats.py checks random cases).

    Examples
    --------
    >>> signed_rank_test([1.0, 2.0, 2.0, -1.0, 0.0, 3.0])
    (1.5, 0.1875)
    """
    values = np.asarray(differences, dtype=float)
    nonzero = values != 0
    magnitudes = np.abs(values[nonzero])
    has_ties = np.unique(magnitudes).size < magnitudes.size
    if values.size > _PERMUTATION_MAX_N or not (has_ties or not nonzero.all()):
        result = stats.wilcoxon(values)
        return float(result.statistic), float(result.pvalue)
    ranks = np.zeros(values.size)
    ranks[nonzero] = stats.rankdata(magnitudes)
    positive, negative = ranks[values > 0].sum(), ranks[values < 0].sum()
    # Row i of the sign matrix is the binary expansion of i: every subset of differences taken as positive.
    signs = (np.arange(2 ** values.size)[:, None] >> np.arange(values.size)) & 1
    null = signs @ ranks
    # The same relative tolerance scipy's permutation_test applies to ties with the observed statistic.
    gamma = abs(np.finfo(float).eps * 100 * positive)
    less = np.count_nonzero(null <= positive + gamma) / null.size
    greater = np.count_nonzero(null >= positive - gamma) / null.size
    return float(min(positive, negative)), float(np.clip(2 * min(less, greater), 0.0, 1.0))
