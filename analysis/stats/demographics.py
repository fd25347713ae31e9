"""Subgroup comparisons: who is in which group, and Welch t-tests between the groups.

The groupings are the study's: each ``analysis.design.Subgroup`` (declared in
the definition) says which answers put a participant in group a, which in
group b, and which leave them out. ``participant_groups`` applies one;
``group_ttests`` compares the groups' ratings of each model with Welch's
t-test and a signed Cohen's d, at the participant and at the rating level.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from analysis.stats.groups import Subgroup
from analysis.stats.primitives import (
    _join_notes, _missing_columns_note, _note_frame, _single_dimension, cohen_d, holm,
)

#: What ``analysis.stats`` re-exports of this family.
__all__ = [
    "LEVELS", "TTEST_COLUMNS", "group_ttests", "participant_groups",
]

LEVELS = ("participant", "rating")


# ---------------------------------------------------------------------------
# Group comparisons (Welch t-tests)
# ---------------------------------------------------------------------------

TTEST_COLUMNS = [
    "grouping", "model", "level", "group_a", "group_b", "n_a", "n_b", "mean_a", "mean_b",
    "sd_a", "sd_b", "t", "dof", "p", "p_holm", "cohen_d", "holm_family", "note",
]


def participant_groups(
    participants: pd.DataFrame, subgroup: Subgroup, *, participant: str = "participant_id"
) -> pd.Series:
    """Group label per participant id for one subgroup comparison; left-out participants are dropped.

    Examples
    --------
    >>> from analysis.stats.groups import Group
    >>> by_gender = Subgroup("gender", "gender", Group("Woman", frozenset({"Woman"})),
    ...                      Group("Man", frozenset({"Man"})))
    >>> people = pd.DataFrame({"participant_id": ["a", "b", "c"],
    ...                        "gender": ["Woman", "Non-binary", "Man"]})
    >>> participant_groups(people, by_gender).to_dict()
    {'a': 'Woman', 'c': 'Man'}
    """
    answers = participants[subgroup.demographic]
    # One call per distinct answer, not per participant (10,000 participants, a handful of answers).
    label_of = {answer: subgroup.label_of(answer) for answer in pd.unique(answers.dropna())}
    labels = answers.map(label_of).to_numpy(dtype=object)
    result = pd.Series(labels, index=participants[participant].to_numpy(), dtype=object)
    return result.dropna()


def _welch_row(a: np.ndarray, b: np.ndarray) -> dict[str, Any]:
    row: dict[str, Any] = {
        "n_a": int(a.size), "n_b": int(b.size),
        "mean_a": a.mean() if a.size else np.nan, "mean_b": b.mean() if b.size else np.nan,
        "sd_a": a.std(ddof=1) if a.size > 1 else np.nan, "sd_b": b.std(ddof=1) if b.size > 1 else np.nan,
        "t": np.nan, "dof": np.nan, "p": np.nan, "cohen_d": np.nan, "note": "",
    }
    if a.size < 2 or b.size < 2:
        row["note"] = "fewer than 2 observations in a group"
        return row
    if row["sd_a"] == 0 and row["sd_b"] == 0:
        row["note"] = "no variance in either group"
        return row
    # equal_var=False is Welch; pingouin.ttest would silently run Student's
    # t-test when the two groups happen to be the same size.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", RuntimeWarning)
        result = stats.ttest_ind(a, b, equal_var=False)
    if caught:
        row["note"] = "scipy warned: values nearly identical, t may be unreliable"
    row.update(t=float(result.statistic), dof=float(result.df), p=float(result.pvalue), cohen_d=cohen_d(a, b))
    return row


def _participant_means(codes: np.ndarray, values: np.ndarray, n_participants: int) -> np.ndarray:
    """Mean of ``values`` per participant code; NaN for a participant without values."""
    counts = np.bincount(codes, minlength=n_participants)
    sums = np.bincount(codes, weights=values, minlength=n_participants)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)


def group_ttests(
    ratings: pd.DataFrame,
    participants: pd.DataFrame,
    *,
    subgroups: Sequence[Subgroup],
    levels: Sequence[str] = LEVELS,
    dimension: str | None = None,
    participant: str = "participant_id",
    model: str = "model",
    rating: str = "rating",
    dimension_column: str = "dimension",
) -> pd.DataFrame:
    """Welch t-tests of each subgroup comparison (``grouping`` = its key), per model, at two levels.

    ``level="participant"`` compares each participant's mean rating of the
    model (all of that model's responses, whatever their condition; a
    reference system is tested as a model of its own). ``level="rating"``
    treats every rating as independent, as the TIDE paper did; that overstates
    significance and is exported for comparison only. Holm runs within
    grouping x level (across models). ``cohen_d`` uses the pooled SD and is
    signed ``mean_a - mean_b``.

    Examples
    --------
    >>> ratings = pd.DataFrame({"participant_id": list("abcdef"), "model": "M",
    ...                         "rating": [4.0, 5, 4, 2, 3, 2]})
    >>> from analysis.stats.groups import Group
    >>> by_gender = Subgroup("gender", "gender", Group("Woman", frozenset({"Woman"})),
    ...                      Group("Man", frozenset({"Man"})))
    >>> people = pd.DataFrame({"participant_id": list("abcdef"),
    ...                        "gender": ["Woman"] * 3 + ["Man"] * 3})
    >>> out = group_ttests(ratings, people, subgroups=[by_gender], levels=["participant"])
    >>> out[["group_a", "group_b", "n_a", "n_b", "dof", "cohen_d"]].round(2)
      group_a group_b  n_a  n_b  dof  cohen_d
    0   Woman     Man    3    3  4.0     3.46
    """
    problem = _missing_columns_note(ratings, [participant, model, rating]) or _missing_columns_note(
        participants, [participant]
    )
    if problem:
        return _note_frame(TTEST_COLUMNS, problem)
    data, dimension_note = _single_dimension(ratings, dimension, dimension_column)
    data = data[[participant, model, rating]].dropna(subset=[rating, participant, model])
    # Integer codes and bincount instead of string comparisons and groupby per
    # model x group x level: on 1.2 million ratings this was most of the time.
    participant_codes, participant_ids = pd.factorize(data[participant])
    model_codes, model_names = pd.factorize(data[model], sort=True)
    values = data[rating].to_numpy(dtype=float)
    models = list(model_names)
    rows_of_model = [np.flatnonzero(model_codes == code) for code in range(len(models))]
    rows = []
    for subgroup in subgroups:
        grouping, group_a, group_b = subgroup.key, subgroup.group_a.label, subgroup.group_b.label
        if subgroup.demographic not in participants.columns:
            rows.append({"grouping": grouping, "group_a": group_a, "group_b": group_b,
                         "note": f"missing column: {subgroup.demographic}"})
            continue
        labels = participant_groups(participants, subgroup, participant=participant)
        # 0: group a, 1: group b, -1: left out of this grouping.
        side = pd.Series(np.where(labels.to_numpy() == group_a, 0, 1), index=labels.index)
        person_side = side.reindex(pd.Index(participant_ids)).fillna(-1).to_numpy(dtype=np.int64)
        rating_side = person_side[participant_codes]
        for level in levels:
            family = f"{grouping} x {level} (across {len(models)} models)"
            family_rows = []
            for system, at in zip(models, rows_of_model):
                if level == "participant":
                    means = _participant_means(participant_codes[at], values[at], len(participant_ids))
                    a = means[(person_side == 0) & ~np.isnan(means)]
                    b = means[(person_side == 1) & ~np.isnan(means)]
                else:
                    a = values[at][rating_side[at] == 0]
                    b = values[at][rating_side[at] == 1]
                row = _welch_row(a, b)
                row.update(grouping=grouping, model=system, level=level, group_a=group_a,
                           group_b=group_b, holm_family=family,
                           note=_join_notes(dimension_note, row["note"]))
                family_rows.append(row)
            adjusted = holm([row["p"] for row in family_rows])
            for row, p_holm in zip(family_rows, adjusted):
                row["p_holm"] = p_holm
            rows.extend(family_rows)
    if not rows:
        return _note_frame(TTEST_COLUMNS, _join_notes(dimension_note, "no models or groupings"))
    return pd.DataFrame(rows, columns=TTEST_COLUMNS)
