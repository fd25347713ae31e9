"""Reliability and agreement: Krippendorff's alpha, each rater against the others, raters against the judge.

``krippendorff_alpha`` (over ``alpha_from_values``) measures agreement
across raters; ``rater_loo_correlation`` correlates each rater with the mean
of the others; ``rater_judge_agreement`` compares the human ratings with the
LLM judge's gold scores.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
from scipy import special, stats

from analysis.stats.primitives import _join_notes, _missing_columns_note, _note_frame

#: What ``analysis.stats`` re-exports of this family.
__all__ = [
    "ALPHA_COLUMNS", "JUDGE_COLUMNS", "RATER_LOO_COLUMNS", "alpha_from_values", "krippendorff_alpha",
    "rater_judge_agreement", "rater_loo_correlation",
]


# ---------------------------------------------------------------------------
# Agreement
# ---------------------------------------------------------------------------

ALPHA_COLUMNS = ["scenario", "dimension", "measurement", "alpha", "n_units", "n_raters", "n_values", "note"]


def _squared_distances(categories: np.ndarray, marginals: np.ndarray, measurement: str) -> np.ndarray:
    """Krippendorff's delta^2 between every pair of observed values."""
    if measurement == "nominal":
        return (categories[:, None] != categories[None, :]).astype(float)
    if measurement == "interval":
        return (categories[:, None] - categories[None, :]) ** 2
    if measurement == "ratio":
        sums = categories[:, None] + categories[None, :]
        differences = categories[:, None] - categories[None, :]
        return np.divide(differences, sums, out=np.zeros_like(differences), where=sums != 0) ** 2
    if measurement == "ordinal":
        # delta_ck = sum_{g=c..k} n_g - (n_c + n_k) / 2, over ranks of the values.
        cumulative = np.cumsum(marginals)
        low = np.minimum.outer(np.arange(len(categories)), np.arange(len(categories)))
        high = np.maximum.outer(np.arange(len(categories)), np.arange(len(categories)))
        between = cumulative[high] - cumulative[low] + marginals[low]
        return (between - (marginals[low] + marginals[high]) / 2) ** 2
    raise ValueError(f"unknown measurement level {measurement!r}")


def alpha_from_values(units: Sequence[Any], values: Sequence[float], measurement: str = "ordinal") -> dict[str, Any]:
    """Krippendorff's alpha via the coincidence matrix; one (unit, value) pair per rating.

    Units with fewer than two values are not pairable and are ignored.

    Examples
    --------
    >>> result = alpha_from_values(["u1", "u1", "u2", "u2", "u3", "u3"], [1, 1, 2, 2, 3, 2], "nominal")
    >>> round(result["alpha"], 4)
    0.5455
    """
    unit_index, _ = pd.factorize(pd.Series(units), sort=True)
    categories, value_index = np.unique(np.asarray(values, dtype=float), return_inverse=True)
    counts = np.zeros((unit_index.max() + 1 if unit_index.size else 0, categories.size))
    np.add.at(counts, (unit_index, value_index), 1.0)
    per_unit = counts.sum(axis=1)
    counts, per_unit = counts[per_unit >= 2], per_unit[per_unit >= 2]
    result = {"alpha": np.nan, "n_units": int(counts.shape[0]), "n_values": int(per_unit.sum()), "note": ""}
    if counts.shape[0] == 0:
        result["note"] = "no unit has two or more ratings"
        return result
    weights = 1.0 / (per_unit - 1)
    # o_ck = sum_u (n_uc n_uk - [c == k] n_uc) / (m_u - 1)
    coincidences = (counts.T * weights) @ counts - np.diag((counts * weights[:, None]).sum(axis=0))
    return {**result, **_alpha_of_coincidences(coincidences, categories, measurement)}


def _alpha_of_coincidences(coincidences: np.ndarray, categories: np.ndarray, measurement: str) -> dict[str, Any]:
    """Alpha from a coincidence matrix. Categories no value of it took (zero margins) change nothing: their
    rows and columns are zero, and they add nothing to the ordinal distances between the others."""
    marginals = coincidences.sum(axis=1)
    total = marginals.sum()
    distances = _squared_distances(categories, marginals, measurement)
    expected = (np.outer(marginals, marginals) * distances).sum()
    if expected == 0:
        return {"alpha": np.nan, "note": "all pairable ratings identical: alpha undefined"}
    return {"alpha": float(1 - (total - 1) * (coincidences * distances).sum() / expected), "note": ""}


