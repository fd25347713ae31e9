"""README.txt of the "everything for the paper" zip: what the zip is, what each
file holds, and how to read the cells."""

from __future__ import annotations

import textwrap
from collections.abc import Mapping
from datetime import timezone

from analysis.models import AnalysisRun
from surveys.models import QUALITY_FIELDS

README = "README.txt"
CODEBOOK = "codebook.csv"

# The zip's own files, which are not exports.
_OWN_FILES = {
    CODEBOOK: "every column of every file: meaning, type (text, integer, number, boolean, ISO 8601 time) and "
              "allowed values or range",
    README: "this file",
}

#: What each quality threshold a run copies means (the keys of surveys.models.QUALITY_FIELDS).
THRESHOLD_MEANINGS = {
    "duration_min_minutes": "duration rule: shortest total time kept, in minutes",
    "duration_max_minutes": "duration rule: longest total time kept, in minutes",
    "fast_block_seconds": "speed rule: a block submitted in less than this many seconds is fast",
    "fast_share_max": "speed rule: largest share of fast blocks kept",
    "straightline_sd_max": "straight-lining rule: flags an SD of the ratings below this, with a high MAE",
    "straightline_mae_min": "straight-lining rule: flags a mean absolute error against gold above this, with a low SD",
    "attention_failures_allowed": "attention rule: failed attention checks allowed",
}

_WIDTH = 100

_READING = (
    "participant_id is a pseudonym: an HMAC of the panel's participant id with a secret key of the study. A "
    "participant has the same pseudonym in every file of this zip, so the files can be joined on it, but it cannot "
    "be turned back into the panel id without the key. Panel ids are not in this zip.",
    "A blank cell means no value: not answered, not applicable, or not computable. In a result table the note "
    "column says why a value is missing; a table with nothing to compute (say, rankings in a study without "
    "ranking) has one row of blanks whose note says why.",
    "A text cell that would begin with = + - @ (or a tab or carriage return) is written with a leading ' so that a "
    "spreadsheet does not run it as a formula: drop that first ' to get the original text. Numbers are written as "
    "numbers (a negative number gets no ').",
    "Booleans are written true / false; times are ISO 8601 with their UTC offset.",
    f"{CODEBOOK} describes every column of every file of this zip: one row per file and column, with its meaning, "
    "its type and its allowed values or range.",
)


def zip_readme_text(*, run: AnalysisRun, files: Mapping[str, str]) -> str:
    """The README of the zip of ``run`` holding the data files ``files`` (file name -> its one-line description).

    The codebook and this README are listed after them.
    """
    described = {**files, **{name: _OWN_FILES[name] for name in (CODEBOOK, README)}}
    sections = (_run_lines(run), ["Files", "-----", *_file_lines(described)],
                ["Reading the files", "-----------------", *_reading_lines()])
    return "\n\n".join("\n".join(lines) for lines in sections) + "\n"


def _wrapped(text: str, first: str = "", rest: str = "") -> list[str]:
    return textwrap.wrap(text, width=_WIDTH, initial_indent=first, subsequent_indent=rest)


def _run_lines(run: AnalysisRun) -> list[str]:
    study = run.study
    finished = run.finished_at.astimezone(timezone.utc).isoformat(timespec="seconds") if run.finished_at else "-"
    lines = [f'Everything for the paper: study "{study.slug}", analysis run {run.pk}', ""]
    lines += _wrapped(
        f"Study: {study.title}. Run {run.pk} finished at {finished}. Of the {run.n_participants} participants "
        f"enrolled, {run.n_retained} were retained by the quality rules. The result tables are computed on the "
        "retained participants (the sensitivity_* tables also on those excluded only by the straight-lining rule); "
        "participants.csv lists everyone, with the rule that excluded them in excluded_by."
    )
    lines += ["", "Quality thresholds of this run:"]
    width = max((len(key) for key in run.thresholds), default=0)
    value_width = max((len(str(value)) for value in run.thresholds.values()), default=0)
    # In the rules' own order: a JSON column's key order differs between databases (PostgreSQL's jsonb
    # sorts keys), and the same run restored elsewhere (surveys.backup) must give the same README.
    ordered = sorted(run.thresholds.items(),
                     key=lambda kv: (QUALITY_FIELDS.index(kv[0]) if kv[0] in QUALITY_FIELDS else len(QUALITY_FIELDS), kv[0]))
    for key, value in ordered:
        meaning = THRESHOLD_MEANINGS.get(key)
        lines.append(f"  {key.ljust(width)} = {str(value).ljust(value_width)}  {meaning or ''}".rstrip())
    if run.failures:
        lines += ["", "Analyses that failed in this run (their tables are not in this zip):"]
        lines += [f"  {name}: {error}" for name, error in sorted(run.failures.items())]
    return lines


def _file_lines(described: Mapping[str, str]) -> list[str]:
    width = max(len(name) for name in described)
    lines = []
    for name, description in described.items():
        first, *rest = textwrap.wrap(description, width=_WIDTH - width - 4) or [""]
        lines.append(f"  {name.ljust(width)}  {first}".rstrip())
        lines += [f"  {' ' * width}  {more}" for more in rest]
    return lines


def _reading_lines() -> list[str]:
    return [line for paragraph in _READING for line in _wrapped(paragraph, "* ", "  ")]
