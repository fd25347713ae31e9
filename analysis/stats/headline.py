"""The seed reports' own headline tables: who took part (TIDE's Table 3) and the reference against the systems.

``demographics_table`` tabulates the retained participants' answers to the
study's own demographic questions (passed as plain ``DemographicQuestion``
values, never read from the definition here): counts and percentages per
answer, mean, SD and range for number questions, and a "Prefer not to answer"
row. ``reference_vs_systems`` asks how often the reference (a human-written
or ideal response: the study's reference conditions) was picked as most and as
least (best-worst), ranked first (ranking) or rated higher than the other
responses of its block (ratings), against chance, with an exact binomial test
and a Wilson interval (the Indiana report's human-versus-AI comparison).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from analysis.stats.groups import PREFER_NOT
from analysis.stats.primitives import CONFIDENCE, _is_missing_answer, _join_notes, _note_frame, holm

#: What ``analysis.stats`` re-exports of this family.
__all__ = [
    "DEMOGRAPHICS_COLUMNS", "REFERENCE_COLUMNS", "DemographicQuestion", "demographics_table",
    "reference_vs_systems",
]


@dataclass(frozen=True)
class DemographicQuestion:
    """One demographic question of the study, as the table needs it (``surveys.definition.DemographicDef``)."""

    key: str
    type: str = "choice"  # choice, number, us_state or text
    choices: tuple[str, ...] = ()


DEMOGRAPHICS_COLUMNS = [
    "question", "type", "answer", "n", "percent", "mean", "sd", "min", "max", "n_participants", "note",
]

#: The answer row of a number question, and of the participants who left a question blank.
NUMBER_ROW = "mean (SD)"
NOT_ANSWERED = "not answered"


def demographics_table(
    participants: pd.DataFrame,
    *,
    demographic_questions: Sequence[DemographicQuestion],
    participant: str = "participant_id",
) -> pd.DataFrame:
    """Counts and percentages of the retained participants' answers per demographic question.

    ``percent`` is 100 x n / the participants in the frame (``n_participants``),
    so every question's rows add up to 100. A choice question lists its
    choices in the study's order (zero counts included), then any other answer
    found (e.g. an imported "Other/Unknown"), then "Prefer not to answer" (always
    present) and, when some left it blank, "not answered". A number question
    has one ``mean (SD)`` row (n = numeric answers; mean, SD with ddof=1, min
    and max) before those rows; a text question one ``answered`` row (free
    texts are not tabulated); a US state question its answers by count.

    Examples
    --------
    >>> people = pd.DataFrame({"participant_id": list("abcd"), "age": ["30", "50", "Prefer not to answer", "41"],
    ...                        "sex": ["Female", "Male", "Female", ""]})
    >>> questions = [DemographicQuestion("age", "number"), DemographicQuestion("sex", "choice", ("Female", "Male"))]
    >>> demographics_table(people, demographic_questions=questions)[["question", "answer", "n", "percent", "mean"]]
      question                answer  n  percent       mean
    0      age             mean (SD)  3     75.0  40.333333
    1      age  Prefer not to answer  1     25.0        NaN
    2      sex                Female  2     50.0        NaN
    3      sex                  Male  1     25.0        NaN
    4      sex  Prefer not to answer  0      0.0        NaN
    5      sex          not answered  1     25.0        NaN
    """
    if not demographic_questions:
        return _note_frame(DEMOGRAPHICS_COLUMNS, "the study asks no demographic questions")
    absent = [q.key for q in demographic_questions if q.key not in participants.columns]
    if participant not in participants.columns or len(absent) == len(demographic_questions):
        missing = ([participant] if participant not in participants.columns else []) + absent
        return _note_frame(DEMOGRAPHICS_COLUMNS, "missing columns: " + ", ".join(missing))
    total = int(participants[participant].nunique())
    if total == 0:
        return _note_frame(DEMOGRAPHICS_COLUMNS, "no retained participants")
    rows: list[dict[str, Any]] = []
    for question in demographic_questions:
        if question.key not in participants.columns:
            rows.append({"question": question.key, "type": question.type, "n_participants": total,
                         "note": f"no column {question.key!r} in the participants frame"})
            continue
        answers = participants[question.key].map(lambda a: "" if _is_missing_answer(a) else str(a).strip())
        rows.extend(_question_rows(question, answers, total))
    table = pd.DataFrame(rows, columns=DEMOGRAPHICS_COLUMNS)
    table["note"] = table["note"].fillna("")
    return table


def _question_rows(question: DemographicQuestion, answers: pd.Series, total: int) -> list[dict[str, Any]]:
    base = {"question": question.key, "type": question.type, "n_participants": total, "note": ""}
    prefer_not = int((answers == PREFER_NOT).sum())
    blank = int((answers == "").sum())
    given = answers[(answers != PREFER_NOT) & (answers != "")]

    def count_row(answer: str, n: int, note: str = "") -> dict[str, Any]:
        return {**base, "answer": answer, "n": n, "percent": 100.0 * n / total, "note": note}

    rows: list[dict[str, Any]] = []
    if question.type == "number":
        numbers = pd.to_numeric(given, errors="coerce")
        values = numbers.dropna().to_numpy(dtype=float)
        unreadable = int(numbers.isna().sum())
        rows.append({**count_row(NUMBER_ROW, int(values.size),
                                 f"{unreadable} answers are not numbers (left out)" if unreadable else ""),
                     "mean": float(values.mean()) if values.size else np.nan,
                     "sd": float(values.std(ddof=1)) if values.size >= 2 else np.nan,
                     "min": float(values.min()) if values.size else np.nan,
                     "max": float(values.max()) if values.size else np.nan})
    elif question.type == "text":
        rows.append(count_row("answered", int(given.size), "free texts are not tabulated"))
    else:
        counts = given.value_counts()
        listed = list(question.choices)
        others = sorted((a for a in counts.index if a not in listed), key=lambda a: (-counts[a], a))
        rows.extend(count_row(answer, int(counts.get(answer, 0))) for answer in [*listed, *others])
    rows.append(count_row(PREFER_NOT, prefer_not))
    if blank:
        rows.append(count_row(NOT_ANSWERED, blank))
    return rows


# ---------------------------------------------------------------------------
# The reference against the systems
# ---------------------------------------------------------------------------

REFERENCE_COLUMNS = [
    "reference", "measure", "dimension", "n", "count", "share", "chance", "ci_low", "ci_high", "p", "p_holm",
    "holm_family", "note",
]

#: measure -> what one trial is and what counts as a success.
MEASURES = {
    "most": "choice sets showing the reference in which it was picked most",
    "least": "choice sets showing the reference in which it was picked least",
    "ranked_first": "rankings of a block holding the reference that put it first",
    "rated_higher": "comparisons of the reference's rating with another response's rating of the same block by "
                    "the same participant (ties left out) that the reference won",
}

_DEPENDENCE = "the trials of one participant are counted as independent"


def reference_vs_systems(
    ratings: pd.DataFrame,
    *,
    references: Sequence[str],
    confidence: float = CONFIDENCE,
    participant: str = "participant_id",
    block: str = "block_id",
    condition: str = "condition",
    rating: str = "rating",
    rank: str = "rank",
    best: str = "best",
    worst: str = "worst",
    dimension_column: str = "dimension",
) -> pd.DataFrame:
    """How often each reference condition beat the other responses of its block, against chance.

    Per reference condition and per measure the frame can answer (``MEASURES``):
    ``most``/``least`` (best-worst choices; chance 1 / responses in the set),
    ``ranked_first`` (rankings; chance 1 / responses ranked) and
    ``rated_higher`` per rating dimension (each other response of the block
    rated by the same participant, ties left out; chance 1/2). ``count`` of the
    ``n`` trials succeeded; ``share = count / n`` with its Wilson score interval
    and the two-sided exact binomial test against ``chance``
    (``scipy.stats.binomtest``). When sets differ in size, ``chance`` is the
    mean chance over the trials and ``note`` says the test is approximate. Holm
    across every row.

    Examples
    --------
    >>> ratings = pd.DataFrame({"participant_id": np.repeat(list("abcdef"), 3), "block_id": "Q1",
    ...     "condition": ["human", "llm", "llm"] * 6,
    ...     "best": [False, True, False] * 6, "worst": [True, False, False] * 5 + [False, True, False]})
    >>> table = reference_vs_systems(ratings, references=["human"])
    >>> table[["measure", "n", "count", "share", "chance"]].round(3)
      measure  n  count  share  chance
    0    most  6      0  0.000   0.333
    1   least  6      5  0.833   0.333
    """
    if not references:
        return _note_frame(REFERENCE_COLUMNS, "the study has no reference condition")
    missing = [c for c in (participant, block, condition) if c not in ratings.columns]
    if missing or ratings.empty:
        return _note_frame(REFERENCE_COLUMNS, "missing columns: " + ", ".join(missing) if missing else "no data")
    rows: list[dict[str, Any]] = []
    for reference in references:
        if not (ratings[condition] == reference).any():
            rows.append({"reference": reference, "note": f"no response of {reference} was judged"})
            continue
        if best in ratings.columns and worst in ratings.columns:
            for measure, column in (("most", best), ("least", worst)):
                rows.append(_choice_row(ratings, reference, measure, column, participant, block, condition))
        if rank in ratings.columns and ratings[rank].notna().any():
            rows.append(_first_row(ratings, reference, participant, block, condition, rank, dimension_column))
        if rating in ratings.columns and ratings[rating].notna().any():
            rows.extend(_rating_rows(ratings, reference, participant, block, condition, rating, dimension_column))
    for row in rows:
        row.setdefault("dimension", "")
        if "n" in row:
            chance_note = row.pop("_note", "")
            row.update(_binomial(row["count"], row["n"], row["chance"], confidence))
            row["note"] = _join_notes(row.get("note", ""), chance_note, row.pop("_note", ""),
                                      _DEPENDENCE if row["n"] else "")
    table = pd.DataFrame(rows, columns=REFERENCE_COLUMNS)
    table["p_holm"] = holm(table["p"].to_numpy(dtype=float))
    tested = int(np.isfinite(table["p"].to_numpy(dtype=float)).sum())
    table["holm_family"] = f"every row of the table ({tested} tests)"
    table["note"] = table["note"].fillna("")
    return table


def _sets(frame: pd.DataFrame, participant: str, block: str, condition: str, reference: str) -> pd.DataFrame:
    """One row per participant x block whose rows include the reference: is_reference marks its rows."""
    frame = frame.assign(_is_reference=frame[condition] == reference)
    holds = frame.groupby([participant, block], observed=True)["_is_reference"].transform("any")
    return frame[holds]


def _chance_fields(chances: pd.Series) -> dict[str, Any]:
    chance = float(chances.mean()) if len(chances) else np.nan
    varies = len(chances) and chances.nunique() > 1
    return {"chance": chance,
            "_note": "sets differ in size: chance is their mean and the test approximate" if varies else ""}


def _choice_row(ratings: pd.DataFrame, reference: str, measure: str, column: str, participant: str, block: str,
                condition: str) -> dict[str, Any]:
    frame = _sets(ratings, participant, block, condition, reference)
    picked = frame[column].fillna(False).astype(bool)
    frame = frame.assign(_picked=picked, _hit=picked & frame["_is_reference"])
    per_set = frame.groupby([participant, block], observed=True).agg(
        picks=("_picked", "sum"), size=("_picked", "size"), hit=("_hit", "any"))
    regular = per_set[per_set["picks"] == 1]
    left_out = len(per_set) - len(regular)
    return {"reference": reference, "measure": measure, "n": len(regular), "count": int(regular["hit"].sum()),
            **_chance_fields(1.0 / regular["size"]),
            "note": f"{left_out} sets without exactly one {measure} pick (left out)" if left_out else ""}


def _first_row(ratings: pd.DataFrame, reference: str, participant: str, block: str, condition: str, rank: str,
               dimension_column: str) -> dict[str, Any]:
    frame = _sets(ratings.dropna(subset=[rank]), participant, block, condition, reference)
    if dimension_column in frame.columns:
        # A ranking is one per block; rating dimensions repeat its rows.
        frame = frame.drop_duplicates(subset=[participant, block, "response_id"] if "response_id" in frame.columns
                                      else [participant, block, condition, rank])
    first = frame[rank] == frame.groupby([participant, block], observed=True)[rank].transform("min")
    frame = frame.assign(_hit=first & frame["_is_reference"])
    per_set = frame.groupby([participant, block], observed=True).agg(size=(rank, "size"), hit=("_hit", "any"))
    per_set = per_set[per_set["size"] >= 2]
    return {"reference": reference, "measure": "ranked_first", "n": len(per_set),
            "count": int(per_set["hit"].sum()), **_chance_fields(1.0 / per_set["size"])}


def _rating_rows(ratings: pd.DataFrame, reference: str, participant: str, block: str, condition: str,
                 rating: str, dimension_column: str) -> list[dict[str, Any]]:
    data = ratings.dropna(subset=[rating])
    data = data.assign(_dimension=data[dimension_column] if dimension_column in data.columns else "")
    rows = []
    for dimension_id, cells in data.groupby("_dimension", observed=True, sort=True):
        frame = _sets(cells, participant, block, condition, reference)
        ref = frame[frame["_is_reference"]].groupby([participant, block], observed=True)[rating].mean()
        others = frame[~frame["_is_reference"]][[participant, block, rating]]
        paired = others.join(ref.rename("_reference"), on=[participant, block])
        decisive = paired[paired["_reference"] != paired[rating]]
        ties = len(paired) - len(decisive)
        rows.append({"reference": reference, "measure": "rated_higher", "dimension": dimension_id,
                     "n": len(decisive), "count": int((decisive["_reference"] > decisive[rating]).sum()),
                     "chance": 0.5, "note": f"{ties} tied comparisons left out" if ties else ""})
    return rows


def _binomial(count: int, n: int, chance: float, confidence: float) -> dict[str, Any]:
    if n == 0:
        return {"share": np.nan, "ci_low": np.nan, "ci_high": np.nan, "p": np.nan}
    test = stats.binomtest(int(count), int(n), float(chance))
    interval = test.proportion_ci(confidence_level=confidence, method="wilson")
    row = {"share": count / n, "ci_low": float(interval.low), "ci_high": float(interval.high),
           "p": float(test.pvalue)}
    # The most extreme outcomes (none or all) give the smallest p this n allows.
    smallest = min(stats.binomtest(k, int(n), float(chance)).pvalue for k in (0, int(n)))
    if smallest >= 0.05:
        row["_note"] = f"{n} trials: the test cannot reach p < 0.05"
    return row
