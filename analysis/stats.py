"""Statistics for human-evaluation studies: tidy frames in, tidy frames out.

Every public function takes the retained ``ratings`` frame (one row per
rating; see ``docs/statistics.md``) and, where needed, the ``participants``
frame or a ``gold`` frame, and returns a *new* tidy DataFrame: one labelled row
per test or per cell. Nothing here does I/O, touches Django, or mutates its
inputs.

Conventions shared by all tables:

* a ``note`` column is always present; it is ``""`` when the analysis ran and
  otherwise says why a value is missing (too few participants, constant
  column, empty frame, subsampling ...). Analyses never raise on bad data:
  they return a row whose ``note`` explains the problem.
* tables with several p-values carry ``p_holm`` (the values of statsmodels
  ``multipletests`` with ``method="holm"``, *not* its Holm-Sidak default) and a ``holm_family``
  column naming the family the correction ran over.
* tables carry ``n`` (or ``n_a``/``n_b``) so the reader can see what each
  number rests on.
"""

from __future__ import annotations

import functools
import re
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

ZERO_SHOT = "zero-shot"
FINE_TUNED = "fine-tuned"
REFERENCE = "reference"
ALPHA = 0.05
CONFIDENCE = 0.95

#: Answers that leave a participant out of a demographic grouping.
MISSING_ANSWERS = frozenset({"", "nan", "none", "other/unknown", "prefer not to answer"})

#: grouping -> (group_a label, group_b label); see :func:`participant_groups`.
GROUPINGS: dict[str, tuple[str, str]] = {
    "age": ("60+", "under 60"),
    "education": ("Graduate or professional degree", "other"),
    "gender": ("Woman", "Man"),
    "race": ("White or Caucasian", "other"),
}
LEVELS = ("participant", "rating")

# Two means closer than this are a tie: ratings are small integers, so any
# real difference between means is far larger than float rounding.
_TIE_TOLERANCE = 1e-9


# ---------------------------------------------------------------------------
# Shared helpers
# ---------------------------------------------------------------------------


def _note_frame(columns: Sequence[str], note: str, **values: Any) -> pd.DataFrame:
    """One row with every column missing except ``values`` and ``note``."""
    row: dict[str, Any] = {column: np.nan for column in columns}
    row.update(values)
    row["note"] = note
    return pd.DataFrame([row], columns=list(columns))


def _never_raises(columns: Sequence[str]) -> Callable:
    """Turn an unexpected exception into a one-row table that says why.

    Known problems (empty frame, small groups, constant data) are handled
    inside each function with a precise note; this is the last line of
    defence so a Celery task never dies on odd data.
    """

    def decorate(function: Callable[..., pd.DataFrame]) -> Callable[..., pd.DataFrame]:
        @functools.wraps(function)
        def wrapper(*args: Any, **kwargs: Any) -> pd.DataFrame:
            try:
                return function(*args, **kwargs)
            except Exception as error:  # noqa: BLE001 - reported in the table
                return _note_frame(columns, f"could not run: {type(error).__name__}: {error}")

        return wrapper

    return decorate


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


# ---------------------------------------------------------------------------
# 1. Win table
# ---------------------------------------------------------------------------

WIN_COLUMNS = [
    "model", "scenario", "zs_mean", "ft_mean", "winner", "reference_mean",
    "reference_points", "n", "note",
]


def _winner(zs_mean: float, ft_mean: float) -> str:
    if not (np.isfinite(zs_mean) and np.isfinite(ft_mean)):
        return ""
    if abs(zs_mean - ft_mean) <= _TIE_TOLERANCE:
        return "tie"
    return ZERO_SHOT if zs_mean > ft_mean else FINE_TUNED


def _reference_points(reference_mean: float, zs_mean: float, ft_mean: float) -> float:
    means = (reference_mean, zs_mean, ft_mean)
    if not all(np.isfinite(mean) for mean in means):
        return np.nan
    # A tie with the reference earns the reference nothing.
    return float(sum(reference_mean > mean + _TIE_TOLERANCE for mean in (zs_mean, ft_mean)))


@_never_raises(WIN_COLUMNS)
def win_table(
    ratings: pd.DataFrame,
    *,
    dimension: str | None = None,
    participant: str = "participant_id",
    block: str = "block_id",
    scenario: str = "scenario",
    model: str = "model",
    condition: str = "condition",
    rating: str = "rating",
    dimension_column: str = "dimension",
) -> pd.DataFrame:
    """Zero-shot vs fine-tuned winner and reference points per system x scenario.

    ``reference_mean`` is the mean rating of the reference response(s) shown in
    the same block(s) as the system's responses; the reference earns 2 points
    when its mean beats both the zero-shot and the fine-tuned mean, 1 when it
    beats one of them (ties earn nothing). ``n`` is the number of participants
    who rated the system in that scenario.

    Returns columns ``model, scenario, zs_mean, ft_mean, winner,
    reference_mean, reference_points, n, note``.

    Examples
    --------
    >>> ratings = pd.DataFrame({
    ...     "participant_id": ["p1"] * 3 + ["p2"] * 3,
    ...     "block_id": "Q1", "scenario": "S1",
    ...     "model": ["A", "A", "Ref"] * 2,
    ...     "condition": ["zero-shot", "fine-tuned", "reference"] * 2,
    ...     "rating": [4, 2, 5, 3, 3, 3]})
    >>> win_table(ratings)[["model", "zs_mean", "ft_mean", "winner", "reference_points"]]
      model  zs_mean  ft_mean     winner  reference_points
    0     A      3.5      2.5  zero-shot                 2
    """
    problem = _missing_columns_note(ratings, [participant, block, scenario, model, condition, rating])
    if problem:
        return _note_frame(WIN_COLUMNS, problem)
    data, dimension_note = _single_dimension(ratings, dimension, dimension_column)
    data = data[[participant, block, scenario, model, condition, rating]].dropna(subset=[rating])
    systems = data[data[condition] != REFERENCE]
    references = data[data[condition] == REFERENCE]
    if systems.empty:
        return _note_frame(WIN_COLUMNS, _join_notes(dimension_note, "no non-reference ratings"))

    # One grouped pass per quantity, then a loop over the few system x scenario
    # cells: filtering the 1.2 million rows once per cell dominated the time.
    pairs = systems.groupby([model, scenario], sort=True, observed=True)
    means = systems.groupby([model, scenario, condition], sort=False, observed=True)[rating].mean()
    participants_per_pair = pairs[participant].nunique()
    blocks_per_pair = pairs[block].unique()
    by_block = references.groupby(block, sort=False, observed=True)[rating]
    reference_sums, reference_counts = by_block.sum().to_dict(), by_block.count().to_dict()
    rows = []
    for (system, scenario_id), blocks in blocks_per_pair.items():
        zs_mean = means.get((system, scenario_id, ZERO_SHOT), np.nan)
        ft_mean = means.get((system, scenario_id, FINE_TUNED), np.nan)
        count = sum(reference_counts.get(b, 0) for b in blocks)
        reference_mean = sum(reference_sums.get(b, 0.0) for b in blocks) / count if count else np.nan
        missing = [
            label
            for label, value in (("zero-shot", zs_mean), ("fine-tuned", ft_mean), ("reference", reference_mean))
            if not np.isfinite(value)
        ]
        rows.append({
            "model": system,
            "scenario": scenario_id,
            "zs_mean": zs_mean,
            "ft_mean": ft_mean,
            "winner": _winner(zs_mean, ft_mean),
            "reference_mean": reference_mean,
            "reference_points": _reference_points(reference_mean, zs_mean, ft_mean),
            "n": int(participants_per_pair[(system, scenario_id)]),
            "note": _join_notes(dimension_note, ("no ratings for " + ", ".join(missing)) if missing else ""),
        })
    table = pd.DataFrame(rows, columns=WIN_COLUMNS)
    table["reference_points"] = table["reference_points"].astype("Int64")
    return table


