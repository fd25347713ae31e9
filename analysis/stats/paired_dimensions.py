"""Baseline vs treatment per rating dimension, paired within raters and within items: Wilcoxon signed-rank at three levels.

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

from analysis.stats.primitives import _join_notes, _missing_columns_note, _note_frame, holm, rank_biserial

#: The two pairing levels, in table order.
PAIRING_LEVELS = ("rater_item", "rater_mean", "item")

# With fewer non-zero pairs the two-sided signed-rank test cannot reach p < 0.05
# (its smallest p is 2 / 2**n: 0.0625 at n = 5).
_MIN_PAIRS_FOR_5_PERCENT = 6

DIMENSION_WILCOXON_COLUMNS = [
    "dimension", "level", "baseline", "treatment", "n_pairs", "n_nonzero", "n_raters",
    "mean_baseline", "sd_baseline", "mean_treatment", "sd_treatment",
    "median_baseline", "median_treatment", "median_difference",
    "W", "z", "p", "p_holm", "rank_biserial", "r", "holm_family", "note",
]


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

    The test is ``scipy.stats.wilcoxon(treatment, baseline)`` with its
    defaults: zero differences dropped, exact p for small samples without
    ties, an exhaustive permutation p for up to 13 pairs with ties, the normal
    approximation beyond. ``W`` is min(W+, W-). Effect sizes, both positive
    when the treatment is rated higher: ``rank_biserial`` = (W+ - W-) /
    (W+ + W-), and ``r`` = Z / sqrt(n_nonzero) with Z the tie-corrected normal
    approximation without continuity correction (``z``, signed the same
    way). ``median_difference`` is the median of treatment - baseline over
    all pairs, zeros included. Holm across dimensions within each level.

    Examples
    --------
    >>> ratings = pd.DataFrame({"participant_id": np.repeat(["a", "b", "c"], 8),
    ...     "block_id": np.tile(np.repeat(["B1", "B2", "B3", "B4"], 2), 3),
    ...     "condition": ["base", "tuned"] * 12,
    ...     "rating": [2.0, 4, 3, 4, 2, 5, 3, 3, 1, 3, 2, 4, 3, 5, 2, 2, 3, 4, 2, 5, 1, 3, 4, 5]})
    >>> table = dimension_wilcoxon(ratings, baseline="base", treatment="tuned")
    >>> table[["level", "n_pairs", "n_nonzero", "W", "rank_biserial"]]
            level  n_pairs  n_nonzero    W  rank_biserial
    0  rater_item       12         10  0.0            1.0
    1  rater_mean        3          3  0.0            1.0
    2        item        4          4  0.0            1.0
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
    rows = []
    for level in PAIRING_LEVELS:
        family = [
            {"dimension": dimension_id, "level": level, **names,
             **_level_row(pairs, level, participant, block, complete_blocks)}
            for dimension_id, pairs in per_dimension.items()
        ]
        for row, p_holm in zip(family, holm([row["p"] for row in family])):
            row["p_holm"] = p_holm
            row["holm_family"] = f"level={level} (across {len(family)} dimensions)"
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
           "W": np.nan, "z": np.nan, "p": np.nan, "rank_biserial": np.nan, "r": np.nan, "note": ""}
    if differences.size == 0:
        row["note"] = "no rater rated a block in both conditions"
        return row
    if n_nonzero == 0:
        row["note"] = "every difference is zero: no test"
        return row
    result = stats.wilcoxon(treatment, baseline)
    # scipy's z is that of min(W+, W-), never positive: sign it by the direction of the differences.
    effect = rank_biserial(differences)
    z = abs(float(stats.wilcoxon(treatment, baseline, method="asymptotic").zstatistic)) * np.sign(effect)
    row.update(W=float(result.statistic), p=float(result.pvalue), z=z, rank_biserial=effect,
               r=z / np.sqrt(n_nonzero))
    if n_nonzero < _MIN_PAIRS_FOR_5_PERCENT:
        row["note"] = f"{n_nonzero} non-zero pairs: the test cannot reach p < 0.05"
    return row
