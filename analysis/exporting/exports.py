"""CSV exports of DESIGN 3.3, written from persisted rows of the latest finished run.

Each export is a generator of rows (header first), so a streaming HTTP
response and the ``export`` command share the code. Add an export by adding
an ``Export`` to ``EXPORTS``.
"""

from __future__ import annotations

import csv
import io
import itertools
import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from django.db.models import QuerySet
from django.dispatch import receiver

from analysis import frames, registry
from analysis.design import Design, study_design
from analysis.models import AnalysisRun
from analysis.selectors import (
    analysis_run_latest_done, participant_results, result_table_frame,
    result_table_names, retained_participant_ids,
)
from surveys.coverage import COVERAGE_COLUMNS, block_coverage_rows
from surveys.models import DemographicQuestion, Scenario, Study
from surveys.questions import QUESTION_TYPES, AnswerFile, QuestionType, answer_exports, question_types_changed

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
# Rows of finished cells (``csv_cell`` applied): what ``csv.writer.writerows`` takes.
Batch = Iterable[Sequence[str]]


@dataclass(frozen=True)
class Export:
    filename: str
    batches: Callable[[AnalysisRun], Iterator[Batch]]  # the header alone first, then the rows (see export_batches)
    description: str


def from_rows(rows: Callable[[AnalysisRun], Rows]) -> Callable[[AnalysisRun], Iterator[Batch]]:
    """An export written row by row (a generator of rows of values, header first) as batches of cells."""

    def batches(run: AnalysisRun) -> Iterator[Batch]:
        values = rows(run)
        yield [[csv_cell(value) for value in next(values)]]
        while batch := [[csv_cell(value) for value in row] for row in itertools.islice(values, _ROWS_PER_BATCH)]:
            yield batch

    return batches


# Rows per batch: one streamed chunk of CSV (a few hundred kB).
_ROWS_PER_BATCH = 5000


# The study's demographic columns (one per question key) sit between these two.
PARTICIPANT_EXPORT_COLUMNS_BEFORE = ["participant_id", "started_at", "finished_at", "attention_passed"]
PARTICIPANT_EXPORT_COLUMNS_AFTER = [
    "region", "duration_minutes", "sd", "mae", "fast_share", "excluded_by", "payable", "reject_reason",
]


def participant_export_columns(design: Design) -> list[str]:
    """participants.csv's header for a study: the import columns, then ``region`` and the quality columns."""
    return PARTICIPANT_EXPORT_COLUMNS_BEFORE + list(design.demographics) + PARTICIPANT_EXPORT_COLUMNS_AFTER
IDENTIFIER_EXPORT_COLUMNS = ["participant_id", "external_id", "payable", "reject_reason", "completion_code"]


def participants_rows(run: AnalysisRun) -> Rows:
    design = study_design(run.study_id)
    yield participant_export_columns(design)
    # attention_passed as the analyses read it (analysis.derived, through the frame).
    attention = frames.participants_frame(run.study_id, design).set_index("participant_id")["attention_passed"]
    region_question = design.region_demographic
    for result in participant_results(run=run).iterator(chunk_size=2000):
        p = result.participant
        passed = attention.get(p.pseudonym, pd.NA)
        yield [
            p.pseudonym, p.started_at, p.finished_at, None if passed is pd.NA else bool(passed),
            *(p.demographics.get(key, "") for key in design.demographics),
            design.region_of(p.demographics.get(region_question)) if region_question else "",
            result.duration_minutes, result.sd, result.mae, result.fast_share,
            result.excluded_by, result.payable, result.reject_reason,
        ]


def identifiers_rows(run: AnalysisRun) -> Rows:
    yield IDENTIFIER_EXPORT_COLUMNS
    removed = Study.objects.filter(pk=run.study_id).values_list("identifiers_removed_at", flat=True).first()
    # After the retention time (surveys.retention) the panel ids are gone: each row says so, and when.
    removed_text = None if removed is None else f"removed {removed.strftime('%Y-%m-%dT%H:%M:%SZ')} (retention)"
    for result in participant_results(run=run).iterator(chunk_size=2000):
        p = result.participant
        yield [p.pseudonym, removed_text or p.external_id, result.payable, result.reject_reason, p.completion_code]