def _alpha_by_group(groups: np.ndarray, units: np.ndarray, values: np.ndarray,
                    measurement: str) -> dict[Any, dict[str, Any]]:
    """``alpha_from_values`` of every group's rows at once (a unit belongs to one group): the per-unit
    coincidences are computed once and summed per group, so 2,000 scenarios cost one pass, not 2,000
    (23 s at 2,000 prompts x 4 systems before)."""
    unit_index, _ = pd.factorize(pd.Series(units), sort=True)
    group_index, group_keys = pd.factorize(pd.Series(groups), sort=True)
    categories, value_index = np.unique(np.asarray(values, dtype=float), return_inverse=True)
    n_units = unit_index.max() + 1 if unit_index.size else 0
    counts = np.zeros((n_units, categories.size))
    np.add.at(counts, (unit_index, value_index), 1.0)
    unit_group = np.zeros(n_units, dtype=np.int64)
    unit_group[unit_index] = group_index
    per_unit = counts.sum(axis=1)
    keep = per_unit >= 2
    counts, per_unit, unit_group = counts[keep], per_unit[keep], unit_group[keep]
    weighted = counts / (per_unit - 1)[:, None]
    per_unit_coincidences = weighted[:, :, None] * counts[:, None, :]
    diagonal = np.arange(categories.size)
    per_unit_coincidences[:, diagonal, diagonal] -= weighted
    by_group = np.zeros((len(group_keys), categories.size, categories.size))
    np.add.at(by_group, unit_group, per_unit_coincidences)
    units_in = np.bincount(unit_group, minlength=len(group_keys))
    values_in = np.bincount(unit_group, weights=per_unit, minlength=len(group_keys))
    out = {}
    for g, key in enumerate(group_keys):
        result = {"alpha": np.nan, "n_units": int(units_in[g]), "n_values": int(values_in[g]), "note": ""}
        if units_in[g] == 0:
            result["note"] = "no unit has two or more ratings"
        else:
            result.update(_alpha_of_coincidences(by_group[g], categories, measurement))
        out[key] = result
    return out


def krippendorff_alpha(
    ratings: pd.DataFrame,
    level: str = "ordinal",
    *,
    participant: str = "participant_id",
    response: str = "response_id",
    scenario: str = "scenario",
    rating: str = "rating",
    dimension_column: str = "dimension",
) -> pd.DataFrame:
    """Krippendorff's alpha across raters, overall (``scenario="all"``) and per scenario, per dimension.

    Units are responses; ``level`` is the measurement level: ``ordinal``
    (default), ``interval``, ``ratio`` or ``nominal``. A rater's repeated
    rating of the same unit keeps the first.

    Examples
    --------
    >>> ratings = pd.DataFrame({"participant_id": ["a", "b"] * 3, "scenario": "S1",
    ...     "response_id": np.repeat(["r1", "r2", "r3"], 2), "rating": [1, 1, 2, 2, 3, 2]})
    >>> krippendorff_alpha(ratings, "nominal")[["scenario", "alpha", "n_units"]].round(4)
      scenario   alpha  n_units
    0      all  0.5455        3
    1       S1  0.5455        3
    """
    problem = _missing_columns_note(ratings, [participant, response, scenario, rating])
    if problem:
        return _note_frame(ALPHA_COLUMNS, problem)
    data = ratings.dropna(subset=[rating])
    data = data.assign(_dimension=data[dimension_column] if dimension_column in data.columns else "")
    before = len(data)
    data = data.drop_duplicates(subset=[participant, response, "_dimension"], keep="first")
    duplicate_note = f"{before - len(data)} repeated ratings ignored" if len(data) < before else ""
    rows = []
    for dimension_id, dimension_rows in data.groupby("_dimension", sort=True):
        units = dimension_rows[response].to_numpy()
        values = dimension_rows[rating].to_numpy(dtype=float)
        overall = alpha_from_values(units, values, level)
        per_scenario = _alpha_by_group(dimension_rows[scenario].to_numpy(), units, values, level)
        raters = dimension_rows.groupby(scenario, sort=True)[participant].nunique()
        subsets = [("all", overall, dimension_rows[participant].nunique()),
                   *((key, per_scenario[key], raters[key]) for key in raters.index)]
        for scenario_id, result, n_raters in subsets:
            rows.append({"scenario": scenario_id, "dimension": dimension_id, "measurement": level,
                         "alpha": result["alpha"], "n_units": result["n_units"],
                         "n_raters": int(n_raters), "n_values": result["n_values"],
                         "note": _join_notes(duplicate_note, result["note"])})
    if not rows:
        return _note_frame(ALPHA_COLUMNS, "no ratings")
    return pd.DataFrame(rows, columns=ALPHA_COLUMNS)


