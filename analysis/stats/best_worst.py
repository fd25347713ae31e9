"""Most/least (best-worst) choices: scores with bootstrap intervals, shares with Wilson intervals, equal shares.

In a best-worst task a participant picks the most and the least (e.g.
helpful) response of a choice set: one block as one participant saw it.
A source is a system x condition. ``best_worst_scores`` counts each source's
best and worst picks (best - worst, normalised by times shown, with a
percentile bootstrap interval over participants); ``best_worst_shares`` gives
the share of the choice sets showing a source in which it was picked most,
and least, each with a Wilson score interval, and tests that every source is
picked equally often.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats
from statsmodels.stats.proportion import proportion_confint

from analysis.stats.primitives import CONFIDENCE, _join_notes, _missing_columns_note, _note_frame, holm

#: What ``analysis.stats`` re-exports of this family.
__all__ = [
    "BEST_WORST_COLUMNS", "BEST_WORST_SHARES_COLUMNS", "best_worst_scores", "best_worst_shares",
]

# Below this expected count per source the chi-square approximation of the equal-shares test is rough.
_MIN_EXPECTED = 5
# Bootstrap draws x participants held in memory at once (int64 weights: 16 MB).
_BOOTSTRAP_CELLS = 2_000_000

BEST_WORST_COLUMNS = [
    "model", "condition", "n_shown", "n_participants", "best", "worst", "best_minus_worst", "normalized",
    "normalized_ci_low", "normalized_ci_high", "n_boot", "note",
]


def _choices(ratings: pd.DataFrame, condition: str, best: str, worst: str) -> pd.DataFrame:
    """The rows with boolean ``_best``/``_worst`` and a ``_condition`` ("" when the frame has none)."""
    return ratings.assign(
        _best=ratings[best].fillna(False).astype(bool),
        _worst=ratings[worst].fillna(False).astype(bool),
        _condition=ratings[condition] if condition in ratings.columns else "",
    )


def _irregular_sets_note(data: pd.DataFrame, participant: str, block: str) -> str:
    per_set = data.groupby([participant, block], observed=True)[["_best", "_worst"]].sum()
    irregular = int(((per_set["_best"] != 1) | (per_set["_worst"] != 1)).sum())
    return f"{irregular} participant x block sets without exactly one best and one worst" if irregular else ""


def best_worst_scores(
    ratings: pd.DataFrame,
    *,
    n_boot: int = 200,
    seed: int = 0,
    confidence: float = CONFIDENCE,
    participant: str = "participant_id",
    block: str = "block_id",
    model: str = "model",
    condition: str = "condition",
    best: str = "best",
    worst: str = "worst",
) -> pd.DataFrame:
    """Best, worst and best-minus-worst counts per source (model x condition), with a bootstrap interval.

    ``normalized = (best - worst) / n_shown``, from -1 (always worst) to +1
    (always best). Its interval (``normalized_ci_low``, ``normalized_ci_high``)
    is the percentile bootstrap over participants: ``n_boot`` resamples of the
    participants with replacement (seeded by ``seed``), each a weighted sum of
    the participants' own counts; none when ``n_boot`` is 0 or fewer than two
    participants saw the source. ``note`` flags participant x block sets
    without exactly one best and one worst (they are still counted).

    Examples
    --------
    >>> ratings = pd.DataFrame({"participant_id": np.repeat(["a", "b"], 3), "block_id": "Q1",
    ...     "model": ["A", "B", "C"] * 2, "condition": "base",
    ...     "best": [True, False, False, True, False, False],
    ...     "worst": [False, False, True, False, True, False]})
    >>> best_worst_scores(ratings)[["model", "best", "worst", "normalized", "normalized_ci_low"]]
      model  best  worst  normalized  normalized_ci_low
    0     A     2      0         1.0                1.0
    1     B     0      1        -0.5               -1.0
    2     C     0      1        -0.5               -1.0
    """
    problem = _missing_columns_note(ratings, [participant, block, model, best, worst])
    if problem:
        return _note_frame(BEST_WORST_COLUMNS, problem)
    data = _choices(ratings, condition, best, worst).assign(_shown=1)
    note = _irregular_sets_note(data, participant, block)
    per_person = data.groupby([participant, model, "_condition"], observed=True)[["_shown", "_best", "_worst"]].sum()
    wide = per_person.unstack([model, "_condition"], fill_value=0).sort_index(axis=1)
    shown, best_counts, worst_counts = (wide[column].to_numpy(dtype=float) for column in ("_shown", "_best", "_worst"))
    sources = wide["_shown"].columns.to_frame(index=False)
    table = sources.set_axis(["model", "condition"], axis=1).assign(
        n_shown=shown.sum(axis=0).astype(int), n_participants=(shown > 0).sum(axis=0),
        best=best_counts.sum(axis=0).astype(int), worst=worst_counts.sum(axis=0).astype(int),
    )
    table["best_minus_worst"] = table["best"] - table["worst"]
    table["normalized"] = table["best_minus_worst"] / table["n_shown"]
    low, high = _bootstrap_normalized(shown, best_counts - worst_counts, n_boot, seed, confidence)
    alone = table["n_participants"].to_numpy() < 2
    table["normalized_ci_low"] = np.where(alone, np.nan, low)
    table["normalized_ci_high"] = np.where(alone, np.nan, high)
    table["n_boot"] = n_boot
    table["note"] = [_join_notes(note, "fewer than 2 participants: no bootstrap interval" if one else "")
                     for one in alone]
    return table[BEST_WORST_COLUMNS]


def _bootstrap_normalized(shown: np.ndarray, net: np.ndarray, n_boot: int, seed: int,
                          confidence: float) -> tuple[np.ndarray, np.ndarray]:
    """Percentile interval of sum(net) / sum(shown) per column, resampling the rows (participants).

    A resample of n participants with replacement is a multinomial count of
    how often each was drawn: the resampled totals are those counts times the
    participants' rows, a matrix product for many draws at once.
    """
    n_people, n_sources = shown.shape
    if n_boot <= 0 or n_people == 0:
        return np.full(n_sources, np.nan), np.full(n_sources, np.nan)
    rng = np.random.default_rng(seed)
    chunk = max(1, _BOOTSTRAP_CELLS // n_people)
    draws = np.empty((n_boot, n_sources))
    for start in range(0, n_boot, chunk):
        size = min(chunk, n_boot - start)
        weights = rng.multinomial(n_people, np.full(n_people, 1.0 / n_people), size=size)
        with np.errstate(invalid="ignore", divide="ignore"):
            # A resample in which nobody saw the source has no score (0 / 0): left out of its percentiles.
            draws[start:start + size] = (weights @ net) / (weights @ shown)
    tail = (1 - confidence) / 2 * 100
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.nanpercentile(draws, tail, axis=0), np.nanpercentile(draws, 100 - tail, axis=0)


BEST_WORST_SHARES_COLUMNS = [
    "model", "condition", "choice", "n_sets", "n_participants", "count", "share", "ci_low", "ci_high",
    "chance_share", "chi2", "df", "p", "p_holm", "holm_family", "note",
]

#: The two picks of a choice set, in table order, and the column of the rows that carries each.
CHOICES = {"most": "_best", "least": "_worst"}


def best_worst_shares(
    ratings: pd.DataFrame,
    *,
    confidence: float = CONFIDENCE,
    participant: str = "participant_id",
    block: str = "block_id",
    model: str = "model",
    condition: str = "condition",
    best: str = "best",
    worst: str = "worst",
) -> pd.DataFrame:
    """Share of the choice sets showing a source in which it was picked most, and least, with Wilson intervals.

    A choice set is one participant x block. Per source (model x condition)
    and ``choice`` (``most``, ``least``): ``n_sets`` choice sets showed it,
    ``count`` of them picked it, ``share = count / n_sets`` with its Wilson
    score interval (statsmodels ``proportion_confint(method="wilson")``).
    ``chance_share`` is the share expected if every pick were at random: the
    mean over those sets of 1 / (sources in the set). The test of equal
    shares is the chi-square goodness of fit of the counts across sources
    against equal counts (``scipy.stats.chisquare``); it repeats on the
    source rows of its choice and runs only when every source was shown in
    the same number of sets (otherwise equal counts are not the null, and
    ``note`` says so). Holm across the two tests (most, least).

    Examples
    --------
    >>> ratings = pd.DataFrame({"participant_id": np.repeat(list("abcd"), 2), "block_id": "Q1",
    ...     "model": ["A", "B"] * 4, "condition": "llm",
    ...     "best": [True, False, True, False, True, False, False, True],
    ...     "worst": [False, True, False, True, False, True, True, False]})
    >>> shares = best_worst_shares(ratings)
    >>> shares[["model", "choice", "count", "share", "ci_low", "chi2"]].round(3)
      model choice  count  share  ci_low  chi2
    0     A   most      3   0.75   0.301   1.0
    1     B   most      1   0.25   0.046   1.0
    2     A  least      1   0.25   0.046   1.0
    3     B  least      3   0.75   0.301   1.0
    """
    problem = _missing_columns_note(ratings, [participant, block, model, best, worst])
    if problem:
        return _note_frame(BEST_WORST_SHARES_COLUMNS, problem)
    data = _choices(ratings, condition, best, worst)
    note = _irregular_sets_note(data, participant, block)
    # One row per choice set x source: a source shown twice in a set is one option of it.
    shown = data.groupby([participant, block, model, "_condition"], observed=True)[list(CHOICES.values())].any()
    shown = shown.reset_index()
    sources_in_set = shown.groupby([participant, block], observed=True)[model].transform("size")
    shown["_chance"] = 1.0 / sources_in_set
    per_source = shown.groupby([model, "_condition"], observed=True, sort=True).agg(
        n_sets=("_chance", "size"), n_participants=(participant, "nunique"), chance_share=("_chance", "mean"),
        **{choice: (column, "sum") for choice, column in CHOICES.items()},
    ).reset_index().rename(columns={model: "model", "_condition": "condition"})
    tables = [_choice_rows(per_source, choice, confidence) for choice in CHOICES]
    pvalues = [table["p"].iloc[0] for table in tables]
    tested = [choice for choice, p in zip(CHOICES, pvalues) if np.isfinite(p)]
    family = f"the equal-shares tests ({', '.join(tested)})" if tested else "none: no equal-shares test ran"
    for table, p_holm in zip(tables, holm(pvalues)):
        table["p_holm"] = p_holm
        table["holm_family"] = family
        table["note"] = [_join_notes(note, row_note) for row_note in table["note"]]
    return pd.concat(tables, ignore_index=True)[BEST_WORST_SHARES_COLUMNS]


def _choice_rows(per_source: pd.DataFrame, choice: str, confidence: float) -> pd.DataFrame:
    counts = per_source[choice].to_numpy(dtype=int)
    n_sets = per_source["n_sets"].to_numpy(dtype=int)
    low, high = proportion_confint(counts, n_sets, alpha=1 - confidence, method="wilson")
    # The bound is exactly 0 when nothing was picked and 1 when everything was; statsmodels leaves float dust there.
    low, high = np.where(counts == 0, 0.0, low), np.where(counts == n_sets, 1.0, high)
    table = per_source[["model", "condition", "n_sets", "n_participants", "chance_share"]].assign(
        choice=choice, count=counts, share=counts / n_sets, ci_low=low, ci_high=high,
    )
    return table.assign(**_equal_shares_test(counts, n_sets, choice))


def _equal_shares_test(counts: np.ndarray, n_sets: np.ndarray, choice: str) -> dict[str, Any]:
    test: dict[str, Any] = {"chi2": np.nan, "df": len(counts) - 1, "p": np.nan, "note": ""}
    if len(counts) < 2:
        test["note"] = "one source: no test of equal shares"
    elif np.ptp(n_sets) != 0:
        test["note"] = "sources shown in different numbers of sets: equal counts are not the null, no test"
    elif counts.sum() == 0:
        test["note"] = f"no source was picked {choice}: no test"
    else:
        result = stats.chisquare(counts)
        test.update(chi2=float(result.statistic), p=float(result.pvalue))
        if counts.sum() / len(counts) < _MIN_EXPECTED:
            test["note"] = f"expected count per source below {_MIN_EXPECTED}: the chi-square p is approximate"
    return test
