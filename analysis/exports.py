"""CSV exports of DESIGN 3.3, written from persisted rows of the latest finished run.

Each export is a generator of rows (header first), so a streaming HTTP
response and the ``export`` command share the code. Add an export by adding
an ``Export`` to ``EXPORTS``.
"""

from __future__ import annotations

import csv
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from django.db.models import Count, Q

from analysis.models import AnalysisRun
from analysis.regions import region_of
from analysis.selectors import analysis_run_latest_done, participant_results, result_table_frame
from surveys.models import Participant, Study

# A spreadsheet runs a cell starting with these as a formula (CSV injection).
_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


class ExportUnavailable(Exception):
    """Nothing to export yet (no finished run, or the run lacks the table)."""


def csv_cell(value: Any) -> str:
    """One CSV cell: blank for None/NaN, true/false, ISO times, and text that
    could start a formula prefixed with a single quote.

    Numbers are written as numbers (a negative number is not a formula).
    """
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return "" if value != value else repr(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, datetime):
        return value.isoformat()
    text = str(value)
    return "'" + text if text.startswith(_FORMULA_STARTS) else text


Rows = Iterator[list[Any]]


@dataclass(frozen=True)
class Export:
    filename: str
    rows: Callable[[AnalysisRun], Rows]  # header row first
    description: str


PARTICIPANT_EXPORT_COLUMNS = [
    "participant_id", "started_at", "finished_at", "attention_passed", "age", "sex", "gender", "race",
    "hispanic", "education", "employment", "state", "region", "duration_minutes", "sd", "mae", "fast_share",
    "excluded_by", "payable", "reject_reason",
]
IDENTIFIER_EXPORT_COLUMNS = ["participant_id", "external_id", "payable", "reject_reason", "completion_code"]


def _attention_passed(participant: Participant, checks: int, failures: int) -> bool | None:
    # Same reading as analysis.frames.participants_frame.
    if participant.source == Participant.Source.IMPORT:
        return participant.imported_attention_passed
    return None if checks == 0 else failures == 0


def participants_rows(run: AnalysisRun) -> Rows:
    yield PARTICIPANT_EXPORT_COLUMNS
    results = participant_results(run=run).annotate(
        n_checks=Count(
            "participant__visits",
            filter=Q(participant__visits__attention_check__isnull=False, participant__visits__attention_passed__isnull=False),
        ),
        n_failures=Count("participant__visits", filter=Q(participant__visits__attention_passed=False)),
    )
    for result in results.iterator(chunk_size=2000):
        p = result.participant
        yield [
            p.pseudonym, p.started_at, p.finished_at, _attention_passed(p, result.n_checks, result.n_failures),
            p.age, p.sex, p.gender, p.race, p.hispanic, p.education, p.employment, p.state, region_of(p.state),
            result.duration_minutes, result.sd, result.mae, result.fast_share,
            result.excluded_by, result.payable, result.reject_reason,
        ]


def identifiers_rows(run: AnalysisRun) -> Rows:
    yield IDENTIFIER_EXPORT_COLUMNS
    for result in participant_results(run=run).iterator(chunk_size=2000):
        p = result.participant
        yield [p.pseudonym, p.external_id, result.payable, result.reject_reason, p.completion_code]


def table_rows(name: str) -> Callable[[AnalysisRun], Rows]:
    def rows(run: AnalysisRun) -> Rows:
        frame = result_table_frame(run=run, name=name)
        if frame is None:
            raise ExportUnavailable(f'run {run.pk} has no "{name}" table')
        yield list(frame.columns)
        for record in frame.itertuples(index=False):
            yield [None if value != value else value for value in record]  # NaN -> blank

    return rows


EXPORTS: dict[str, Export] = {
    "participants": Export("participants.csv", participants_rows, "participants with quality metrics (pseudonyms)"),
    "filter-flow": Export("filter_flow.csv", table_rows("filter_flow"), "the exclusion flow"),
    "filter-flow-by-gender": Export(
        "filter_flow_by_gender.csv", table_rows("filter_flow_by_gender"), "the exclusion flow per gender"
    ),
    "identifiers": Export("identifiers.csv", identifiers_rows, "panel ids for paying/rejecting (restricted)"),
}


def export_run(*, study: Study) -> AnalysisRun:
    run = analysis_run_latest_done(study=study)
    if run is None:
        raise ExportUnavailable(
            f'study "{study.slug}" has no finished analysis run; run "manage.py run_analysis --study {study.slug}"'
        )
    return run


def export_lines(*, run: AnalysisRun, what: str) -> Iterator[list[str]]:
    """The rows of one export as CSV-safe strings, header first."""
    export = EXPORTS[what]
    for row in export.rows(run):
        yield [csv_cell(value) for value in row]


def export_write(*, study: Study, what: str, out_dir: Path) -> Path:
    """Write one export of the latest finished run into ``out_dir``; returns the file path."""
    run = export_run(study=study)
    lines = export_lines(run=run, what=what)
    header = next(lines)  # raises ExportUnavailable before a file is created
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / EXPORTS[what].filename
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows(lines)
    return path
