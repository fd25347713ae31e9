"""Baseline vs treatment per rating dimension, paired within raters and within items: Wilcoxon signed-rank at three
levels, and a crossed test that respects raters and items at once.

A design where raters judge items on several scales (e.g. three 5-point
dimensions) and both conditions answer every prompt: each rater's baseline
rating of a block is paired with their treatment rating of the same block
(``rater_item``), each rater's mean baseline rating with their mean treatment
rating (``rater_mean``), and each block's mean baseline rating over its raters
with its mean treatment rating over the same raters (``item``). Holm runs
across the dimensions within each level. The condition names come from the
study's design, never from here.

Only ``rater_mean`` needs every rater to judge every block: when each
participant judges a share of the blocks (an allocation of k blocks each),
rater means rest on different items and are not comparable, so that level is
left out with a note; ``item`` uses what each block got.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from analysis.stats.primitives import (
    _join_notes, _missing_columns_note, _note_frame, holm, rank_biserial, signed_rank_test,
)

#: What ``analysis.stats`` re-exports of this family.
__all__ = [
    "DIMENSION_WILCOXON_COLUMNS", "PAIRING_LEVELS", "TABLE_LEVELS", "dimension_wilcoxon", "valid_levels",
]

#: The Wilcoxon pairing levels.
PAIRING_LEVELS = ("rater_item", "rater_mean", "item")
#: Every level of the table: the pairings and the crossed test.
TABLE_LEVELS = PAIRING_LEVELS + ("crossed",)

#: Why the rater x item pairing is kept although no design makes it valid.
INDEPENDENT_PAIRS_NOTE = ("treats the rater x item pairs as independent: it over-rejects when the benefit varies "
                          "by item or by rater (kept for comparison)")

# With fewer non-zero pairs the two-sided signed-rank test cannot reach p < 0.05
# (its smallest p is 2 / 2**n: 0.0625 at n = 5).
_MIN_PAIRS_FOR_5_PERCENT = 6

DIMENSION_WILCOXON_COLUMNS = [
    "dimension", "level", "baseline", "treatment", "n_pairs", "n_nonzero", "n_raters",
    "mean_baseline", "sd_baseline", "mean_treatment", "sd_treatment",
    "median_baseline", "median_treatment", "median_difference",
    "W", "z", "t", "df", "p", "p_holm", "rank_biserial", "r", "holm_family", "valid_for_design", "note",
]


def valid_levels(n_raters: int, n_items: int, complete_blocks: bool) -> tuple[str, ...]:
    """The levels whose units are independent in this design, leading the table (plain values in, no Django).

    Few raters who judge every item: the items are the units (``item``), and the crossed test respects both.
    Many participants who each judge every item: the participants are (``rater_mean``), and the crossed test.
    Participants who judge a share of the items: ``item`` (rater means rest on different items, and the
    crossed test here needs the full rater x item table).

    Examples
    --------
    >>> valid_levels(5, 100, True), valid_levels(150, 24, True), valid_levels(60, 40, False)
    (('item', 'crossed'), ('rater_mean', 'crossed'), ('item',))
    """
    if not complete_blocks:
        return ("item",)
    return ("item", "crossed") if n_raters < n_items else ("rater_mean", "crossed")


def dimension_wilcoxon(
    ratings: pd.DataFrame,
    *,
    baseline: str,
    treatment: str,
    participant: str = "participant_id",
    block: str = "block_id",
    condition: str = "condition",
    rating: str = "rating",
    dimension_column: str = "dimension",
    complete_blocks: bool = True,
) -> pd.DataFrame:
    """Wilcoxon signed-rank test of ``treatment`` vs ``baseline`` per dimension, paired three ways.

    ``level="rater_item"``: one pair per rater x block, the mean of the
    rater's ratings of the block's baseline responses and the mean of their
    ratings of its treatment responses (systems pooled: both sides come from
    the same block). ``level="rater_mean"``: one pair per rater, the means of
    those pairs' two sides, so both rest on the same blocks. ``level="item"``:
    one pair per block, the means over raters of those pairs' two sides, so
    both rest on the same raters (the unit when the benefit varies by item).
    A rater x block that lacks one condition is left out and counted in
    ``note``. ``complete_blocks=False`` (participants judged a share of the
    blocks each) leaves the ``rater_mean`` row empty with a note saying why.

    The test is ``scipy.stats.wilcoxon(treatment, baseline)`` (``signed_rank_test``) with its
    defaults: zero differences dropped, exact p for small samples without
    ties, an exhaustive permutation p for up to 13 pairs with ties, the normal
    approximation beyond. ``W`` is min(W+, W-). Effect sizes, both positive
    when the treatment is rated higher: ``rank_biserial`` = (W+ - W-) /
    (W+ + W-), and ``r`` = Z / sqrt(n_nonzero) with Z the tie-corrected normal
    approximation without continuity correction (``z``, signed the same
    way). ``median_difference`` is the median of treatment - baseline over
    all pairs, zeros included. Holm across dimensions within each level.

    ``level="crossed"`` respects raters and items at once: the t test of the
    mean rater x block difference with random raters and items
    (:func:`crossed_mean_test`; columns ``t`` and ``df``), for designs where
    every rater judged every block. ``rater_item`` rows say that they treat
    the pairs as independent. ``valid_for_design`` marks the levels whose
    units are independent in this design (:func:`valid_levels`, from the
    numbers of raters and blocks and ``complete_blocks``); those rows come
    first, so the results page leads with them.

    Examples
    --------
    >>> ratings = pd.DataFrame({"participant_id": np.repeat(["a", "b", "c"], 8),
    ...     "block_id": np.tile(np.repeat(["B1", "B2", "B3", "B4"], 2), 3),
    ...     "condition": ["base", "tuned"] * 12,
    ...     "rating": [2.0, 4, 3, 4, 2, 5, 3, 3, 1, 3, 2, 4, 3, 5, 2, 2, 3, 4, 2, 5, 1, 3, 4, 5]})
    >>> table = dimension_wilcoxon(ratings, baseline="base", treatment="tuned")
    >>> table[["level", "n_pairs", "n_nonzero", "W", "rank_biserial", "valid_for_design"]]
            level  n_pairs  n_nonzero    W  rank_biserial  valid_for_design
    0        item        4          4  0.0            1.0              True
    1     crossed       12         10  NaN            NaN              True
    2  rater_item       12         10  0.0            1.0             False
    3  rater_mean        3          3  0.0            1.0             False
    """
    if baseline == treatment:
        raise ValueError(f"baseline and treatment are the same condition ({baseline!r})")
    names = {"baseline": baseline, "treatment": treatment}
    problem = _missing_columns_note(ratings, [participant, block, condition, rating])
    if problem:
        return _note_frame(DIMENSION_WILCOXON_COLUMNS, problem, **names)
    data = ratings.dropna(subset=[rating])
    data = data[data[condition].isin([baseline, treatment])]
    if data.empty:
        return _note_frame(DIMENSION_WILCOXON_COLUMNS, f"no ratings of {baseline} or {treatment}", **names)
    data = data.assign(_dimension=data[dimension_column] if dimension_column in data.columns else "")
    per_dimension = {
        dimension_id: _pairs(cells, participant, block, condition, rating, baseline, treatment)
        for dimension_id, cells in data.groupby("_dimension", sort=True, observed=True)
    }
    valid = valid_levels(data[participant].nunique(), data[block].nunique(), complete_blocks)
    rows = []
    for level in sorted(TABLE_LEVELS, key=lambda name: name not in valid):
        family = [
            {"dimension": dimension_id, "level": level, **names,
             **_level_row(pairs, level, participant, block, complete_blocks)}
            for dimension_id, pairs in per_dimension.items()
        ]
        for row, p_holm in zip(family, holm([row["p"] for row in family])):
            row["p_holm"] = p_holm
            row["holm_family"] = f"level={level} (across {len(family)} dimensions)"
            row["valid_for_design"] = level in valid
            if level == "rater_item":
                row["note"] = _join_notes(row["note"], INDEPENDENT_PAIRS_NOTE)
        rows.extend(family)
    return pd.DataFrame(rows, columns=DIMENSION_WILCOXON_COLUMNS)


def _pairs(cells: pd.DataFrame, participant: str, block: str, condition: str, rating: str,
           baseline: str, treatment: str) -> tuple[pd.DataFrame, str]:
    """Rater x block means of each side (columns ``baseline``, ``treatment``), complete pairs only; a note."""
    means = cells.groupby([participant, block, condition], observed=True)[rating].mean()
    wide = means.unstack(condition).reindex(columns=[baseline, treatment])
    wide.columns = ["baseline", "treatment"]
    complete = wide.dropna()
    raters = cells[participant].nunique()
    left_out = len(wide) - len(complete)
    raters_out = raters - complete.index.get_level_values(0).nunique()
    note = _join_notes(
        f"{left_out} rater x block cells lack {baseline} or {treatment} (left out)" if left_out else "",
        f"{raters_out} of {raters} raters rated no block in both conditions" if raters_out else "",
    )
    return complete, note


#: Why the rater-means pairing is left out when participants judge a share of the blocks.
INCOMPLETE_RATER_MEAN_NOTE = (
    "left out: each participant judged a share of the blocks, so rater means rest on different items "
    "and are not paired on the same ones; see level=item"
)


def _level_row(pairs: tuple[pd.DataFrame, str], level: str, participant: str, block: str,
               complete_blocks: bool) -> dict[str, Any]:
    complete, note = pairs
    n_raters = complete.index.get_level_values(participant).nunique() if len(complete) else 0
    if level == "crossed":
        result = _crossed(complete, participant, block, complete_blocks)
        return {**result, "n_raters": n_raters, "note": _join_notes(note, result["note"])}
    if level == "rater_mean":
        if not complete_blocks:
            empty = _signed_rank(np.array([]), np.array([]))
            return {**empty, "n_raters": n_raters, "note": INCOMPLETE_RATER_MEAN_NOTE}
        complete = complete.groupby(level=participant, observed=True).mean()
    elif level == "item":
        complete = complete.groupby(level=block, observed=True).mean()
    result = _signed_rank(complete["baseline"].to_numpy(dtype=float), complete["treatment"].to_numpy(dtype=float))
    return {**result, "n_raters": n_raters, "note": _join_notes(note, result["note"])}


def _side(values: np.ndarray, side: str) -> dict[str, float]:
    return {f"mean_{side}": float(values.mean()) if values.size else np.nan,
            f"sd_{side}": float(values.std(ddof=1)) if values.size >= 2 else np.nan,
            f"median_{side}": float(np.median(values)) if values.size else np.nan}


def _signed_rank(baseline: np.ndarray, treatment: np.ndarray) -> dict[str, Any]:
    """The test columns of one row: counts, the sides' summaries, W, z, p and the effect sizes."""
    differences = treatment - baseline
    n_nonzero = int(np.count_nonzero(differences))
    row = {"n_pairs": int(differences.size), "n_nonzero": n_nonzero, **_side(baseline, "baseline"),
           **_side(treatment, "treatment"),
           "median_difference": float(np.median(differences)) if differences.size else np.nan,
           "W": np.nan, "z": np.nan, "t": np.nan, "df": np.nan, "p": np.nan, "rank_biserial": np.nan, "r": np.nan,
           "note": ""}
    if differences.size == 0:
        row["note"] = "no rater rated a block in both conditions"
        return row
    if n_nonzero == 0:
        row["note"] = "every difference is zero: no test"
        return row
    statistic, pvalue = signed_rank_test(differences)
    # scipy's z is that of min(W+, W-), never positive: sign it by the direction of the differences.
    effect = rank_biserial(differences)
    z = abs(float(stats.wilcoxon(treatment, baseline, method="asymptotic").zstatistic)) * np.sign(effect)
    row.update(W=statistic, p=pvalue, z=z, rank_biserial=effect,
               r=z / np.sqrt(n_nonzero))
    if n_nonzero < _MIN_PAIRS_FOR_5_PERCENT:
        row["note"] = f"{n_nonzero} non-zero pairs: the test cannot reach p < 0.05"
    return row