WIN_SUMMARY_COLUMNS = [
    "scenario", "n_models", "zs_wins", "ft_wins", "ties", "zs_win_share", "ft_win_share",
    "win_split", "reference_points", "reference_points_max", "reference_points_share", "note",
]


@_never_raises(WIN_SUMMARY_COLUMNS)
def win_summary(win: pd.DataFrame) -> pd.DataFrame:
    """Per scenario: share of systems where zero-shot / fine-tuned won, and reference points.

    Shares are fractions of the systems with a decided comparison (ties
    included in the denominator). ``reference_points_share`` is the points the
    reference earned over the maximum (2 per system). ``win_split`` is the
    paper's "ZS% / FT%" label.

    Examples
    --------
    >>> win = pd.DataFrame({"model": list("ABCDEFGH"), "scenario": "S1",
    ...     "winner": ["zero-shot"] * 7 + ["fine-tuned"], "reference_points": [2.0] * 8})
    >>> win_summary(win)[["scenario", "win_split", "reference_points_share"]]
      scenario      win_split  reference_points_share
    0       S1  87.5% / 12.5%                     1.0
    """
    problem = _missing_columns_note(win, ["scenario", "winner", "reference_points"])
    if problem:
        return _note_frame(WIN_SUMMARY_COLUMNS, problem)
    rows = []
    for scenario_id, cells in win.dropna(subset=["scenario"]).groupby("scenario", sort=True):
        decided = cells[cells["winner"].isin([ZERO_SHOT, FINE_TUNED, "tie"])]
        n_models = len(decided)
        zs_wins = int((decided["winner"] == ZERO_SHOT).sum())
        ft_wins = int((decided["winner"] == FINE_TUNED).sum())
        points = cells["reference_points"].dropna()
        zs_share = zs_wins / n_models if n_models else np.nan
        ft_share = ft_wins / n_models if n_models else np.nan
        rows.append({
            "scenario": scenario_id,
            "n_models": n_models,
            "zs_wins": zs_wins,
            "ft_wins": ft_wins,
            "ties": int((decided["winner"] == "tie").sum()),
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


def _win_summary_from_ratings(ratings: pd.DataFrame, **kwargs: Any) -> pd.DataFrame:
    """``win_summary(win_table(ratings))`` so every ANALYSES entry takes ratings first."""
    return win_summary(win_table(ratings, **kwargs))


# ---------------------------------------------------------------------------
# 2. Group comparisons (Welch t-tests)
# ---------------------------------------------------------------------------

TTEST_COLUMNS = [
    "grouping", "model", "level", "group_a", "group_b", "n_a", "n_b", "mean_a", "mean_b",
    "sd_a", "sd_b", "t", "dof", "p", "p_holm", "cohen_d", "holm_family", "note",
]


def _is_missing_answer(answer: Any) -> bool:
    if answer is None or (np.ndim(answer) == 0 and pd.isna(answer)):
        return True
    return str(answer).strip().lower() in MISSING_ANSWERS


def age_group(answer: Any) -> str | None:
    """``"60+"``, ``"under 60"`` or ``None`` (not answered, or a band straddling 60).

    Examples
    --------
    >>> [age_group(a) for a in ["63", "59", "60-69", "18-29", "70+", "55-64", "Prefer not to answer", ""]]
    ['60+', 'under 60', '60+', 'under 60', '60+', None, None, None]
    """
    if _is_missing_answer(answer):
        return None
    text = str(answer).strip()
    if re.fullmatch(r"\d+", text):
        return "60+" if int(text) >= 60 else "under 60"
    open_band = re.fullmatch(r"(\d+)\s*\+", text)
    if open_band:
        return "60+" if int(open_band.group(1)) >= 60 else None
    band = re.fullmatch(r"(\d+)\s*[-\u2013]\s*(\d+)", text)
    if band:
        low, high = int(band.group(1)), int(band.group(2))
        if low >= 60:
            return "60+"
        if high < 60:
            return "under 60"
    return None


def _group_label(grouping: str, answer: Any) -> str | None:
    """The group of one demographic answer, or None when it leaves the grouping."""
    if _is_missing_answer(answer):
        return None
    if grouping == "age":
        return age_group(answer)
    group_a, group_b = GROUPINGS[grouping]
    text = str(answer).strip()
    if text == group_a:
        return group_a
    if grouping == "gender":
        # Woman vs Man: other genders are not "the other group".
        return group_b if text == group_b else None
    return group_b


def participant_groups(
    participants: pd.DataFrame, grouping: str, *, participant: str = "participant_id"
) -> pd.Series:
    """Group label per participant id for one grouping; left-out participants are dropped.

    ``age``: 60+ vs under 60 (integers or age bands; a band straddling 60 is
    left out). ``education``: "Graduate or professional degree" vs any other
    answer. ``gender``: Woman vs Man (other genders are left out of this
    grouping). ``race``: "White or Caucasian" vs any other answer. Blank,
    "Other/Unknown" and "Prefer not to answer" leave the participant out of
    that grouping only.

    Examples
    --------
    >>> people = pd.DataFrame({"participant_id": ["a", "b", "c"],
    ...                        "gender": ["Woman", "Non-binary", "Man"]})
    >>> participant_groups(people, "gender").to_dict()
    {'a': 'Woman', 'c': 'Man'}
    """
    answers = participants[grouping]
    # One call per distinct answer, not per participant (10,000 participants, a handful of answers).
    label_of = {answer: _group_label(grouping, answer) for answer in pd.unique(answers.dropna())}
    labels = answers.map(label_of).to_numpy(dtype=object)
    result = pd.Series(labels, index=participants[participant].to_numpy(), dtype=object)
    return result.dropna()


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


@_never_raises(TTEST_COLUMNS)
def group_ttests(
    ratings: pd.DataFrame,
    participants: pd.DataFrame,
    *,
    groupings: Sequence[str] = tuple(GROUPINGS),
    levels: Sequence[str] = LEVELS,
    dimension: str | None = None,
    participant: str = "participant_id",
    model: str = "model",
    rating: str = "rating",
    dimension_column: str = "dimension",
) -> pd.DataFrame:
    """Welch t-tests of each demographic grouping, per model, at two levels.

    ``level="participant"`` compares each participant's mean rating of the
    model (all of that model's responses: zero-shot and fine-tuned; the
    reference model is tested as a model of its own). ``level="rating"``
    treats every rating as independent, as the TIDE paper did; that overstates
    significance and is exported for comparison only. Holm runs within
    grouping x level (across models). ``cohen_d`` uses the pooled SD and is
    signed ``mean_a - mean_b``.

    Examples
    --------
    >>> ratings = pd.DataFrame({"participant_id": list("abcdef"), "model": "M",
    ...                         "rating": [4.0, 5, 4, 2, 3, 2]})
    >>> people = pd.DataFrame({"participant_id": list("abcdef"),
    ...                        "gender": ["Woman"] * 3 + ["Man"] * 3})
    >>> out = group_ttests(ratings, people, groupings=["gender"], levels=["participant"])
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
    for grouping in groupings:
        group_a, group_b = GROUPINGS[grouping]
        if grouping not in participants.columns:
            rows.append({"grouping": grouping, "group_a": group_a, "group_b": group_b,
                         "note": f"missing column: {grouping}"})
            continue
        labels = participant_groups(participants, grouping, participant=participant)
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


# ---------------------------------------------------------------------------
# 3. Regional analyses
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


@_never_raises(ANOVA_COLUMNS)
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


@_never_raises(WELCH_COLUMNS)
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


@_never_raises(GAMES_HOWELL_COLUMNS)
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


@_never_raises(KRUSKAL_COLUMNS)
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


@_never_raises(REGION_MEANS_COLUMNS)
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


# ---------------------------------------------------------------------------
# 4. Descriptives
# ---------------------------------------------------------------------------

DESCRIPTIVES_COLUMNS = ["model", "condition", "scenario", "dimension", "n", "mean", "sd", "ci_low", "ci_high", "note"]


@_never_raises(DESCRIPTIVES_COLUMNS)
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
    >>> ratings = pd.DataFrame({"model": "A", "condition": "zero-shot", "scenario": "S1",
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
    rows = []
    for (system, condition_id, scenario_id, dimension_id), cells in data.groupby(
        [model, condition, scenario, "_dimension"], sort=True
    ):
        summary = mean_ci(cells[rating].to_numpy(dtype=float))
        rows.append({"model": system, "condition": condition_id, "scenario": scenario_id,
                     "dimension": dimension_id, **summary,
                     "note": "" if summary["n"] >= 2 else "n < 2: no SD or CI"})
    if not rows:
        return _note_frame(DESCRIPTIVES_COLUMNS, "no ratings")
    return pd.DataFrame(rows, columns=DESCRIPTIVES_COLUMNS)


# ---------------------------------------------------------------------------
# 5. Paired zero-shot vs fine-tuned
# ---------------------------------------------------------------------------

WILCOXON_COLUMNS = [
    "model", "dimension", "n", "n_nonzero", "median_zs", "median_ft", "W", "p", "p_holm",
    "rank_biserial", "holm_family", "note",
]


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


@_never_raises(WILCOXON_COLUMNS)
def paired_zs_ft(
    ratings: pd.DataFrame,
    *,
    participant: str = "participant_id",
    model: str = "model",
    condition: str = "condition",
    rating: str = "rating",
    dimension_column: str = "dimension",
) -> pd.DataFrame:
    """Wilcoxon signed-rank test of fine-tuned vs zero-shot, per model (x dimension).

    Each participant contributes one pair: their mean zero-shot and mean
    fine-tuned rating of the model; participants missing either are left
    out. scipy's defaults apply (zero differences dropped; exact p for small
    samples without ties). ``W`` is scipy's two-sided statistic,
    min(W+, W-). ``rank_biserial`` is positive when fine-tuned is rated
    higher. Holm across models within each dimension.

    Examples
    --------
    >>> ratings = pd.DataFrame({"participant_id": np.repeat(list("abcdef"), 2), "model": "A",
    ...     "condition": ["zero-shot", "fine-tuned"] * 6,
    ...     "rating": [2.0, 4, 3, 4, 2, 3, 1, 4, 3, 2, 2, 5]})
    >>> paired_zs_ft(ratings)[["n", "W", "rank_biserial"]].round(3)
       n    W  rank_biserial
    0  6  2.0           0.81
    """
    problem = _missing_columns_note(ratings, [participant, model, condition, rating])
    if problem:
        return _note_frame(WILCOXON_COLUMNS, problem)
    data = ratings.dropna(subset=[rating])
    data = data[data[condition].isin([ZERO_SHOT, FINE_TUNED])]
    data = data.assign(_dimension=data[dimension_column] if dimension_column in data.columns else "")
    rows = []
    for dimension_id, dimension_rows in data.groupby("_dimension", sort=True):
        family_rows = [
            {"model": system, "dimension": dimension_id, **_wilcoxon_row(cells, participant, condition, rating)}
            for system, cells in dimension_rows.groupby(model, sort=True)
        ]
        for row, p_holm in zip(family_rows, holm([row["p"] for row in family_rows])):
            row["p_holm"] = p_holm
            row["holm_family"] = f"dimension={dimension_id or 'all'} (across {len(family_rows)} models)"
        rows.extend(family_rows)
    if not rows:
        return _note_frame(WILCOXON_COLUMNS, "no zero-shot or fine-tuned ratings")
    return pd.DataFrame(rows, columns=WILCOXON_COLUMNS)


def _wilcoxon_row(cells: pd.DataFrame, participant: str, condition: str, rating: str) -> dict[str, Any]:
    means = cells.pivot_table(index=participant, columns=condition, values=rating, aggfunc="mean")
    if ZERO_SHOT not in means or FINE_TUNED not in means:
        return {"n": 0, "n_nonzero": 0, "note": "model lacks a zero-shot or fine-tuned condition"}
    pairs = means[[ZERO_SHOT, FINE_TUNED]].dropna()
    zs, ft = pairs[ZERO_SHOT].to_numpy(dtype=float), pairs[FINE_TUNED].to_numpy(dtype=float)
    differences = ft - zs
    row = {"n": int(zs.size), "n_nonzero": int((differences != 0).sum()),
           "median_zs": np.median(zs) if zs.size else np.nan, "median_ft": np.median(ft) if ft.size else np.nan,
           "W": np.nan, "p": np.nan, "rank_biserial": np.nan, "note": ""}
    if row["n_nonzero"] == 0:
        row["note"] = "no participant with both conditions differs" if zs.size else "no participant rated both conditions"
        return row
    result = stats.wilcoxon(ft, zs)
    row.update(W=float(result.statistic), p=float(result.pvalue), rank_biserial=rank_biserial(differences))
    return row


# ---------------------------------------------------------------------------
# 6. Rankings
# ---------------------------------------------------------------------------

RANK_SUMMARY_COLUMNS = [
    "unit", "response_id", "block_id", "scenario", "model", "condition", "n", "mean_rank", "sd_rank", "note",
]


@_never_raises(RANK_SUMMARY_COLUMNS)
def rank_summary(
    ratings: pd.DataFrame,
    *,
    response: str = "response_id",
    block: str = "block_id",
    scenario: str = "scenario",
    model: str = "model",
    condition: str = "condition",
    rank: str = "rank",
) -> pd.DataFrame:
    """Mean rank (1 = most empathetic) per response, per model x condition and per model.

    ``unit`` says which: ``response``, ``model_condition`` or ``model``.
    Columns that do not apply to a unit are ``""``.

    Examples
    --------
    >>> ratings = pd.DataFrame({"response_id": ["Q1-R1", "Q1-R2"] * 2, "block_id": "Q1",
    ...     "scenario": "S1", "model": ["A", "B"] * 2, "condition": "zero-shot", "rank": [1.0, 2, 2, 1]})
    >>> rank_summary(ratings).query("unit == 'model'")[["model", "n", "mean_rank"]]
      model  n  mean_rank
    4     A  2        1.5
    5     B  2        1.5
    """
    problem = _missing_columns_note(ratings, [response, block, scenario, model, condition, rank])
    if problem:
        return _note_frame(RANK_SUMMARY_COLUMNS, problem)
    data = ratings.dropna(subset=[rank])
    if data.empty:
        return _note_frame(RANK_SUMMARY_COLUMNS, "no ranks (ranking off?)")
    units = {
        "response": [response, block, scenario, model, condition],
        "model_condition": [model, condition],
        "model": [model],
    }
    tables = []
    for unit, keys in units.items():
        table = data.groupby(keys, sort=True)[rank].agg(n="count", mean_rank="mean", sd_rank="std").reset_index()
        tables.append(table.assign(unit=unit))
    combined = pd.concat(tables, ignore_index=True)
    for column in (response, block, scenario, condition):
        # ratings_frame gives categoricals, which take no new "" label.
        combined[column] = combined[column].astype(object).fillna("")
    combined = combined.rename(columns={response: "response_id", block: "block_id", scenario: "scenario",
                                        model: "model", condition: "condition"})
    combined["note"] = ""
    return combined[RANK_SUMMARY_COLUMNS]


FRIEDMAN_COLUMNS = [
    "block_id", "scenario", "n", "k", "chi2", "df", "p", "p_holm", "kendall_w", "holm_family", "note",
]


@_never_raises(FRIEDMAN_COLUMNS)
def friedman_by_block(
    ratings: pd.DataFrame,
    *,
    participant: str = "participant_id",
    block: str = "block_id",
    scenario: str = "scenario",
    response: str = "response_id",
    rank: str = "rank",
) -> pd.DataFrame:
    """Friedman test per block: do participants rank the block's responses differently from chance?

    Only participants who ranked every response of the block enter.
    ``kendall_w = chi2 / (n (k - 1))``. Holm across blocks.

    Examples
    --------
    >>> ratings = pd.DataFrame({"participant_id": np.repeat(list("abcd"), 3), "block_id": "Q1",
    ...     "scenario": "S1", "response_id": ["R1", "R2", "R3"] * 4,
    ...     "rank": [1.0, 2, 3, 1, 2, 3, 1, 3, 2, 1, 2, 3]})
    >>> friedman_by_block(ratings)[["n", "k", "chi2", "kendall_w"]].round(3)
       n  k  chi2  kendall_w
    0  4  3   6.5      0.812
    """
    problem = _missing_columns_note(ratings, [participant, block, scenario, response, rank])
    if problem:
        return _note_frame(FRIEDMAN_COLUMNS, problem)
    data = ratings.dropna(subset=[rank])
    if data.empty:
        return _note_frame(FRIEDMAN_COLUMNS, "no ranks (ranking off?)")
    rows = []
    for block_id, cells in data.groupby(block, sort=True):
        table = cells.pivot_table(index=participant, columns=response, values=rank, aggfunc="mean").dropna()
        n, k = table.shape
        row = {"block_id": block_id, "scenario": cells[scenario].iloc[0], "n": n, "k": k, "chi2": np.nan,
               "df": k - 1, "p": np.nan, "kendall_w": np.nan, "note": ""}
        if k < 3 or n < 2:
            row["note"] = "needs at least 3 responses and 2 complete rankings"
        elif np.ptp(table.to_numpy(), axis=1).max() == 0:
            row["note"] = "every ranking is all ties"
        else:
            result = stats.friedmanchisquare(*(table[column].to_numpy(dtype=float) for column in table.columns))
            row.update(chi2=float(result.statistic), p=float(result.pvalue),
                       kendall_w=float(result.statistic) / (n * (k - 1)))
        rows.append(row)
    table = pd.DataFrame(rows)
    table["p_holm"] = holm(table["p"].to_numpy(dtype=float))
    table["holm_family"] = f"all blocks ({len(table)})"
    return table[FRIEDMAN_COLUMNS]


BRADLEY_TERRY_COLUMNS = [
    "model", "condition", "strength", "ci_low", "ci_high", "worth", "n_rankings", "n_participants",
    "n_boot", "method", "note",
]


def plackett_luce(rankings: np.ndarray, n_items: int, *, tol: float = 1e-10, max_iter: int = 5000,
                  start: np.ndarray | None = None) -> np.ndarray:
    """Plackett-Luce log-worths by Hunter's (2004) MM algorithm, centred to mean 0.

    ``rankings`` is an integer array (n_rankings x m): item indices ordered
    from first (best) to last. With m = 2 this is the Bradley-Terry model.
    Items that never beat anything get ``-inf`` (no finite MLE).

    Examples
    --------
    >>> plackett_luce(np.array([[0, 1], [0, 1], [1, 0]]), 2).round(4).tolist()
    [0.3466, -0.3466]
    """
    rankings = np.asarray(rankings, dtype=int)
    m = rankings.shape[1]
    # Wins: times an item is chosen at a stage, i.e. ranked anywhere but last.
    wins = np.bincount(rankings[:, : m - 1].ravel(), minlength=n_items).astype(float)
    appears = np.bincount(rankings.ravel(), minlength=n_items) > 0
    gamma = np.exp(start) if start is not None else np.ones(n_items)
    gamma[~appears] = 1.0
    for _ in range(max_iter):
        worths = gamma[rankings]
        # Denominator of each stage t: total worth of the items still unranked.
        remaining = np.cumsum(worths[:, ::-1], axis=1)[:, ::-1][:, : m - 1]
        # An item at position s was in the choice sets of stages 0..min(s, m-2).
        stage_sums = np.cumsum(1.0 / remaining, axis=1)
        exposure = np.concatenate([stage_sums, stage_sums[:, -1:]], axis=1)
        denominator = np.bincount(rankings.ravel(), weights=exposure.ravel(), minlength=n_items)
        updated = np.where(appears, wins / np.where(denominator > 0, denominator, 1.0), 1.0)
        positive = updated[appears & (wins > 0)]
        updated = updated / np.exp(np.log(positive).mean())
        converged = np.nanmax(np.abs(np.log(updated[appears & (wins > 0)]) - np.log(gamma[appears & (wins > 0)]))) < tol
        gamma = updated
        if converged:
            break
    with np.errstate(divide="ignore"):
        strengths = np.log(gamma)
    strengths[~appears] = np.nan
    finite = np.isfinite(strengths)
    strengths[finite] -= strengths[finite].mean()
    return strengths


def _rankings_array(data: pd.DataFrame, participant: str, block: str, rank: str, item_codes: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """(rankings as item indices best-first, the participant of each ranking); incomplete rankings dropped."""
    ordered = data.assign(_item=item_codes).sort_values([participant, block, rank], kind="stable")
    sizes = ordered.groupby([participant, block], sort=False).size()
    m = int(sizes.max())
    complete = sizes[sizes == m].index
    ordered = ordered.set_index([participant, block]).loc[complete].reset_index()
    rankings = ordered["_item"].to_numpy(dtype=int).reshape(-1, m)
    owners = ordered[participant].to_numpy()[::m]
    return rankings, owners


@_never_raises(BRADLEY_TERRY_COLUMNS)
def bradley_terry(
    ratings: pd.DataFrame,
    *,
    n_boot: int = 200,
    seed: int = 0,
    max_rows: int | None = 200_000,
    confidence: float = CONFIDENCE,
    participant: str = "participant_id",
    block: str = "block_id",
    model: str = "model",
    condition: str = "condition",
    rank: str = "rank",
) -> pd.DataFrame:
    """Plackett-Luce strength (log-worth) per model x condition from the rankings, with bootstrap CI.

    Plackett-Luce generalises Bradley-Terry from pairs to full rankings; each
    participant x block ranking is one observation and the items are the
    model x condition sources shown in it. ``strength`` is the log-worth
    centred to mean 0 across items (differences are log-odds of being ranked
    above); ``worth`` = softmax of strengths (sums to 1). The percentile
    bootstrap resamples participants with replacement (``n_boot`` times).
    Rankings with a missing or duplicated rank are dropped. When the rows
    exceed ``max_rows``, whole participants are subsampled; ``note`` says so.

    Examples
    --------
    >>> ratings = pd.DataFrame({"participant_id": np.repeat(list("abc"), 2), "block_id": "Q1",
    ...     "model": ["A", "B"] * 3, "condition": "zero-shot", "rank": [1.0, 2, 1, 2, 2, 1]})
    >>> bradley_terry(ratings, n_boot=0)[["model", "strength", "worth"]].round(4)
      model  strength   worth
    0     A    0.3466  0.6667
    1     B   -0.3466  0.3333
    """
    problem = _missing_columns_note(ratings, [participant, block, model, condition, rank])
    if problem:
        return _note_frame(BRADLEY_TERRY_COLUMNS, problem)
    data = ratings.dropna(subset=[rank])
    # A ranking is kept when no rank repeats in it; vectorised (a Python call per ranking took minutes).
    repeated = data.duplicated([participant, block, rank], keep=False)
    valid = ~repeated.groupby([data[participant], data[block]], observed=True).transform("any")
    data = data[valid.astype(bool)]
    if data.empty:
        return _note_frame(BRADLEY_TERRY_COLUMNS, "no complete rankings (ranking off?)")
    data, subsample_note = _subsample_participants(data, max_rows, seed, participant)
    items = data[[model, condition]].drop_duplicates().sort_values([model, condition]).reset_index(drop=True)
    codes = pd.MultiIndex.from_frame(items).get_indexer(pd.MultiIndex.from_frame(data[[model, condition]]))
    rankings, owners = _rankings_array(data, participant, block, rank, pd.Series(codes, index=data.index))
    strengths = plackett_luce(rankings, len(items))
    low, high = _bootstrap_ci(rankings, owners, len(items), strengths, n_boot, seed, confidence)
    finite = np.isfinite(strengths)
    worth = np.where(finite, np.exp(np.where(finite, strengths, 0.0)), 0.0)
    table = items.rename(columns={model: "model", condition: "condition"}).assign(
        strength=strengths, ci_low=low, ci_high=high, worth=worth / worth.sum(),
        n_rankings=len(rankings), n_participants=len(np.unique(owners)), n_boot=n_boot,
        method="Plackett-Luce (MM), percentile bootstrap over participants",
    )
    table["note"] = [
        _join_notes(subsample_note, "" if ok else "never ranked above another item: no finite strength")
        for ok in finite
    ]
    return table[BRADLEY_TERRY_COLUMNS]


def _bootstrap_ci(rankings: np.ndarray, owners: np.ndarray, n_items: int, estimate: np.ndarray,
                  n_boot: int, seed: int, confidence: float) -> tuple[np.ndarray, np.ndarray]:
    if n_boot <= 0:
        return np.full(n_items, np.nan), np.full(n_items, np.nan)
    rng = np.random.default_rng(seed)
    people, person_index = np.unique(owners, return_inverse=True)
    rows_of = [np.flatnonzero(person_index == i) for i in range(len(people))]
    start = np.where(np.isfinite(estimate), estimate, 0.0)
    draws = np.empty((n_boot, n_items))
    for draw in range(n_boot):
        chosen = rng.integers(0, len(people), len(people))
        sample = rankings[np.concatenate([rows_of[i] for i in chosen])]
        draws[draw] = plackett_luce(sample, n_items, tol=1e-8, start=start)
    tail = (1 - confidence) / 2 * 100
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        draws[~np.isfinite(draws)] = np.nan
        return np.nanpercentile(draws, tail, axis=0), np.nanpercentile(draws, 100 - tail, axis=0)


# ---------------------------------------------------------------------------
# 7. Best-worst
# ---------------------------------------------------------------------------

BEST_WORST_COLUMNS = [
    "model", "condition", "n_shown", "n_participants", "best", "worst", "best_minus_worst", "normalized", "note",
]


@_never_raises(BEST_WORST_COLUMNS)
def best_worst_scores(
    ratings: pd.DataFrame,
    *,
    participant: str = "participant_id",
    block: str = "block_id",
    model: str = "model",
    condition: str = "condition",
    best: str = "best",
    worst: str = "worst",
) -> pd.DataFrame:
    """Best, worst and best-minus-worst counts per source (model x condition).

    ``normalized = (best - worst) / n_shown``, from -1 (always worst) to +1
    (always best). ``note`` flags participant x block sets without exactly
    one best and one worst (they are still counted).

    Examples
    --------
    >>> ratings = pd.DataFrame({"participant_id": np.repeat(["a", "b"], 3), "block_id": "Q1",
    ...     "model": ["A", "B", "C"] * 2, "condition": "zero-shot",
    ...     "best": [True, False, False, True, False, False],
    ...     "worst": [False, False, True, False, True, False]})
    >>> best_worst_scores(ratings)[["model", "best", "worst", "normalized"]]
      model  best  worst  normalized
    0     A     2      0         1.0
    1     B     0      1        -0.5
    2     C     0      1        -0.5
    """
    problem = _missing_columns_note(ratings, [participant, block, model, best, worst])
    if problem:
        return _note_frame(BEST_WORST_COLUMNS, problem)
    data = ratings.assign(
        _best=ratings[best].fillna(False).astype(bool),
        _worst=ratings[worst].fillna(False).astype(bool),
        _condition=ratings[condition] if condition in ratings.columns else "",
    )
    per_set = data.groupby([participant, block])[["_best", "_worst"]].sum()
    irregular = int(((per_set["_best"] != 1) | (per_set["_worst"] != 1)).sum())
    note = f"{irregular} participant x block sets without exactly one best and one worst" if irregular else ""
    table = data.groupby([model, "_condition"], sort=True).agg(
        n_shown=("_best", "size"), n_participants=(participant, "nunique"),
        best=("_best", "sum"), worst=("_worst", "sum"),
    ).reset_index().rename(columns={model: "model", "_condition": "condition"})
    table["best_minus_worst"] = table["best"] - table["worst"]
    table["normalized"] = table["best_minus_worst"] / table["n_shown"]
    table["note"] = note
    return table[BEST_WORST_COLUMNS]


# ---------------------------------------------------------------------------
# 8. Agreement
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
    marginals = coincidences.sum(axis=1)
    total = marginals.sum()
    distances = _squared_distances(categories, marginals, measurement)
    expected = (np.outer(marginals, marginals) * distances).sum()
    if expected == 0:
        result["note"] = "all pairable ratings identical: alpha undefined"
        return result
    result["alpha"] = float(1 - (total - 1) * (coincidences * distances).sum() / expected)
    return result


@_never_raises(ALPHA_COLUMNS)
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
        subsets = [("all", dimension_rows), *dimension_rows.groupby(scenario, sort=True)]
        for scenario_id, cells in subsets:
            result = alpha_from_values(cells[response].to_numpy(), cells[rating].to_numpy(dtype=float), level)
            rows.append({"scenario": scenario_id, "dimension": dimension_id, "measurement": level,
                         "alpha": result["alpha"], "n_units": result["n_units"],
                         "n_raters": cells[participant].nunique(), "n_values": result["n_values"],
                         "note": _join_notes(duplicate_note, result["note"])})
    if not rows:
        return _note_frame(ALPHA_COLUMNS, "no ratings")
    return pd.DataFrame(rows, columns=ALPHA_COLUMNS)


RATER_LOO_COLUMNS = ["participant_id", "n_items", "spearman_r", "p", "holm_family", "note"]
_DESCRIPTIVE_P = "none: descriptive p per rater, not a test family"


@_never_raises(RATER_LOO_COLUMNS)
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
    rows = []
    for rater, cells in data.groupby(participant, sort=True):
        own, others = cells[rating].to_numpy(dtype=float), cells["_others"].to_numpy(dtype=float)
        row = {"participant_id": rater, "n_items": own.size, "spearman_r": np.nan, "p": np.nan,
               "holm_family": _DESCRIPTIVE_P, "note": ""}
        if own.size < min_items:
            row["note"] = f"fewer than {min_items} shared items"
        elif np.ptp(own) == 0 or np.ptp(others) == 0:
            row["note"] = "constant ratings: correlation undefined"
        else:
            result = stats.spearmanr(own, others)
            row.update(spearman_r=float(result.statistic), p=float(result.pvalue))
        rows.append(row)
    if not rows:
        return _note_frame(RATER_LOO_COLUMNS, "no item rated by two or more raters")
    return pd.DataFrame(rows, columns=RATER_LOO_COLUMNS)


# ---------------------------------------------------------------------------
# 9. Mixed-effects and ordinal models
# ---------------------------------------------------------------------------

MODEL_COLUMNS = [
    "term", "coef", "se", "z", "p", "ci_low", "ci_high", "n_obs", "n_participants", "n_items", "holm_family", "note",
]
_MODEL_P = "none: Wald tests of one model's coefficients"

_FORMULA = "rating ~ C(condition, Treatment('zero-shot')) * C(system)"


def _model_frame(ratings: pd.DataFrame, dimension: str | None, max_rows: int | None, seed: int,
                 columns: dict[str, str]) -> tuple[pd.DataFrame, str]:
    """Non-reference ratings with canonical column names, subsampled by participant if large."""
    data, dimension_note = _single_dimension(ratings, dimension, columns["dimension_column"])
    data = data.dropna(subset=[columns["rating"]])
    # The reference is its own system and its own condition, so it cannot sit
    # in a condition x system design: it would be a perfectly confounded cell.
    data = data[data[columns["condition"]].isin([ZERO_SHOT, FINE_TUNED])]
    frame = pd.DataFrame({
        "rating": data[columns["rating"]].to_numpy(dtype=float),
        "condition": data[columns["condition"]].to_numpy(),
        "system": data[columns["model"]].to_numpy(),
        "participant_id": data[columns["participant"]].to_numpy(),
        "response_id": data[columns["response"]].to_numpy(),
    })
    frame, subsample_note = _subsample_participants(frame, max_rows, seed, "participant_id")
    return frame, _join_notes(dimension_note, "reference responses excluded (condition = system)", subsample_note)


def _clean_term(term: str) -> str:
    """``C(condition, Treatment('zero-shot'))[T.fine-tuned]`` -> ``condition[fine-tuned]``."""
    return re.sub(r"C\((\w+)(?:, Treatment\([^)]*\))?\)\[T\.([^\]]*)\]", r"\1[\2]", term)


def _coefficient_table(params: pd.Series, se: pd.Series, frame: pd.DataFrame, note: str) -> pd.DataFrame:
    z = params / se
    critical = stats.norm.ppf((1 + CONFIDENCE) / 2)
    return pd.DataFrame({
        "term": [_clean_term(term) for term in params.index],
        "coef": params.to_numpy(), "se": se.to_numpy(), "z": z.to_numpy(),
        "p": 2 * stats.norm.sf(np.abs(z.to_numpy())),
        "ci_low": (params - critical * se).to_numpy(), "ci_high": (params + critical * se).to_numpy(),
        "n_obs": len(frame), "n_participants": frame["participant_id"].nunique(),
        "n_items": frame["response_id"].nunique(), "holm_family": _MODEL_P, "note": note,
    })[MODEL_COLUMNS]


def _design_problem(frame: pd.DataFrame) -> str:
    if frame.empty:
        return "no zero-shot or fine-tuned ratings"
    if frame["condition"].nunique() < 2:
        return "only one condition"
    if frame["participant_id"].nunique() < 2:
        return "fewer than 2 participants"
    if np.ptp(frame["rating"].to_numpy()) == 0:
        return "all ratings identical"
    return ""


def _fit_mixed(model_spec: Any) -> tuple[Any, str]:
    """REML fit. statsmodels' default BFGS (and often L-BFGS) stalls on crossed
    variance components; derivative-free Powell converges reliably and fast here."""
    for method in ("powell", "lbfgs"):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = model_spec.fit(reml=True, method=method)
        troubled = any("converge" in str(warning.message).lower() for warning in caught)
        if result.converged and not troubled:
            return result, ""
    return result, "optimizer reported convergence problems"


@_never_raises(MODEL_COLUMNS)
def mixed_model(
    ratings: pd.DataFrame,
    *,
    max_rows: int | None = 20_000,
    seed: int = 0,
    dimension: str | None = None,
    participant: str = "participant_id",
    response: str = "response_id",
    model: str = "model",
    condition: str = "condition",
    rating: str = "rating",
    dimension_column: str = "dimension",
) -> pd.DataFrame:
    """Linear mixed model ``rating ~ condition * system`` with crossed random intercepts.

    Fitted by REML with statsmodels ``MixedLM``: one constant group and
    variance components ``participant`` (``0 + C(participant_id)``) and
    ``item`` (``0 + C(response_id)``), which is how statsmodels expresses
    crossed random effects. The intercept is zero-shot of the alphabetically
    first system. Reference responses are excluded. Rows
    ``var(participant)``, ``var(item)`` and ``var(residual)`` give the
    variance components (no SE). Large frames are subsampled by participant
    (``max_rows``, ``seed``); ``note`` says so.

    Examples
    --------
    >>> rng = np.random.default_rng(1)
    >>> ratings = pd.DataFrame({"participant_id": np.repeat([f"p{i}" for i in range(8)], 4),
    ...     "response_id": ["r1", "r2", "r3", "r4"] * 8, "model": ["A", "A", "B", "B"] * 8,
    ...     "condition": ["zero-shot", "fine-tuned"] * 16, "rating": rng.integers(1, 6, 32).astype(float)})
    >>> mixed_model(ratings)["term"].tolist()
    ['Intercept', 'condition[fine-tuned]', 'system[B]', 'condition[fine-tuned]:system[B]', 'var(item)', 'var(participant)', 'var(residual)']
    """
    problem = _missing_columns_note(ratings, [participant, response, model, condition, rating])
    if problem:
        return _note_frame(MODEL_COLUMNS, problem)
    columns = dict(participant=participant, response=response, model=model, condition=condition,
                             rating=rating, dimension_column=dimension_column)
    frame, note = _model_frame(ratings, dimension, max_rows, seed, columns)
    problem = _design_problem(frame)
    if problem:
        return _note_frame(MODEL_COLUMNS, _join_notes(note, problem))
    import statsmodels.formula.api as smf

    frame = frame.assign(group=1)
    formula = _FORMULA if frame["system"].nunique() > 1 else "rating ~ C(condition, Treatment('zero-shot'))"
    model_spec = smf.mixedlm(formula, frame, groups="group", re_formula="0",
                             vc_formula={"participant": "0 + C(participant_id)", "item": "0 + C(response_id)"})
    result, fit_note = _fit_mixed(model_spec)
    note = _join_notes(note, fit_note)
    table = _coefficient_table(result.fe_params, result.bse_fe, frame, note)
    variances = pd.DataFrame({
        "term": [f"var({name})" for name in model_spec.exog_vc.names] + ["var(residual)"],
        "coef": [*np.asarray(result.vcomp, dtype=float), float(result.scale)],
    }).assign(n_obs=len(frame), n_participants=frame["participant_id"].nunique(),
              n_items=frame["response_id"].nunique(), holm_family=_MODEL_P, note=note)
    return pd.concat([table, variances], ignore_index=True).reindex(columns=MODEL_COLUMNS)


@_never_raises(MODEL_COLUMNS)
def ordinal_model(
    ratings: pd.DataFrame,
    *,
    max_rows: int | None = 20_000,
    seed: int = 0,
    dimension: str | None = None,
    participant: str = "participant_id",
    response: str = "response_id",
    model: str = "model",
    condition: str = "condition",
    rating: str = "rating",
    dimension_column: str = "dimension",
) -> pd.DataFrame:
    """Ordered logit ``rating ~ condition * system`` with participant-clustered standard errors.

    statsmodels ``OrderedModel`` (``distr="logit"``), sandwich SEs clustered
    on participant (``cov_type="cluster"``). Positive coefficients mean higher
    ratings. Items are not modelled as random (OrderedModel has no random
    effects); the clustering absorbs within-participant correlation only.
    Cut-point rows follow statsmodels' parameterisation: ``cut 1/2`` is the
    first threshold and each later ``log-increment a/b`` is the log of the
    gap to the previous threshold. Reference responses are excluded.

    Examples
    --------
    >>> rng = np.random.default_rng(1)
    >>> ratings = pd.DataFrame({"participant_id": np.repeat([f"p{i}" for i in range(10)], 4),
    ...     "response_id": ["r1", "r2", "r3", "r4"] * 10, "model": ["A", "A", "B", "B"] * 10,
    ...     "condition": ["zero-shot", "fine-tuned"] * 20, "rating": rng.integers(1, 4, 40).astype(float)})
    >>> ordinal_model(ratings)["term"].tolist()
    ['condition[fine-tuned]', 'system[B]', 'condition[fine-tuned]:system[B]', 'cut 1/2', 'log-increment 2/3']
    """
    problem = _missing_columns_note(ratings, [participant, response, model, condition, rating])
    if problem:
        return _note_frame(MODEL_COLUMNS, problem)
    columns = dict(participant=participant, response=response, model=model, condition=condition,
                             rating=rating, dimension_column=dimension_column)
    frame, note = _model_frame(ratings, dimension, max_rows, seed, columns)
    problem = _design_problem(frame)
    if problem:
        return _note_frame(MODEL_COLUMNS, _join_notes(note, problem))
    from statsmodels.miscmodels.ordinal_model import OrderedModel

    levels = np.sort(frame["rating"].unique())
    labels = [f"{level:g}" for level in levels]
    outcome = pd.Categorical(frame["rating"].map(dict(zip(levels, labels))), categories=labels, ordered=True)
    formula = _FORMULA if frame["system"].nunique() > 1 else "rating ~ C(condition, Treatment('zero-shot'))"
    model_spec = OrderedModel.from_formula(formula, frame.assign(rating=outcome), distr="logit")
    clusters = pd.factorize(frame["participant_id"])[0]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = model_spec.fit(method="bfgs", disp=False, maxiter=2000, cov_type="cluster",
                                cov_kwds={"groups": clusters})
    converged = result.mle_retvals.get("converged", True)
    if not converged or any("converge" in str(warning.message).lower() for warning in caught):
        note = _join_notes(note, "optimizer reported convergence problems")
    n_cuts = len(levels) - 1
    names = list(result.params.index)
    thresholds = [f"cut {labels[0]}/{labels[1]}"] + [
        f"log-increment {labels[i]}/{labels[i + 1]}" for i in range(1, n_cuts)
    ]
    names[-n_cuts:] = thresholds
    params = pd.Series(result.params.to_numpy(), index=names)
    se = pd.Series(np.asarray(result.bse), index=names)
    table = _coefficient_table(params, se, frame, _join_notes(note, "SE clustered by participant"))
    return table


# ---------------------------------------------------------------------------
# 10. Sensitivity and agreement with the LLM judge
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
    >>> with_rule = pd.DataFrame({"model": "A", "condition": "zero-shot", "scenario": "S1", "rating": [3.0, 4]})
    >>> without_rule = pd.DataFrame({"model": "A", "condition": "zero-shot", "scenario": "S1",
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


JUDGE_COLUMNS = ["level", "method", "r", "p", "n", "holm_family", "note"]


@_never_raises(JUDGE_COLUMNS)
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
        per_rater = [
            _correlation(cells[rating], cells[gold_score], method, min_items)["r"]
            for _, cells in judged.groupby(participant, sort=True)
        ]
        defined = [value for value in per_rater if np.isfinite(value)]
        rows.append({"level": "rater", "method": method, "r": float(np.mean(defined)) if defined else np.nan,
                     "p": np.nan, "n": len(defined),
                     "note": "" if defined else "no rater with a defined correlation"})
    table = pd.DataFrame(rows, columns=JUDGE_COLUMNS)
    table["holm_family"] = "none: two descriptions of one agreement, not a test family"
    return table


def _correlation(x: pd.Series, y: pd.Series, method: str, min_items: int) -> dict[str, Any]:
    x, y = x.to_numpy(dtype=float), y.to_numpy(dtype=float)
    if x.size < min_items:
        return {"r": np.nan, "p": np.nan, "n": int(x.size), "note": f"fewer than {min_items} items"}
    if np.ptp(x) == 0 or np.ptp(y) == 0:
        return {"r": np.nan, "p": np.nan, "n": int(x.size), "note": "constant values: correlation undefined"}
    result = stats.spearmanr(x, y) if method == "spearman" else stats.pearsonr(x, y)
    return {"r": float(result.statistic), "p": float(result.pvalue), "n": int(x.size), "note": ""}


# ---------------------------------------------------------------------------
# 11. Position bias
# ---------------------------------------------------------------------------

POSITION_COLUMNS = [
    "position", "n", "mean", "sd", "ci_low", "ci_high", "test", "statistic", "df", "p", "n_participants",
    "holm_family", "note",
]


@_never_raises(POSITION_COLUMNS)
def position_bias(
    ratings: pd.DataFrame,
    *,
    participant: str = "participant_id",
    position: str = "position",
    rating: str = "rating",
) -> pd.DataFrame:
    """Mean rating per display position, and a Friedman test that the profile is flat.

    Each participant's mean rating at each position is one observation; the
    Friedman test (repeated measures, no normality assumed) uses the
    participants who saw every position. The test columns (``test,
    statistic, df, p, n_participants``) repeat on every row. ``n`` is the
    number of ratings at the position; the CI is over those ratings.

    Examples
    --------
    >>> ratings = pd.DataFrame({"participant_id": np.repeat(list("abcd"), 3), "position": [1, 2, 3] * 4,
    ...                         "rating": [5.0, 3, 1, 4, 3, 2, 5, 2, 1, 4, 2, 3]})
    >>> position_bias(ratings)[["position", "mean", "statistic", "n_participants"]].round(3)
       position  mean  statistic  n_participants
    0         1  4.50        6.5               4
    1         2  2.50        6.5               4
    2         3  1.75        6.5               4
    """
    problem = _missing_columns_note(ratings, [participant, position, rating])
    if problem:
        return _note_frame(POSITION_COLUMNS, problem)
    data = ratings.dropna(subset=[rating, position])
    rows = [{"position": key, **mean_ci(cells[rating].to_numpy(dtype=float))}
            for key, cells in data.groupby(position, sort=True)]
    table = pd.DataFrame(rows)
    per_participant = data.pivot_table(index=participant, columns=position, values=rating, aggfunc="mean").dropna()
    n, k = per_participant.shape
    test = {"test": "Friedman", "statistic": np.nan, "df": k - 1, "p": np.nan, "n_participants": n,
            "holm_family": "none: a single test", "note": ""}
    if k < 3 or n < 2:
        test["note"] = "needs at least 3 positions and 2 participants who saw all of them"
    elif np.ptp(per_participant.to_numpy(), axis=1).max() == 0:
        test["note"] = "every participant's position means are equal: no evidence of bias"
    else:
        result = stats.friedmanchisquare(*(per_participant[column].to_numpy(dtype=float)
                                           for column in per_participant.columns))
        test.update(statistic=float(result.statistic), p=float(result.pvalue))
    return table.assign(**test)[POSITION_COLUMNS]


# ---------------------------------------------------------------------------
# Registry used by tasks and exports
# ---------------------------------------------------------------------------

#: export table name -> analysis. Every callable takes ``ratings`` first; the
#: frames it needs after that are listed in :data:`ANALYSIS_INPUTS`.
ANALYSES: dict[str, Callable[..., pd.DataFrame]] = {
    "win_table": win_table,
    "win_summary": _win_summary_from_ratings,
    "ttests": group_ttests,
    "anova": regional_anova,
    "welch_anova": regional_welch,
    "games_howell": regional_games_howell,
    "kruskal": regional_kruskal,
    "region_means": region_means,
    "descriptives": descriptives,
    "wilcoxon": paired_zs_ft,
    "rank_summary": rank_summary,
    "friedman": friedman_by_block,
    "bradley_terry": bradley_terry,
    "best_worst": best_worst_scores,
    "agreement": krippendorff_alpha,
    "rater_loo": rater_loo_correlation,
    "mixed_model": mixed_model,
    "ordinal_model": ordinal_model,
    "position_bias": position_bias,
}

#: export table name -> the frames its callable takes, in order.
ANALYSIS_INPUTS: dict[str, tuple[str, ...]] = {
    name: ("ratings", "participants")
    if name in {"ttests", "anova", "welch_anova", "games_howell", "kruskal", "region_means"}
    else ("ratings",)
    for name in ANALYSES
}