def table_rows(name: str) -> Callable[[AnalysisRun], Rows]:
    def rows(run: AnalysisRun) -> Rows:
        frame = result_table_frame(run=run, name=name)
        if frame is None:
            raise ExportUnavailable(f'run {run.pk} has no "{name}" table')
        yield list(frame.columns)
        for record in frame.itertuples(index=False):
            yield [None if value != value else value for value in record]  # NaN -> blank

    return rows


# 125 TIDE participants are 15,000 rows: a frame of a few MB, its reading and writing a few tens of MB.
# 250 took the exporting process to 308 MB at 1.2 M ratings (bench/bench_export.py, target <= 300 MB) once
# pandas 3 imported pyarrow; 125 gave 282-283 MB at the same speed (docs/api.md).
_PARTICIPANTS_PER_FRAME = 125


def csv_cells(column: pd.Series, *, whole: bool = False) -> np.ndarray:
    """``csv_cell`` of each value of ``column``, as an object array of str.

    Labels (categoricals), nullable booleans, integers and floats are
    formatted once per distinct value and gathered by code, so a column of a
    million cells costs a few numpy operations. ``whole``: a float column of
    whole numbers (NaN for none) written as integers. Other columns go value
    by value through ``csv_cell``.
    """
    values = column.array
    if isinstance(values, pd.arrays.BooleanArray):
        return _BOOLEAN_CELLS[values.to_numpy(dtype=np.int8, na_value=2)]
    if isinstance(values, pd.Categorical):
        return _gathered(values.codes, values.categories.tolist())
    array = column.to_numpy()
    if array.dtype.kind == "b":
        return _BOOLEAN_CELLS[array.astype(np.int8)]
    if array.dtype.kind in "iu":
        codes, distinct = pd.factorize(array)
        return _gathered(codes, distinct.tolist())
    if array.dtype.kind == "f":
        missing = np.isnan(array)
        if whole:
            codes, distinct = pd.factorize(np.where(missing, 0, array).astype(np.int64))
            distinct = distinct.tolist()
        else:
            # Factorized by bit pattern: -0.0 and 0.0 are written differently.
            codes, bits = pd.factorize(array.view(np.int64))
            distinct = bits.astype(np.int64).view(np.float64).tolist()
        return _gathered(np.where(missing, -1, codes), distinct)
    return np.array([csv_cell(value) for value in array.tolist()] or [], dtype=object)


# A nullable boolean's cells by code: False, True, NA.
_BOOLEAN_CELLS = np.array(["false", "true", ""], dtype=object)


def _gathered(codes: np.ndarray, distinct: list) -> np.ndarray:
    """``csv_cell`` of ``distinct[code]`` per code (-1: blank)."""
    cells = np.array([csv_cell(value) for value in distinct] + [""], dtype=object)
    return cells[codes]  # code -1 takes the trailing blank


SCENARIO_EXPORT_COLUMNS = ["scenario", "label", "user_input", "context"]


def scenarios_export_rows(run: AnalysisRun) -> Rows:
    """scenarios.csv: what each scenario showed above its responses, the conversation so far as JSON."""
    yield SCENARIO_EXPORT_COLUMNS
    scenarios = Scenario.objects.filter(study_id=run.study_id).order_by("id")
    for key, label, user_input, context in scenarios.values_list("key", "label", "user_input", "context"):
        yield [key, label, user_input, json.dumps(context, ensure_ascii=False)]


def coverage_rows(study: Study) -> Rows:
    """coverage.csv: judgements per block against r, as they stand now (surveys.coverage)."""
    yield COVERAGE_COLUMNS
    for row in block_coverage_rows(study):
        yield [row[name] for name in COVERAGE_COLUMNS]


EXPORTS: dict[str, Export] = {
    "participants": Export("participants.csv", from_rows(participants_rows),
                           "participants with quality metrics (pseudonyms)"),
    "identifiers": Export("identifiers.csv", from_rows(identifiers_rows), "panel ids for paying/rejecting (restricted)"),
}