#: Why the crossed test is left out when participants judge a share of the blocks.
INCOMPLETE_CROSSED_NOTE = ("left out: the crossed test needs every rater to judge every item (here each judged a "
                           "share); see level=item")


def crossed_mean_test(differences: np.ndarray) -> dict[str, float]:
    """t test of the mean of a complete raters x items table of differences, with random raters and items.

    The model is ``d[r, i] = mu + a[r] + b[i] + e[r, i]`` (a benefit that varies by rater, by item and by
    cell, all random). In a complete table the mean's variance is ``(I s2_a + R s2_b + s2_e) / (R I)``,
    estimated from the two-way ANOVA mean squares (``MS_R - MS_E = I s2_a``, ``MS_I - MS_E = R s2_b``) with
    a negative component set to zero (as REML would); the degrees of freedom are Satterthwaite's for that
    combination of mean squares. With both components positive this is the REML fit of the crossed
    random-intercept model (tests/test_stats_clustered.py checks it against statsmodels' MixedLM).

    Examples
    --------
    >>> d = np.array([[0.5, 1.0, -0.5, 1.5], [1.0, 0.5, 0.0, 2.0], [0.0, 1.5, -1.0, 1.0]])
    >>> {k: round(v, 4) for k, v in crossed_mean_test(d).items()}
    {'mean': 0.625, 't': 1.4639, 'df': 3.0, 'p': 0.2394}
    """
    n_raters, n_items = differences.shape
    grand = differences.mean()
    rater_means, item_means = differences.mean(axis=1), differences.mean(axis=0)
    ms_rater = n_items * ((rater_means - grand) ** 2).sum() / (n_raters - 1)
    ms_item = n_raters * ((item_means - grand) ** 2).sum() / (n_items - 1)
    residual = differences - rater_means[:, None] - item_means[None, :] + grand
    df_error = (n_raters - 1) * (n_items - 1)
    ms_error = (residual ** 2).sum() / df_error
    # V = c_R MS_R + c_I MS_I + c_E MS_E, each component kept only when its estimate is positive.
    use_rater, use_item = float(ms_rater > ms_error), float(ms_item > ms_error)
    weights = (use_rater, use_item, 1.0 - use_rater - use_item)
    squares = (ms_rater, ms_item, ms_error)
    dfs = (n_raters - 1, n_items - 1, df_error)
    combined = sum(c * m for c, m in zip(weights, squares))
    if not combined > 0:
        return {"mean": float(grand), "t": np.nan, "df": np.nan, "p": np.nan}
    df = combined ** 2 / sum((c * m) ** 2 / d for c, m, d in zip(weights, squares, dfs) if c)
    t = grand / np.sqrt(combined / (n_raters * n_items))
    return {"mean": float(grand), "t": float(t), "df": float(df), "p": float(2 * stats.t.sf(abs(t), df))}


