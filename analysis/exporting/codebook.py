"""The codebook shipped with the "everything for the paper" zip: each column's
meaning, type and allowed values.

``COLUMNS`` gives a column name its shared meaning (ids, p-values, notes).
``TABLE_COLUMNS[file]`` holds a file's own columns, and overrides a shared
entry where the same name means something else in that file (``n``, ``mean``,
``sd`` ...): a result table's are carried by its registry entry
(``registry.Analysis.columns``), a question type's answer file's by its unit.
The meanings are written in ``analysis.table_columns``. A sensitivity file
(``sensitivity_<table>.csv``) is its base table plus ``variant``, so it reads
the base table's entries.

Entries describe the software, not one study: values that come from the study
definition are "the study's ..." (with an example from TIDE at most).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping

from django.dispatch import receiver

from analysis import registry
# The meanings themselves (table_columns); the names below are also what the codebook's readers use.
from analysis.table_columns import (
    BOOLEAN, COLUMNS, COVERAGE, INTEGER, NUMBER, PARTICIPANTS, SCENARIOS, TEXT, TIME, TYPES, Column,
)
from surveys.definition import OUTSIDE_US, PREFER_NOT
from surveys.demographics import offered_answers
from surveys.models import DemographicQuestion
from surveys.questions import QUESTION_TYPES, question_types_changed

__all__ = [
    "BOOLEAN", "COLUMNS", "INTEGER", "NUMBER", "TABLE_COLUMNS", "TEXT", "TIME", "TYPES", "UNDESCRIBED", "Column",
    "codebook_rows", "column_entry", "demographic_column", "study_entries",
]


def _answer_files() -> dict[str, dict[str, Column]]:
    """The answer files of the registered question types (ratings.csv, free_text.csv, choices.csv ...), as
    their units describe them; a file's entries from several units together (ratings.csv: rating's and
    ranking's)."""
    files: dict[str, dict[str, Column]] = {}
    for kind in QUESTION_TYPES:
        for filename, entries in kind.codebook.items():
            files.setdefault(filename, {}).update((name, Column(*entry)) for name, entry in entries.items())
    return files


_ANSWER_FILES = _answer_files()


#: file -> its own columns, and the shared ones it gives another meaning: the files that are not result tables,
#: the question types' answer files, and each result table's as its registry entry carries them.
TABLE_COLUMNS: dict[str, dict[str, Column]] = {
    "participants.csv": PARTICIPANTS,
    "scenarios.csv": SCENARIOS,
    **_ANSWER_FILES,
    "coverage.csv": COVERAGE,
    **{analysis.filename: dict(analysis.columns) for analysis in registry.REGISTERED if analysis.columns},
}

# sensitivity_<table>.csv -> <table>.csv: a variant holds its base table's columns.
_BASE_FILE: dict[str, str] = {a.filename: registry.base_of(a).filename for a in registry.REGISTERED if a.sensitivity_of}
# The win table computed from each judge holds the win table's columns after the judge's.
_BASE_FILE["judge_win_table.csv"] = "win_table.csv"



@receiver(question_types_changed)
def _question_types_changed(**_: object) -> None:
    """A type registered later brings its answer files' entries (and a removed one takes them away)."""
    global _ANSWER_FILES
    for filename in _ANSWER_FILES:
        TABLE_COLUMNS.pop(filename, None)
    _ANSWER_FILES = _answer_files()
    TABLE_COLUMNS.update(_ANSWER_FILES)


#: The row of a column this codebook does not know (a table persisted by another version of the software).
UNDESCRIBED = Column("not described by this version of the codebook (the run was computed by another version of "
                     "the software)", TEXT, "as written")


_PREFER_NOT = "'Prefer not to answer'; blank = not answered"


def demographic_column(question: DemographicQuestion) -> Column:
    """The entry of one of the study's demographic questions (its column in participants.csv)."""
    meaning = f"answer to the study's question \"{question.prompt}\""
    if question.kind == DemographicQuestion.Kind.NUMBER:
        unit = "a whole number" if question.integer else "a number"
        return Column(meaning, NUMBER, f"{unit} from {question.min_value:g} to {question.max_value:g}, {_PREFER_NOT}")
    if question.kind == DemographicQuestion.Kind.TEXT:
        return Column(meaning, TEXT, f"free text of up to {question.max_length} characters; blank = not answered")
    listed = "; ".join(value for value, _ in offered_answers(question))
    if question.kind == DemographicQuestion.Kind.US_STATE:
        listed = f"USPS state code, '{OUTSIDE_US}', '{PREFER_NOT}'"
    return Column(meaning, TEXT, f"{listed}; blank = not answered")


def study_entries(questions: Iterable[DemographicQuestion]) -> dict[str, dict[str, Column]]:
    """The entries one study adds: a participants.csv column per demographic question."""
    return {"participants.csv": {q.key: demographic_column(q) for q in questions}}


def column_entry(filename: str, column: str, study: Mapping[str, Mapping[str, Column]] | None = None) -> Column | None:
    """The entry of ``column`` in ``filename``: the study's, the file's own, its base table's, then the shared one."""
    for entries in ((study or {}).get(filename, {}), TABLE_COLUMNS.get(filename, {}),
                    TABLE_COLUMNS.get(_BASE_FILE.get(filename, ""), {}), COLUMNS):
        if column in entries:
            return entries[column]
    return None


def codebook_rows(tables: dict[str, list[str]],
                  study: Mapping[str, Mapping[str, Column]] | None = None) -> Iterator[list[str]]:
    """One row per (file, column): file, column, meaning, type, allowed values (``study``: ``study_entries``)."""
    yield ["file", "column", "meaning", "type", "allowed_values"]
    for filename, columns in tables.items():
        for column in columns:
            meaning, kind, allowed = column_entry(filename, column, study) or UNDESCRIBED
            yield [filename, column, meaning, kind, allowed]