def _answer_file_export(kind: QuestionType, answer_file: AnswerFile) -> Export:
    """An answer file a question type writes (ratings.csv, free_text.csv, choices.csv ...), for the run's
    retained participants: from the analyses' frame it names, or from the rows it gives."""
    if answer_file.frame:
        return Export(answer_file.filename, _frame_batches(kind, answer_file), answer_file.description)

    def rows(run: AnalysisRun) -> Rows:
        yield kind.answer_file_columns(answer_file.name, study=run.study)
        written = kind.answer_file_rows(answer_file.name, study_id=run.study_id,
                                        participant_ids=retained_participant_ids(run=run))
        yield from written.iterator(chunk_size=2000) if isinstance(written, QuerySet) else written

    return Export(answer_file.filename, from_rows(rows), answer_file.description)


def _frame_batches(kind: QuestionType, answer_file: AnswerFile) -> Callable[[AnalysisRun], Iterator[Batch]]:
    """An answer file written from one of the analyses' frames (``AnswerFile.frame``, ``frames.ANSWER_FRAMES``),
    in the frame's order, so its derived columns are the analyses' (``analysis.derived``).

    The frames come ``_PARTICIPANTS_PER_FRAME`` participants at a time, so
    memory stays flat however large the study, and their cells are written a
    column at a time (``csv_cells``): a million rows never pass through Python
    one by one until ``csv.writer`` joins them.
    """

    def batches(run: AnalysisRun) -> Iterator[Batch]:
        names = kind.answer_file_columns(answer_file.name, study=run.study)
        yield [names]
        for frame in frames.ANSWER_FRAMES[answer_file.frame](
                run.study_id, participants=retained_participant_ids(run=run), per_frame=_PARTICIPANTS_PER_FRAME):
            columns = [csv_cells(frame[name], whole=name in answer_file.whole_numbers) for name in names]
            for first in range(0, len(frame), _ROWS_PER_BATCH):
                yield zip(*(cells[first:first + _ROWS_PER_BATCH].tolist() for cells in columns))

    return batches


_TYPE_WRITTEN: set[str] = set()  # the export names added below, replaced when the registry changes


def _add_type_written_exports() -> None:
    for name in _TYPE_WRITTEN:
        EXPORTS.pop(name, None)
    _TYPE_WRITTEN.clear()
    for kind in QUESTION_TYPES:
        for answer_file in kind.answer_files:
            EXPORTS[answer_file.name] = _answer_file_export(kind, answer_file)
            _TYPE_WRITTEN.add(answer_file.name)


_add_type_written_exports()
EXPORTS.update({
    "scenarios": Export("scenarios.csv", from_rows(scenarios_export_rows),
                        "the scenarios: the person's message and the conversation before it"),
    "coverage": Export("coverage.csv", from_rows(lambda run: coverage_rows(run.study)),
                       "judgements per block against the r each needs, as they stand at the download "
                       "(studies that allocate blocks)"),
})
# Every result table of the registry, exported under its own name (win_table.csv, ttests.csv, ...).
for _analysis in registry.REGISTERED:
    EXPORTS[_analysis.name.replace("_", "-")] = Export(_analysis.filename, from_rows(table_rows(_analysis.name)),
                                                       _analysis.description)



def result_exports_of(run: AnalysisRun) -> list[str]:
    """The export names of every table the run persisted (the exclusion flow included)."""
    present = set(result_table_names(run=run))
    return [name for name, export in EXPORTS.items()
            if export.filename.removesuffix(".csv") in present]


def exports_of(run: AnalysisRun) -> list[str]:
    """The pseudonymous exports of the run, as the exports page, the API and the zip list them: participants,
    the answer exports of the study (ratings first: every study has them), the scenarios, then the run's result
    tables."""
    coverage = ["coverage"] if run.study.allocates else []
    return ["participants", *answer_exports(run.study), "scenarios", *coverage, *result_exports_of(run)]


# Exports that hold only pseudonymous data (everything but identifiers).
PSEUDONYMOUS_EXPORTS = [name for name in EXPORTS if name != "identifiers"]


@receiver(question_types_changed)
def _question_types_changed(**_: Any) -> None:
    """A type registered later brings the answer files it writes."""
    global PSEUDONYMOUS_EXPORTS
    _add_type_written_exports()
    PSEUDONYMOUS_EXPORTS = [name for name in EXPORTS if name != "identifiers"]