def _crossed(complete: pd.DataFrame, participant: str, block: str, complete_blocks: bool) -> dict[str, Any]:
    """The crossed row: the rater x block cells' sides, and the crossed t test of their differences."""
    row = _signed_rank(np.array([]), np.array([]))
    row.update(note="")
    if not complete_blocks:
        row["note"] = INCOMPLETE_CROSSED_NOTE
        return row
    if complete.empty:
        return _signed_rank(np.array([]), np.array([]))
    baseline, treatment = complete["baseline"].to_numpy(dtype=float), complete["treatment"].to_numpy(dtype=float)
    differences = treatment - baseline
    row.update(n_pairs=int(differences.size), n_nonzero=int(np.count_nonzero(differences)),
               **_side(baseline, "baseline"), **_side(treatment, "treatment"),
               median_difference=float(np.median(differences)) if differences.size else np.nan)
    if row["n_nonzero"] == 0:
        row["note"] = "every difference is zero: no test"
        return row
    table = (complete["treatment"] - complete["baseline"]).unstack(block)
    if table.shape[0] < 2 or table.shape[1] < 2:
        row["note"] = "the crossed test needs at least 2 raters and 2 items"
        return row
    if table.isna().to_numpy().any():
        row["note"] = "left out: not every rater judged every item in both conditions; see level=item"
        return row
    result = crossed_mean_test(table.to_numpy(dtype=float))
    row.update(t=result["t"], df=result["df"], p=result["p"])
    if not np.isfinite(result["p"]):
        row["note"] = "every difference is the same: no test"
    elif min(table.shape) < 3:
        row["note"] = f"{min(table.shape)} raters or items: the test rests on 1 degree of freedom"
    return row