RATER_LOO_COLUMNS = ["participant_id", "n_items", "spearman_r", "p", "holm_family", "note"]
_DESCRIPTIVE_P = "none: descriptive p per rater, not a test family"


def rater_loo_correlation(
    ratings: pd.DataFrame,
    *,
    participant: str = "participant_id",
    response: str = "response_id",
    rating: str = "rating",
    dimension_column: str = "dimension",
    min_items: int = 3,
) -> pd.DataFrame:
    """Each rater's Spearman correlation with the mean of the *other* raters on the same items.

    Items are response x dimension; an item enters a rater's correlation only
    when someone else rated it too.

    Examples
    --------
    >>> ratings = pd.DataFrame({"participant_id": np.repeat(list("abc"), 3),
    ...     "response_id": ["r1", "r2", "r3"] * 3, "rating": [1.0, 2, 3, 1, 3, 2, 2, 2, 5]})
    >>> rater_loo_correlation(ratings)[["participant_id", "n_items", "spearman_r"]].round(3)
      participant_id  n_items  spearman_r
    0              a        3         1.0
    1              b        3         0.5
    2              c        3         0.5
    """
    problem = _missing_columns_note(ratings, [participant, response, rating])
    if problem:
        return _note_frame(RATER_LOO_COLUMNS, problem)
    data = ratings.dropna(subset=[rating])
    keys = [response, dimension_column] if dimension_column in data.columns else [response]
    totals = data.groupby(keys)[rating].agg(["sum", "count"])
    data = data.join(totals, on=keys)
    data = data[data["count"] >= 2]
    data = data.assign(_others=(data["sum"] - data[rating]) / (data["count"] - 1))
    if data.empty:
        return _note_frame(RATER_LOO_COLUMNS, "no item rated by two or more raters")
    per_rater = _correlations_by_group(data[participant], data[rating], data["_others"], "spearman")
    notes = np.select([per_rater["n"] < min_items, per_rater["constant"]],
                      [f"fewer than {min_items} shared items", "constant ratings: correlation undefined"], "")
    defined = notes == ""
    dof = per_rater["n"].to_numpy(dtype=float) - 2
    r = per_rater["r"].to_numpy(dtype=float)
    # The p of scipy.stats.spearmanr: a t statistic with n - 2 degrees of freedom, two-sided.
    with np.errstate(divide="ignore", invalid="ignore"):
        t = r * np.sqrt((dof / ((r + 1.0) * (1.0 - r))).clip(0))
    table = pd.DataFrame({
        "participant_id": np.asarray(per_rater.index, dtype=object), "n_items": per_rater["n"].to_numpy(),
        "spearman_r": np.where(defined, r, np.nan), "p": np.where(defined, 2 * special.stdtr(dof, -np.abs(t)), np.nan),
        "holm_family": _DESCRIPTIVE_P, "note": notes,
    })
    return table[RATER_LOO_COLUMNS]


# ---------------------------------------------------------------------------
# Agreement with the LLM judge
# ---------------------------------------------------------------------------

JUDGE_COLUMNS = ["level", "method", "r", "p", "n", "holm_family", "note"]


