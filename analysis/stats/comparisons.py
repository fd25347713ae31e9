"""Baseline vs treatment comparisons: win table, descriptives, paired Wilcoxon, sensitivity.

The head-to-head tables of a study that declares a comparison (its baseline
and treatment conditions, any names, e.g. zero-shot and fine-tuned in TIDE):
which condition wins per system x scenario and how often a reference beats
both (``win_table``, ``win_summary``), the per-cell means with t intervals
(``descriptives``), the paired signed-rank test of treatment vs baseline per
model (``paired_zs_ft``), and ``sensitivity``, which reruns any analysis on
two retained rating frames. Column names keep DESIGN 3.3's ``zs_``/``ft_``
prefixes: ``zs`` is the baseline, ``ft`` the treatment.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from analysis.stats.primitives import (
    CONFIDENCE, _join_notes, _missing_columns_note, _note_frame,
    _single_dimension, each_dimension, holm, mean_ci, rank_biserial, signed_rank_test,
)

#: What ``analysis.stats`` re-exports of this family.
__all__ = [
    "DESCRIPTIVES_COLUMNS", "WILCOXON_COLUMNS", "WIN_COLUMNS", "WIN_SUMMARY_COLUMNS", "win_summary_of_ratings",
    "descriptives", "paired_zs_ft", "sensitivity", "win_summary", "win_table",
]


# ---------------------------------------------------------------------------
# Win table
# ---------------------------------------------------------------------------

# Two means closer than this are a tie: ratings are small integers, so any
# real difference between means is far larger than float rounding.
_TIE_TOLERANCE = 1e-9

WIN_COLUMNS = [
    "model", "scenario", "zs_mean", "ft_mean", "winner", "reference_mean",
    "reference_points", "dimension", "n", "note",
]


TIE = "tie"


def _winner(zs_mean: float, ft_mean: float, baseline: str, treatment: str) -> str:
    if not (np.isfinite(zs_mean) and np.isfinite(ft_mean)):
        return ""
    if abs(zs_mean - ft_mean) <= _TIE_TOLERANCE:
        return TIE
    return baseline if zs_mean > ft_mean else treatment


def _reference_points(reference_mean: float, zs_mean: float, ft_mean: float) -> float:
    means = (reference_mean, zs_mean, ft_mean)
    if not all(np.isfinite(mean) for mean in means):
        return np.nan
    # A tie with the reference earns the reference nothing.
    return float(sum(reference_mean > mean + _TIE_TOLERANCE for mean in (zs_mean, ft_mean)))


def win_table(
    ratings: pd.DataFrame,
    *,
    baseline: str,
    treatment: str,
    references: Sequence[str] = (),
    dimension: str | None = None,
    participant: str = "participant_id",
    block: str = "block_id",
    scenario: str = "scenario",
    model: str = "model",
    condition: str = "condition",
    rating: str = "rating",
    dimension_column: str = "dimension",
) -> pd.DataFrame:
    """Baseline vs treatment winner and reference points per system x scenario x dimension.

    Every rating dimension gets its rows (``dimension``; "" for a frame
    without a dimension column); ``dimension=`` narrows it to one.

    ``zs_mean`` is the baseline condition's mean, ``ft_mean`` the treatment's;
    ``winner`` is the name of the condition with the higher mean, or ``tie``.
    ``reference_mean`` is the mean rating of the responses of the
    ``references`` conditions shown in the same block(s) as the system's
    responses; the reference earns 2 points when its mean beats both the
    baseline and the treatment mean, 1 when it beats one of them (ties earn
    nothing); both are blank for a study without references. ``n`` is the
    number of participants who rated the system in that scenario.

    Returns columns ``model, scenario, zs_mean, ft_mean, winner,
    reference_mean, reference_points, dimension, n, note`` (DESIGN 3.3's first).

    Examples
    --------
    >>> ratings = pd.DataFrame({
    ...     "participant_id": ["p1"] * 3 + ["p2"] * 3,
    ...     "block_id": "Q1", "scenario": "S1",
    ...     "model": ["A", "A", "Ref"] * 2,
    ...     "condition": ["base", "tuned", "human"] * 2,
    ...     "rating": [4, 2, 5, 3, 3, 3]})
    >>> win_table(ratings, baseline="base", treatment="tuned", references=["human"])[
    ...     ["model", "zs_mean", "ft_mean", "winner", "reference_points"]]
      model  zs_mean  ft_mean winner  reference_points
    0     A      3.5      2.5   base                 2
    """
    problem = _missing_columns_note(ratings, [participant, block, scenario, model, condition, rating])
    if problem:
        return _note_frame(WIN_COLUMNS, problem)
    columns = {"participant": participant, "block": block, "scenario": scenario, "model": model,
               "condition": condition, "rating": rating, "dimension_column": dimension_column}
    return each_dimension(
        lambda one: _win_table_of_dimension(ratings, baseline, treatment, references, one, **columns),
        ratings, dimension, dimension_column, WIN_COLUMNS)


def _win_table_of_dimension(ratings: pd.DataFrame, baseline: str, treatment: str, references: Sequence[str],
                            dimension: str | None, *, participant: str, block: str, scenario: str, model: str,
                            condition: str, rating: str, dimension_column: str) -> pd.DataFrame:
    data, dimension_note = _single_dimension(ratings, dimension, dimension_column)
    data = data[[participant, block, scenario, model, condition, rating]].dropna(subset=[rating])
    systems = data[data[condition].isin([baseline, treatment])]
    reference_rows = data[data[condition].isin(list(references))]
    if systems.empty:
        return _note_frame(WIN_COLUMNS, _join_notes(dimension_note, f"no {baseline} or {treatment} ratings"))

    # One grouped pass per quantity, then a loop over the few system x scenario
    # cells: filtering the 1.2 million rows once per cell dominated the time.
    pairs = systems.groupby([model, scenario], sort=True, observed=True)
    means = systems.groupby([model, scenario, condition], sort=False, observed=True)[rating].mean()
    participants_per_pair = pairs[participant].nunique()
    blocks_per_pair = pairs[block].unique()
    by_block = reference_rows.groupby(block, sort=False, observed=True)[rating]
    reference_sums, reference_counts = by_block.sum().to_dict(), by_block.count().to_dict()
    rows = []
    for (system, scenario_id), blocks in blocks_per_pair.items():
        zs_mean = means.get((system, scenario_id, baseline), np.nan)
        ft_mean = means.get((system, scenario_id, treatment), np.nan)
        count = sum(reference_counts.get(b, 0) for b in blocks)
        reference_mean = sum(reference_sums.get(b, 0.0) for b in blocks) / count if count else np.nan
        expected = [(baseline, zs_mean), (treatment, ft_mean)] + ([("the references", reference_mean)] if references else [])
        missing = [label for label, value in expected if not np.isfinite(value)]
        rows.append({
            "model": system,
            "scenario": scenario_id,
            "zs_mean": zs_mean,
            "ft_mean": ft_mean,
            "winner": _winner(zs_mean, ft_mean, baseline, treatment),
            "reference_mean": reference_mean,
            "reference_points": _reference_points(reference_mean, zs_mean, ft_mean),
            "n": int(participants_per_pair[(system, scenario_id)]),
            "note": _join_notes(dimension_note, ("no ratings for " + ", ".join(missing)) if missing else ""),
        })
    table = pd.DataFrame(rows, columns=WIN_COLUMNS)
    table["reference_points"] = table["reference_points"].astype("Int64")
    return table


WIN_SUMMARY_COLUMNS = [
    "scenario", "dimension", "n_models", "zs_wins", "ft_wins", "ties", "zs_win_share", "ft_win_share",
    "win_split", "reference_points", "reference_points_max", "reference_points_share", "note",
]


def win_summary(win: pd.DataFrame, *, baseline: str, treatment: str) -> pd.DataFrame:
    """Per scenario (x dimension): share of systems where the baseline / the treatment won, and reference points.

    Shares are fractions of the systems with a decided comparison (ties
    included in the denominator). ``reference_points_share`` is the points the
    reference earned over the maximum (2 per system). ``win_split`` is the
    paper's "ZS% / FT%" label (``zs`` = baseline, ``ft`` = treatment).

    Examples
    --------
    >>> win = pd.DataFrame({"model": list("ABCDEFGH"), "scenario": "S1",
    ...     "winner": ["base"] * 7 + ["tuned"], "reference_points": [2.0] * 8})
    >>> win_summary(win, baseline="base", treatment="tuned")[["scenario", "win_split", "reference_points_share"]]
      scenario      win_split  reference_points_share
    0       S1  87.5% / 12.5%                     1.0
    """
    problem = _missing_columns_note(win, ["scenario", "winner", "reference_points"])
    if problem:
        return _note_frame(WIN_SUMMARY_COLUMNS, problem)
    rows = []
    win = win.assign(dimension=win["dimension"].astype(object).fillna("") if "dimension" in win.columns else "")
    for (scenario_id, dimension_id), cells in win.dropna(subset=["scenario"]).groupby(
            ["scenario", "dimension"], sort=True):
        decided = cells[cells["winner"].isin([baseline, treatment, TIE])]
        n_models = len(decided)
        zs_wins = int((decided["winner"] == baseline).sum())
        ft_wins = int((decided["winner"] == treatment).sum())
        points = cells["reference_points"].dropna()
        zs_share = zs_wins / n_models if n_models else np.nan
        ft_share = ft_wins / n_models if n_models else np.nan
        rows.append({
            "scenario": scenario_id,
            "dimension": dimension_id,
            "n_models": n_models,
            "zs_wins": zs_wins,
            "ft_wins": ft_wins,
            "ties": int((decided["winner"] == TIE).sum()),
            "zs_win_share": zs_share,
            "ft_win_share": ft_share,
            "win_split": f"{zs_share:.1%} / {ft_share:.1%}" if n_models else "",
            "reference_points": int(points.sum()),
            "reference_points_max": 2 * len(points),
            "reference_points_share": points.sum() / (2.0 * len(points)) if len(points) else np.nan,
            "note": "" if n_models else "no decided comparisons",
        })
    if not rows:
        upstream = "; ".join(note for note in win.get("note", pd.Series(dtype=str)).dropna().unique() if note)
        return _note_frame(WIN_SUMMARY_COLUMNS, upstream or "empty win table")
    return pd.DataFrame(rows, columns=WIN_SUMMARY_COLUMNS)


def win_summary_of_ratings(ratings: pd.DataFrame, *, baseline: str, treatment: str, **kwargs: Any) -> pd.DataFrame:
    """``win_summary(win_table(ratings))``: the registry's analyses take the ratings frame first."""
    win = win_table(ratings, baseline=baseline, treatment=treatment, **kwargs)
    return win_summary(win, baseline=baseline, treatment=treatment)


# ---------------------------------------------------------------------------
# Descriptives
# ---------------------------------------------------------------------------

DESCRIPTIVES_COLUMNS = ["model", "condition", "scenario", "dimension", "n", "mean", "sd", "ci_low", "ci_high", "note"]


def descriptives(
    ratings: pd.DataFrame,
    *,
    model: str = "model",
    condition: str = "condition",
    scenario: str = "scenario",
    rating: str = "rating",
    dimension_column: str = "dimension",
) -> pd.DataFrame:
    """n, mean, SD and t-based 95% CI of the ratings per model x condition x scenario x dimension.

    ``dimension`` is ``""`` when the frame has no dimension column.

    Examples
    --------
    >>> ratings = pd.DataFrame({"model": "A", "condition": "base", "scenario": "S1",
    ...                         "rating": [2.0, 4, 4, 5]})
    >>> descriptives(ratings)[["n", "mean", "ci_low", "ci_high"]].round(3)
       n  mean  ci_low  ci_high
    0  4  3.75   1.748    5.752
    """
    problem = _missing_columns_note(ratings, [model, condition, scenario, rating])
    if problem:
        return _note_frame(DESCRIPTIVES_COLUMNS, problem)
    data = ratings.dropna(subset=[rating])
    data = data.assign(_dimension=data[dimension_column] if dimension_column in data.columns else "")
    # mean_ci of every group at once (one call per group took 13 s at 8,000 groups).
    values = data[rating].astype(float)
    data = data.assign(**{rating: values.where(np.isfinite(values))})
    grouped = data.groupby([model, condition, scenario, "_dimension"], sort=True)[rating]
    table = grouped.agg(["count", "mean", "std"])
    if table.empty:
        return _note_frame(DESCRIPTIVES_COLUMNS, "no ratings")
    n = table["count"].to_numpy(dtype=np.int64)
    sd = np.where(n >= 2, table["std"].to_numpy(dtype=float), np.nan)
    mean = np.where(n >= 1, table["mean"].to_numpy(dtype=float), np.nan)
    with np.errstate(invalid="ignore", divide="ignore"):
        half_width = stats.t.ppf((1 + CONFIDENCE) / 2, np.maximum(n - 1, 1)) * sd / np.sqrt(n)
    keys = table.index.to_frame(index=False)
    keys.columns = ["model", "condition", "scenario", "dimension"]
    out = keys.assign(n=n, mean=mean, sd=sd, ci_low=mean - half_width, ci_high=mean + half_width,
                      note=np.where(n >= 2, "", "n < 2: no SD or CI"))
    return out[DESCRIPTIVES_COLUMNS]


# ---------------------------------------------------------------------------
# Paired baseline vs treatment
# ---------------------------------------------------------------------------

# With fewer non-zero pairs the two-sided signed-rank test cannot reach p < 0.05 (its smallest p is 2 / 2**n).
_MIN_PAIRS_FOR_5_PERCENT = 6

WILCOXON_COLUMNS = [
    "model", "dimension", "n", "n_nonzero", "median_zs", "median_ft", "W", "p", "p_holm",
    "rank_biserial", "holm_family", "note",
]




def paired_zs_ft(
    ratings: pd.DataFrame,
    *,
    baseline: str,
    treatment: str,
    participant: str = "participant_id",
    model: str = "model",
    condition: str = "condition",
    rating: str = "rating",
    dimension_column: str = "dimension",
) -> pd.DataFrame:
    """Wilcoxon signed-rank test of the treatment vs the baseline condition, per model (x dimension).

    Each participant contributes one pair: their mean baseline and mean
    treatment rating of the model; participants missing either are left
    out. scipy's defaults apply (zero differences dropped; exact p for small
    samples without ties). ``W`` is scipy's two-sided statistic,
    min(W+, W-). ``rank_biserial`` is positive when the treatment is rated
    higher. Holm across models within each dimension. ``median_zs`` is the
    baseline's median, ``median_ft`` the treatment's.

    Examples
    --------
    >>> ratings = pd.DataFrame({"participant_id": np.repeat(list("abcdef"), 2), "model": "A",
    ...     "condition": ["base", "tuned"] * 6,
    ...     "rating": [2.0, 4, 3, 4, 2, 3, 1, 4, 3, 2, 2, 5]})
    >>> paired_zs_ft(ratings, baseline="base", treatment="tuned")[["n", "W", "rank_biserial"]].round(3)
       n    W  rank_biserial
    0  6  2.0           0.81
    """
    problem = _missing_columns_note(ratings, [participant, model, condition, rating])
    if problem:
        return _note_frame(WILCOXON_COLUMNS, problem)
    data = ratings.dropna(subset=[rating])
    data = data[data[condition].isin([baseline, treatment])]
    data = data.assign(_dimension=data[dimension_column] if dimension_column in data.columns else "")
    rows = []
    for dimension_id, dimension_rows in data.groupby("_dimension", sort=True):
        family_rows = [
            {"model": system, "dimension": dimension_id,
             **_wilcoxon_row(cells, participant, condition, rating, baseline, treatment)}
            for system, cells in dimension_rows.groupby(model, sort=True)
        ]
        for row, p_holm in zip(family_rows, holm([row["p"] for row in family_rows])):
            row["p_holm"] = p_holm
            row["holm_family"] = f"dimension={dimension_id or 'all'} (across {len(family_rows)} models)"
        rows.extend(family_rows)
    if not rows:
        return _note_frame(WILCOXON_COLUMNS, f"no {baseline} or {treatment} ratings")
    return pd.DataFrame(rows, columns=WILCOXON_COLUMNS)


def _wilcoxon_row(
    cells: pd.DataFrame, participant: str, condition: str, rating: str, baseline: str, treatment: str
) -> dict[str, Any]:
    means = cells.pivot_table(index=participant, columns=condition, values=rating, aggfunc="mean")
    if baseline not in means or treatment not in means:
        # p stays missing (and out of the Holm family) so the other models' tests still run.
        note = f"model lacks a {baseline} or {treatment} condition"
        return {"n": 0, "n_nonzero": 0, "p": np.nan, "note": note}
    pairs = means[[baseline, treatment]].dropna()
    zs, ft = pairs[baseline].to_numpy(dtype=float), pairs[treatment].to_numpy(dtype=float)
    differences = ft - zs
    row = {"n": int(zs.size), "n_nonzero": int((differences != 0).sum()),
           "median_zs": np.median(zs) if zs.size else np.nan, "median_ft": np.median(ft) if ft.size else np.nan,
           "W": np.nan, "p": np.nan, "rank_biserial": np.nan, "note": ""}
    if row["n_nonzero"] == 0:
        row["note"] = "no participant with both conditions differs" if zs.size else "no participant rated both conditions"
        return row
    statistic, pvalue = signed_rank_test(differences)
    row.update(W=statistic, p=pvalue, rank_biserial=rank_biserial(differences))
    if row["n_nonzero"] < _MIN_PAIRS_FOR_5_PERCENT:
        row["note"] = f"{row['n_nonzero']} non-zero pairs: the test cannot reach p < 0.05"
    return row


# ---------------------------------------------------------------------------
# Sensitivity
# ---------------------------------------------------------------------------


def sensitivity(
    analysis: Callable[..., pd.DataFrame],
    ratings_with_rule: pd.DataFrame,
    ratings_without_rule: pd.DataFrame,
    *args: Any,
    labels: tuple[str, str] = ("with straight-lining rule", "without straight-lining rule"),
    **kwargs: Any,
) -> pd.DataFrame:
    """Run one analysis on two retained rating frames and stack the results with a ``variant`` column.

    Extra positional/keyword arguments (e.g. the participants frame) are
    passed to both runs.

    Examples
    --------
    >>> with_rule = pd.DataFrame({"model": "A", "condition": "base", "scenario": "S1", "rating": [3.0, 4]})
    >>> without_rule = pd.DataFrame({"model": "A", "condition": "base", "scenario": "S1",
    ...                              "rating": [3.0, 4, 1]})
    >>> sensitivity(descriptives, with_rule, without_rule)[["variant", "n", "mean"]]
                            variant  n      mean
    0     with straight-lining rule  2  3.500000
    1  without straight-lining rule  3  2.666667
    """
    results = [
        analysis(frame, *args, **kwargs).assign(variant=label)
        for frame, label in zip((ratings_with_rule, ratings_without_rule), labels)
    ]
    stacked = pd.concat(results, ignore_index=True)
    return stacked[["variant", *[column for column in stacked.columns if column != "variant"]]]
