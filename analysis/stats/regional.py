"""Regional analyses: do ratings differ across US Census regions, per scenario?

One-way ANOVA (``regional_anova``), Welch's ANOVA and its Games-Howell
follow-ups (``regional_welch``, ``regional_games_howell``), the rank-based
Kruskal-Wallis check (``regional_kruskal``) and the per-region means with
intervals behind the regional map (``region_means``). Each runs per scenario
at the participant level and at the rating level.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from analysis.stats.primitives import (
    ALPHA, _first_present, _is_missing_answer, _join_notes, _missing_columns_note, _note_frame, _quietly,
    _single_dimension, eta_squared, holm, mean_ci,
)

#: What ``analysis.stats`` re-exports of this family.
__all__ = [
    "ANOVA_COLUMNS", "GAMES_HOWELL_COLUMNS", "KRUSKAL_COLUMNS", "REGION_MEANS_COLUMNS", "WELCH_COLUMNS",
    "region_means", "regional_anova", "regional_games_howell", "regional_kruskal", "regional_welch",
]


# ---------------------------------------------------------------------------
# Regional analyses
# ---------------------------------------------------------------------------

ANOVA_COLUMNS = [
    "scenario", "factor", "level", "F", "df_between", "df_within", "p", "eta_squared",
    "n", "n_groups", "p_holm", "holm_family", "note",
]
WELCH_COLUMNS = [
    "scenario", "factor", "level", "F", "df_between", "df_within", "p", "partial_eta_squared",
    "n", "n_groups", "p_holm", "holm_family", "note",
]
GAMES_HOWELL_COLUMNS = [
    "scenario", "factor", "level", "region_a", "region_b", "n_a", "n_b", "mean_a", "mean_b",
    "diff", "se", "t", "df", "p", "hedges_g", "holm_family", "note",
]
KRUSKAL_COLUMNS = [
    "scenario", "factor", "level", "H", "df", "p", "epsilon_squared", "n", "n_groups",
    "p_holm", "holm_family", "note",
]
REGION_MEANS_COLUMNS = [
    "scenario", "region", "level", "n", "mean", "sd", "ci_low", "ci_high", "is_top",
    "top_significant", "anova_p_holm", "note",
]


def _regional_units(
    ratings: pd.DataFrame,
    participants: pd.DataFrame,
    *,
    dimension: str | None,
    participant: str,
    scenario: str,
    rating: str,
    region: str,
    dimension_column: str,
) -> tuple[dict[tuple[str, str], pd.DataFrame], str]:
    """(scenario, level) -> frame of ``region, value``; blank regions are left out."""
    data, dimension_note = _single_dimension(ratings, dimension, dimension_column)
    regions = participants.set_index(participant)[region]
    regions = regions[~regions.map(_is_missing_answer)]
    data = data[[participant, scenario, rating]].dropna(subset=[rating])
    data = data.assign(_region=data[participant].map(regions))
    data = data.dropna(subset=["_region"])
    units = {}
    for scenario_id, cells in data.groupby(scenario, sort=True):
        per_participant = cells.groupby([participant, "_region"], as_index=False, sort=True)[rating].mean()
        units[(scenario_id, "participant")] = per_participant.rename(columns={"_region": "region", rating: "value"})
        units[(scenario_id, "rating")] = cells[["_region", rating]].rename(
            columns={"_region": "region", rating: "value"}
        )
    return units, dimension_note


def _groups(units: pd.DataFrame) -> dict[str, np.ndarray]:
    return {name: frame["value"].to_numpy(dtype=float) for name, frame in units.groupby("region", sort=True)}



def _anova_row(groups: dict[str, np.ndarray]) -> dict[str, Any]:
    arrays = [group for group in groups.values() if group.size]
    n, k = sum(group.size for group in arrays), len(arrays)
    row = {"F": np.nan, "df_between": k - 1, "df_within": n - k, "p": np.nan,
           "eta_squared": np.nan, "n": n, "n_groups": k, "note": ""}
    if k < 2:
        row["note"] = "fewer than 2 regions"
    elif n - k < 1:
        row["note"] = "no within-region degrees of freedom"
    elif all(np.ptp(group) == 0 for group in arrays):
        row["note"] = "no variance within regions"
    else:
        result = stats.f_oneway(*arrays)
        row.update(F=float(result.statistic), p=float(result.pvalue), eta_squared=eta_squared(arrays))
    return row


def _add_holm_by_level(frame: pd.DataFrame, family: str) -> pd.DataFrame:
    frame = frame.copy()
    frame["p_holm"] = np.nan
    frame["holm_family"] = ""
    for level, index in frame.groupby("level", sort=False).groups.items():
        frame.loc[index, "p_holm"] = holm(frame.loc[index, "p"].to_numpy(dtype=float))
        frame.loc[index, "holm_family"] = f"level={level} ({family})"
    return frame


def _regional_table(
    ratings: pd.DataFrame,
    participants: pd.DataFrame,
    columns: Sequence[str],
    test: Callable[[dict[str, np.ndarray]], dict[str, Any]],
    family: str,
    **options: Any,
) -> pd.DataFrame:
    """Run ``test`` on the regional groups of every scenario x level."""
    problem = _missing_columns_note(
        ratings, [options["participant"], options["scenario"], options["rating"]]
    ) or _missing_columns_note(participants, [options["participant"], options["region"]])
    if problem:
        return _note_frame(columns, problem)
    units, dimension_note = _regional_units(ratings, participants, **options)
    if not units:
        return _note_frame(columns, _join_notes(dimension_note, "no ratings from participants with a region"))
    rows = []
    for (scenario_id, level), frame in units.items():
        row = test(_groups(frame))
        row.update(scenario=scenario_id, factor="region", level=level,
                   note=_join_notes(dimension_note, row["note"]))
        rows.append(row)
    table = pd.DataFrame(rows).reindex(columns=columns)
    table = _add_holm_by_level(table, family)
    return table.sort_values(["level", "scenario"], kind="stable").reset_index(drop=True)[list(columns)]


def regional_anova(
    ratings: pd.DataFrame,
    participants: pd.DataFrame,
    *,
    dimension: str | None = None,
    participant: str = "participant_id",
    scenario: str = "scenario",
    rating: str = "rating",
    region: str = "region",
    dimension_column: str = "dimension",
) -> pd.DataFrame:
    """One-way ANOVA of ratings across US Census regions, per scenario and level.

    All responses of the scenario (every system, condition and the reference)
    enter. ``level="participant"``: one value per participant, their mean
    rating in the scenario; ``level="rating"``: every rating as independent
    (as in the paper). Participants without a region are left out.
    ``eta_squared`` = SS_between / SS_total. Holm runs across scenarios within
    each level.

    Examples
    --------
    >>> ratings = pd.DataFrame({"participant_id": list("abcdef"), "scenario": "S1",
    ...                         "rating": [1.0, 2, 3, 4, 5, 6]})
    >>> people = pd.DataFrame({"participant_id": list("abcdef"),
    ...                        "region": ["West"] * 3 + ["South"] * 3})
    >>> regional_anova(ratings, people)[["level", "F", "df_between", "df_within", "eta_squared"]].round(4)
             level     F  df_between  df_within  eta_squared
    0  participant  13.5           1          4       0.7714
    1       rating  13.5           1          4       0.7714
    """
    options = dict(dimension=dimension, participant=participant, scenario=scenario,
                                rating=rating, region=region, dimension_column=dimension_column)
    return _regional_table(ratings, participants, ANOVA_COLUMNS, _anova_row, "across scenarios", **options)


def _welch_anova_row(groups: dict[str, np.ndarray]) -> dict[str, Any]:
    usable = {name: values for name, values in groups.items() if values.size >= 2 and np.ptp(values) > 0}
    dropped = sorted(set(groups) - set(usable))
    n = sum(values.size for values in usable.values())
    row = {"F": np.nan, "df_between": np.nan, "df_within": np.nan, "p": np.nan,
           "partial_eta_squared": np.nan, "n": n, "n_groups": len(usable),
           "note": ("left out regions with n < 2 or no variance: " + ", ".join(dropped)) if dropped else ""}
    if len(usable) < 2:
        row["note"] = _join_notes(row["note"], "fewer than 2 usable regions")
        return row
    import pingouin  # lazily: slow to import, and only the regional follow-ups need it

    long = _groups_to_long(usable)
    result = _quietly(pingouin.welch_anova, data=long, dv="value", between="region").iloc[0]
    row.update(F=float(result["F"]), df_between=float(result["ddof1"]), df_within=float(result["ddof2"]),
               p=float(_first_present(result.to_frame().T, ["p_unc", "p-unc"]).iloc[0]),
               partial_eta_squared=float(result["np2"]))
    return row


def _groups_to_long(groups: dict[str, np.ndarray]) -> pd.DataFrame:
    return pd.DataFrame({
        "region": np.concatenate([[name] * values.size for name, values in groups.items()]),
        "value": np.concatenate(list(groups.values())),
    })


def regional_welch(
    ratings: pd.DataFrame,
    participants: pd.DataFrame,
    *,
    dimension: str | None = None,
    participant: str = "participant_id",
    scenario: str = "scenario",
    rating: str = "rating",
    region: str = "region",
    dimension_column: str = "dimension",
) -> pd.DataFrame:
    """Welch's ANOVA (pingouin) across regions per scenario x level; unequal variances allowed.

    Regions with fewer than 2 values or no variance are left out (Welch's
    weights are undefined for them) and named in ``note``.

    Examples
    --------
    >>> ratings = pd.DataFrame({"participant_id": list("abcdef"), "scenario": "S1",
    ...                         "rating": [1.0, 2, 4, 4, 5, 7]})
    >>> people = pd.DataFrame({"participant_id": list("abcdef"),
    ...                        "region": ["West"] * 3 + ["South"] * 3})
    >>> regional_welch(ratings, people)[["level", "F", "df_between"]].round(3)
             level      F  df_between
    0  participant  5.786         1.0
    1       rating  5.786         1.0
    """
    options = dict(dimension=dimension, participant=participant, scenario=scenario,
                                rating=rating, region=region, dimension_column=dimension_column)
    return _regional_table(ratings, participants, WELCH_COLUMNS, _welch_anova_row, "across scenarios", **options)


def regional_games_howell(
    ratings: pd.DataFrame,
    participants: pd.DataFrame,
    *,
    dimension: str | None = None,
    participant: str = "participant_id",
    scenario: str = "scenario",
    rating: str = "rating",
    region: str = "region",
    dimension_column: str = "dimension",
) -> pd.DataFrame:
    """Games-Howell pairwise follow-ups (pingouin) of the regional Welch ANOVA.

    One row per scenario x level x pair of regions. ``p`` is already adjusted
    for all pairs of that scenario x level by the studentized range, so no
    Holm step is added. ``diff = mean_a - mean_b``.

    Examples
    --------
    >>> ratings = pd.DataFrame({"participant_id": list("abcdef"), "scenario": "S1",
    ...                         "rating": [1.0, 2, 4, 4, 5, 7]})
    >>> people = pd.DataFrame({"participant_id": list("abcdef"),
    ...                        "region": ["South"] * 3 + ["West"] * 3})
    >>> regional_games_howell(ratings, people)[["level", "region_a", "region_b", "diff"]].round(3)
             level region_a region_b  diff
    0  participant    South     West  -3.0
    1       rating    South     West  -3.0
    """
    problem = _missing_columns_note(ratings, [participant, scenario, rating]) or _missing_columns_note(
        participants, [participant, region]
    )
    if problem:
        return _note_frame(GAMES_HOWELL_COLUMNS, problem)
    import pingouin

    from analysis.stats.studentized_range import use_in_pingouin

    use_in_pingouin()  # the same p-values, sooner
    units, dimension_note = _regional_units(ratings, participants, dimension=dimension, participant=participant,
                                            scenario=scenario, rating=rating, region=region,
                                            dimension_column=dimension_column)
    family = "none: Games-Howell p is adjusted over the region pairs of each scenario x level"
    rows = []
    for (scenario_id, level), frame in sorted(units.items(), key=lambda item: (item[0][1], item[0][0])):
        all_groups = _groups(frame)
        # Like Welch's ANOVA, Games-Howell needs a variance in every group.
        groups = {name: values for name, values in all_groups.items() if values.size >= 2 and np.ptp(values) > 0}
        dropped = sorted(set(all_groups) - set(groups))
        dropped_note = ("left out regions with n < 2 or no variance: " + ", ".join(dropped)) if dropped else ""
        base = {"scenario": scenario_id, "factor": "region", "level": level, "holm_family": family}
        if len(groups) < 2:
            rows.append({**base, "note": _join_notes(dimension_note, dropped_note, "fewer than 2 usable regions")})
            continue
        pairs = _quietly(pingouin.pairwise_gameshowell, data=_groups_to_long(groups), dv="value", between="region")
        for _, pair in pairs.iterrows():
            rows.append({
                **base,
                "region_a": pair["A"], "region_b": pair["B"],
                "n_a": groups[pair["A"]].size, "n_b": groups[pair["B"]].size,
                "mean_a": pair["mean_A"], "mean_b": pair["mean_B"], "diff": pair["diff"], "se": pair["se"],
                "t": pair["T"], "df": pair["df"],
                "p": _first_present(pair.to_frame().T, ["pval", "p_tukey", "p-tukey"]).iloc[0],
                "hedges_g": pair.get("hedges", np.nan),
                "note": _join_notes(dimension_note, dropped_note),
            })
    if not rows:
        return _note_frame(GAMES_HOWELL_COLUMNS, _join_notes(dimension_note, "no ratings from participants with a region"))
    return pd.DataFrame(rows, columns=GAMES_HOWELL_COLUMNS)


def _kruskal_row(groups: dict[str, np.ndarray]) -> dict[str, Any]:
    arrays = [values for values in groups.values() if values.size]
    n, k = sum(values.size for values in arrays), len(arrays)
    row = {"H": np.nan, "df": k - 1, "p": np.nan, "epsilon_squared": np.nan, "n": n, "n_groups": k, "note": ""}
    if k < 2:
        row["note"] = "fewer than 2 regions"
    elif np.ptp(np.concatenate(arrays)) == 0:
        row["note"] = "all values identical"
    else:
        result = stats.kruskal(*arrays)
        # epsilon^2 = H / (n - 1) (Tomczak & Tomczak 2014).
        row.update(H=float(result.statistic), p=float(result.pvalue), epsilon_squared=float(result.statistic) / (n - 1))
    return row


def regional_kruskal(
    ratings: pd.DataFrame,
    participants: pd.DataFrame,
    *,
    dimension: str | None = None,
    participant: str = "participant_id",
    scenario: str = "scenario",
    rating: str = "rating",
    region: str = "region",
    dimension_column: str = "dimension",
) -> pd.DataFrame:
    """Kruskal-Wallis H across regions per scenario x level (rank-based check of the ANOVA).

    ``epsilon_squared = H / (n - 1)``. Holm across scenarios within level.

    Examples
    --------
    >>> ratings = pd.DataFrame({"participant_id": list("abcdef"), "scenario": "S1",
    ...                         "rating": [1.0, 2, 3, 4, 5, 6]})
    >>> people = pd.DataFrame({"participant_id": list("abcdef"),
    ...                        "region": ["West"] * 3 + ["South"] * 3})
    >>> regional_kruskal(ratings, people)[["level", "H", "df"]].round(3)
             level      H  df
    0  participant  3.857   1
    1       rating  3.857   1
    """
    options = dict(dimension=dimension, participant=participant, scenario=scenario,
                                rating=rating, region=region, dimension_column=dimension_column)
    return _regional_table(ratings, participants, KRUSKAL_COLUMNS, _kruskal_row, "across scenarios", **options)


def region_means(
    ratings: pd.DataFrame,
    participants: pd.DataFrame,
    *,
    alpha: float = ALPHA,
    dimension: str | None = None,
    participant: str = "participant_id",
    scenario: str = "scenario",
    rating: str = "rating",
    region: str = "region",
    dimension_column: str = "dimension",
) -> pd.DataFrame:
    """Mean, SD, n and t-based 95% CI per scenario x region x level, for the regional map.

    ``is_top`` marks the region with the highest mean. ``top_significant`` is
    True only on the top row and only when both hold: the scenario's ANOVA
    (same level) has Holm-adjusted p < ``alpha``, and the top region's 95% CI
    lies wholly above the second region's (``ci_low`` of the top > ``ci_high``
    of the runner-up). Otherwise the map's star is drawn as "not significant":
    the lead is within the noise.

    Examples
    --------
    >>> ratings = pd.DataFrame({"participant_id": list("abcdef"), "scenario": "S1",
    ...                         "rating": [1.0, 2, 3, 4, 5, 6]})
    >>> people = pd.DataFrame({"participant_id": list("abcdef"),
    ...                        "region": ["West"] * 3 + ["South"] * 3})
    >>> region_means(ratings, people).query("level == 'participant'")[["region", "mean", "is_top", "top_significant"]]
      region  mean  is_top  top_significant
    0  South   5.0    True            False
    1   West   2.0   False            False
    """
    options = dict(dimension=dimension, participant=participant, scenario=scenario,
                                rating=rating, region=region, dimension_column=dimension_column)
    problem = _missing_columns_note(ratings, [participant, scenario, rating]) or _missing_columns_note(
        participants, [participant, region]
    )
    if problem:
        return _note_frame(REGION_MEANS_COLUMNS, problem)
    units, dimension_note = _regional_units(ratings, participants, **options)
    anova = regional_anova(ratings, participants, **options).set_index(["scenario", "level"])["p_holm"]
    rows = []
    for (scenario_id, level), frame in sorted(units.items(), key=lambda item: (item[0][1], item[0][0])):
        cells = [{"scenario": scenario_id, "region": name, "level": level, **mean_ci(values)}
                 for name, values in _groups(frame).items()]
        cells.sort(key=lambda cell: -cell["mean"])
        anova_p = anova.get((scenario_id, level), np.nan)
        for rank, cell in enumerate(cells):
            cell.update(is_top=rank == 0, top_significant=False, anova_p_holm=anova_p, note=dimension_note)
        if len(cells) >= 2:
            top, second = cells[0], cells[1]
            cells[0]["top_significant"] = bool(anova_p < alpha and top["ci_low"] > second["ci_high"])
        else:
            cells[0]["note"] = _join_notes(dimension_note, "only one region")
        rows.extend(cells)
    if not rows:
        return _note_frame(REGION_MEANS_COLUMNS, _join_notes(dimension_note, "no ratings from participants with a region"))
    return pd.DataFrame(rows, columns=REGION_MEANS_COLUMNS)