def rater_judge_agreement(
    ratings: pd.DataFrame,
    gold: pd.DataFrame,
    *,
    participant: str = "participant_id",
    response: str = "response_id",
    rating: str = "rating",
    gold_score: str = "gold_score",
    min_items: int = 3,
) -> pd.DataFrame:
    """Agreement between human raters and the LLM judge's gold scores.

    ``level="response"``: Spearman and Pearson between each response's mean
    human rating and its gold score (``n`` responses). ``level="rater"``: the
    mean over raters of each rater's own Spearman/Pearson with the gold
    scores of the items they rated (``n`` raters with a defined correlation;
    no p-value).

    Examples
    --------
    >>> ratings = pd.DataFrame({"participant_id": ["a"] * 4 + ["b"] * 4,
    ...     "response_id": ["r1", "r2", "r3", "r4"] * 2, "rating": [1.0, 2, 3, 4, 2, 1, 4, 3]})
    >>> gold = pd.DataFrame({"response_id": ["r1", "r2", "r3", "r4"], "gold_score": [1.0, 2, 3, 4]})
    >>> rater_judge_agreement(ratings, gold)[["level", "method", "r", "n"]].round(3)
          level    method      r  n
    0  response  spearman  0.894  4
    1  response   pearson  0.894  4
    2     rater  spearman  0.800  2
    3     rater   pearson  0.800  2
    """
    problem = _missing_columns_note(ratings, [participant, response, rating]) or _missing_columns_note(
        gold, [response, gold_score]
    )
    if problem:
        return _note_frame(JUDGE_COLUMNS, problem)
    judged = ratings.dropna(subset=[rating]).merge(
        gold[[response, gold_score]].dropna().drop_duplicates(subset=[response]), on=response
    )
    if judged.empty:
        return _note_frame(JUDGE_COLUMNS, "no rated response has a gold score")
    per_response = judged.groupby(response)[[rating, gold_score]].mean()
    rows = [
        {"level": "response", "method": method, **_correlation(per_response[rating], per_response[gold_score],
                                                               method, min_items)}
        for method in ("spearman", "pearson")
    ]
    for method in ("spearman", "pearson"):
        per_rater = _correlations_by_group(judged[participant], judged[rating], judged[gold_score], method)
        defined = per_rater["r"][(per_rater["n"] >= min_items) & ~per_rater["constant"]].dropna()
        rows.append({"level": "rater", "method": method, "r": float(np.mean(defined)) if len(defined) else np.nan,
                     "p": np.nan, "n": len(defined),
                     "note": "" if len(defined) else "no rater with a defined correlation"})
    table = pd.DataFrame(rows, columns=JUDGE_COLUMNS)
    table["holm_family"] = "none: two descriptions of one agreement, not a test family"
    return table


def _correlations_by_group(groups: pd.Series, x: pd.Series, y: pd.Series, method: str) -> pd.DataFrame:
    """Per group (index, sorted): ``n``, ``constant`` (x or y takes one value) and Pearson's or Spearman's ``r``.

    Vectorised over the groups (a scipy call per rater took seconds for
    thousands of raters): Spearman's r is Pearson's r of the average ranks
    within the group, as ``scipy.stats.spearmanr`` computes it; r is
    meaningless where ``constant``.
    """
    # The groups keep their dtype: a categorical sorts in its own order, as the callers have always listed raters.
    frame = pd.DataFrame({"group": groups.array, "x": x.to_numpy(dtype=float), "y": y.to_numpy(dtype=float)})
    grouped = frame.groupby("group", sort=True)
    spread = grouped[["x", "y"]].max() - grouped[["x", "y"]].min()
    if method == "spearman":
        frame[["x", "y"]] = grouped[["x", "y"]].rank(method="average")
    centred = frame[["x", "y"]] - frame.groupby("group", sort=True)[["x", "y"]].transform("mean")
    sums = pd.DataFrame({"xy": centred["x"] * centred["y"], "xx": centred["x"] ** 2, "yy": centred["y"] ** 2,
                         "group": frame["group"]}).groupby("group", sort=True).sum()
    with np.errstate(divide="ignore", invalid="ignore"):
        r = (sums["xy"] / np.sqrt(sums["xx"] * sums["yy"])).clip(-1.0, 1.0)
    return pd.DataFrame({"n": grouped.size(), "constant": (spread == 0).any(axis=1), "r": r})


def _correlation(x: pd.Series, y: pd.Series, method: str, min_items: int) -> dict[str, Any]:
    x, y = x.to_numpy(dtype=float), y.to_numpy(dtype=float)
    if x.size < min_items:
        return {"r": np.nan, "p": np.nan, "n": int(x.size), "note": f"fewer than {min_items} items"}
    if np.ptp(x) == 0 or np.ptp(y) == 0:
        return {"r": np.nan, "p": np.nan, "n": int(x.size), "note": "constant values: correlation undefined"}
    result = stats.spearmanr(x, y) if method == "spearman" else stats.pearsonr(x, y)
    return {"r": float(result.statistic), "p": float(result.pvalue), "n": int(x.size), "note": ""}