def export_run(*, study: Study) -> AnalysisRun:
    run = analysis_run_latest_done(study=study)
    if run is None:
        raise ExportUnavailable(
            f'study "{study.slug}" has no finished analysis run; run "manage.py run_analysis --study {study.slug}"'
        )
    return run


def export_csv(*, run: AnalysisRun, what: str) -> tuple[list[str], Iterator[Batch]]:
    """One export's header and its rows as batches of CSV-safe cells.

    Raises ``ExportUnavailable`` here, before a byte is written, when the run lacks the export.
    """
    batches = EXPORTS[what].batches(run)
    (header,) = next(batches)
    return list(header), batches


def export_write(*, study: Study, what: str, out_dir: Path) -> Path:
    """Write one export of the latest finished run into ``out_dir``; returns the file path."""
    run = export_run(study=study)
    header, batches = export_csv(run=run, what=what)  # raises ExportUnavailable before a file is created
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / EXPORTS[what].filename
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        for batch in batches:
            writer.writerows(batch)
    return path


class _Sink:
    """A write-only buffer that a generator drains after each write."""

    def __init__(self) -> None:
        self.chunks: list[bytes] = []

    def write(self, data) -> int:
        self.chunks.append(data.encode("utf-8") if isinstance(data, str) else bytes(data))
        return len(data)

    def flush(self) -> None:
        pass

    def drain(self) -> bytes:
        out, self.chunks = b"".join(self.chunks), []
        return out


# Excel on Windows reads a CSV as the local code page unless it starts with this mark.
UTF8_BOM = "\ufeff".encode("utf-8")


def csv_bytes(lines: Iterable[Sequence[str]], *, rows_per_chunk: int = 2000, excel: bool = False) -> Iterator[bytes]:
    """Encode CSV rows lazily, a chunk of rows at a time (for streaming responses).

    ``excel`` starts the bytes with the UTF-8 byte order mark, so that Excel shows
    non-ASCII text (accents, Chinese) as it is.
    """
    return csv_batch_bytes(row_batches(lines, rows_per_batch=rows_per_chunk), excel=excel)


def csv_batch_bytes(batches: Iterable[Batch], *, excel: bool = False) -> Iterator[bytes]:
    """Encode batches of CSV rows lazily, one chunk of bytes per batch (``excel``: as ``csv_bytes``)."""
    if excel:
        yield UTF8_BOM
    # A StringIO, not a _Sink: csv.writer writes each row with its own call to write().
    text = io.StringIO()
    writer = csv.writer(text)
    for batch in batches:
        writer.writerows(batch)
        yield text.getvalue().encode("utf-8")
        text.seek(0)
        text.truncate()


def row_batches(rows: Iterable[Sequence[str]], *, rows_per_batch: int = _ROWS_PER_BATCH) -> Iterator[Batch]:
    """Rows as batches of ``rows_per_batch`` rows."""
    rows = iter(rows)
    while batch := list(itertools.islice(rows, rows_per_batch)):
        yield batch


def everything_zip(*, run: AnalysisRun) -> Iterator[bytes]:
    """Every pseudonymous export of the run plus a codebook and a README, as a zip streamed chunk by chunk."""
    import zipfile

    from analysis.exporting.codebook import codebook_rows, study_entries
    from analysis.exporting.zip_readme import zip_readme_text

    sink = _Sink()
    headers: dict[str, list[str]] = {}
    descriptions: dict[str, str] = {}
    with zipfile.ZipFile(sink, mode="w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name in exports_of(run):
            header, batches = export_csv(run=run, what=name)
            filename = EXPORTS[name].filename
            headers[filename] = header
            descriptions[filename] = EXPORTS[name].description
            with archive.open(filename, mode="w", force_zip64=True) as member:
                for chunk in csv_batch_bytes(itertools.chain([[header]], batches)):
                    member.write(chunk)
                    yield sink.drain()
        questions = DemographicQuestion.objects.filter(study_id=run.study_id)
        # The study's own words (a demographic choice such as "=1+1") reach the codebook's cells too.
        codebook = ([csv_cell(cell) for cell in row] for row in codebook_rows(headers, study_entries(questions)))
        archive.writestr("codebook.csv", b"".join(csv_bytes(codebook)))
        archive.writestr("README.txt", zip_readme_text(run=run, files=descriptions))
    yield sink.drain()
