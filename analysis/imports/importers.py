"""Import of responses collected elsewhere, and of gold scores (DESIGN 3.1).

Both services validate the whole upload first and raise ``ImportProblems``
listing every problem as ``file:line:column: message`` (line counts the
header as line 1); only a clean upload is written, in one transaction, so a
single bad row imports nothing. Re-importing the same files changes nothing:
participants are matched by their external id and those already imported are
skipped (their rows are still validated, not compared; docs/quality.md).

Reading ratings.csv works on integer-coded columns (``analysis.imports.csv_columns``,
times through ``analysis.imports.iso_times``) and every check runs over whole columns;
the write is one bulk write per table (``analysis.imports.import_writer``).
"""

from __future__ import annotations

import csv
import io
import math
import os
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import IO, Any

import numpy as np
import pandas as pd
from django import forms
from django.db import transaction

from analysis.imports import import_writer
from analysis.imports.import_writer import ParsedParticipant
from analysis.imports.csv_columns import (
    NUL_MESSAGE, Column, NotText, Upload, columns_exact, columns_fast, pack, parse_times,
)
from analysis.imports.iso_times import parse_time
from analysis.models import GoldScore
from surveys import limits
from surveys.demographics import imported_answer
from surveys.models import Block, Item, Participant, Study

# Then one column per demographic question of the study, named by its key (DESIGN 3.1).
PARTICIPANT_CSV_COLUMNS = ["participant_id", "started_at", "finished_at", "attention_passed"]
RATING_CSV_COLUMNS = [
    "participant_id", "block_id", "response_id", "position", "rating", "rank",
    "block_started_at", "block_submitted_at",
]
OPTIONAL_RATING_CSV_COLUMNS = ["dimension"]
GOLD_CSV_COLUMNS = ["response_id", "gold_score"]

_TRUE_WORDS = {"true", "1", "yes", "y", "t"}
_FALSE_WORDS = {"false", "0", "no", "n", "f"}
_MAX_PROBLEMS = 1000

class ImportProblems(Exception):
    """Everything wrong with an upload, one ``file:line:column: message`` per entry."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__("\n".join(problems))


def _counted(n: int, noun: str) -> str:
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


@dataclass(frozen=True)
class ImportReport:
    participants_created: int
    participants_skipped: int
    visits_created: int
    placements_created: int
    ratings_created: int
    seconds: float

    @property
    def summary(self) -> str:
        """One sentence for a person (the import page)."""
        skipped = f" ({self.participants_skipped:,} imported before, skipped)" if self.participants_skipped else ""
        return (
            f"Imported {_counted(self.participants_created, 'participant')}{skipped}: "
            f"{_counted(self.visits_created, 'block')}, {_counted(self.placements_created, 'response')} shown "
            f"and {_counted(self.ratings_created, 'rating')}, in {self.seconds:.1f} s."
        )


@dataclass(frozen=True)
class GoldImportReport:
    scores_written: int
    scores_unchanged: int

    @property
    def summary(self) -> str:
        """One sentence for a person (the import page)."""
        return (f"Imported gold scores: {_counted(self.scores_written, 'score')} written, "
                f"{self.scores_unchanged:,} unchanged.")


# ---------------------------------------------------------------- reading


class _Problems:
    def __init__(self) -> None:
        self.items: list[str] = []

    def add(self, file: str, line: int, column: str, message: str) -> None:
        if len(self.items) < _MAX_PROBLEMS:
            self.items.append(f"{file}:{line}:{column}: {message}")
        elif len(self.items) == _MAX_PROBLEMS:
            self.items.append(f"{file}:{line}:{column}: ... more problems not listed")

    def raise_if_any(self) -> None:
        if self.items:
            raise ImportProblems(self.items)


def _file_name(file: IO, default: str) -> str:
    name = getattr(file, "name", None)
    return os.path.basename(name) if isinstance(name, str) and name else default


def _header(reader, name: str, required: list[str], optional: list[str], problems: _Problems) -> list[str] | None:
    """The normalized header row; None (with problems reported) when it is unusable."""
    try:
        header = [cell.strip().lstrip("\ufeff").lower() for cell in next(reader)]
    except StopIteration:
        problems.add(name, 1, "", "the file is empty; expected a header row")
        return None
    except csv.Error as exc:
        problems.add(name, 1, "", f"cannot read the header: {exc}")
        return None
    if any("\0" in column for column in header):
        problems.add(name, 1, "", f"the header {NUL_MESSAGE}")
        return None
    usable = True
    for column in required:
        if column not in header:
            problems.add(name, 1, column, "missing column")
            usable = False
    for column in header:
        if column not in required and column not in optional:
            problems.add(name, 1, column or "(blank)", f"unknown column; expected {', '.join(required + optional)}")
            usable = False
    if len(set(header)) != len(header):
        problems.add(name, 1, "", "a column name is repeated")
        usable = False
    return header if usable else None


def _upload(file: IO, name: str, problems: _Problems) -> Upload | None:
    """The upload, or None (with the problem reported once, on its line) when it is not UTF-8 text."""
    try:
        return Upload(file)
    except NotText as exc:
        problems.add(name, exc.line, exc.column, exc.message)
        return None


def _rows(file: IO, name: str, required: list[str], optional: list[str],
          problems: _Problems) -> tuple[list[str], Iterator[tuple[int, list[str]]]] | None:
    """The header and (line, stripped cells) records; None when the file or its header is unusable.
    A record with a NUL in a cell is reported and left out."""
    upload = _upload(file, name, problems)
    if upload is None:
        return None
    reader = csv.reader(io.StringIO(upload.text, newline=""))
    header = _header(reader, name, required, optional, problems)
    if header is None:
        return None

    def records() -> Iterator[tuple[int, list[str]]]:
        try:
            for cells in reader:
                if not cells or (len(cells) == 1 and not cells[0].strip()):
                    continue
                line = reader.line_num
                if len(cells) != len(header):
                    problems.add(name, line, "", f"expected {len(header)} fields, found {len(cells)}")
                    continue
                if upload.has_nul and (nul := [k for k, cell in enumerate(cells) if "\0" in cell]):
                    for k in nul:
                        problems.add(name, line, header[k], NUL_MESSAGE)
                    continue
                yield line, [cell.strip() for cell in cells]
        except csv.Error as exc:
            problems.add(name, reader.line_num, "", f"cannot read the file: {exc}")

    return header, records()


def parse_bool(value: str) -> bool | None:
    word = value.lower()
    if word == "":
        return None
    if word in _TRUE_WORDS:
        return True
    if word in _FALSE_WORDS:
        return False
    raise ValueError(f'"{value}" is not a boolean; use true or false (or leave it empty)')


def _read_participants(file: IO, name: str, study: Study, problems: _Problems) -> dict[str, ParsedParticipant] | None:
    """Participants by external id (None for one whose row has problems); None when the file is unusable."""
    parsed: dict[str, ParsedParticipant] = {}
    questions = list(study.demographic_questions.all())
    table = _rows(file, name, PARTICIPANT_CSV_COLUMNS + [q.key for q in questions], [], problems)
    if table is None:
        return None
    header, records = table
    col = {c: header.index(c) for c in header}
    asked = questions
    for line, cells in records:
        def bad(column: str, message: str) -> None:
            problems.add(name, line, column, message)

        external_id = cells[col["participant_id"]]
        if not external_id:
            bad("participant_id", "empty participant id")
            continue
        if len(external_id) > limits.EXTERNAL_ID:
            bad("participant_id", f"longer than {limits.EXTERNAL_ID} characters")
            continue
        if external_id in parsed:
            bad("participant_id", f'"{external_id}" is listed twice (first on line {parsed[external_id].line})')
            continue
        ok = True
        times: dict[str, datetime | None] = {}
        for column in ("started_at", "finished_at"):
            value = cells[col[column]]
            if value == "" and column == "finished_at":
                times[column] = None
                continue
            try:
                times[column] = parse_time(value)
            except ValueError:
                bad(column, f'"{value}" is not an ISO 8601 time' if value else "empty; a start time is required")
                ok = False
        if ok and times["finished_at"] is not None and times["finished_at"] < times["started_at"]:
            bad("finished_at", "before started_at")
            ok = False
        try:
            attention = parse_bool(cells[col["attention_passed"]])
        except ValueError as exc:
            bad("attention_passed", str(exc))
            ok = False
        demographics = {}
        for question in asked:
            try:
                demographics[question.key] = imported_answer(question, cells[col[question.key]])
            except ValueError as exc:
                bad(question.key, str(exc))
                ok = False
        if ok:
            parsed[external_id] = ParsedParticipant(
                line, external_id, times["started_at"], times["finished_at"], attention, demographics
            )
        else:
            # Still known, so its rating rows are not also reported as unknown.
            parsed.setdefault(external_id, None)  # type: ignore[arg-type]
    return parsed


class _StudyIndex:
    """The study's blocks, items and dimensions by key, read once."""

    def __init__(self, study: Study):
        self.block_ids = dict(Block.objects.filter(study=study).values_list("key", "id"))
        self.items = {
            key: (item_id, block_id)
            for key, item_id, block_id in Item.objects.filter(study=study).values_list("key", "id", "block_id")
        }
        self.dimensions = {d.key: d for d in study.dimensions.all()}


_INTEGER = re.compile(r"[+-]?\d+")


class _RowErrors:
    """Problems of ratings.csv rows; a row that failed one check is left out of the later ones."""

    def __init__(self, lines: np.ndarray, participant_ids: Column):
        self.lines = lines
        self.participant_ids = participant_ids
        self.ok = np.ones(len(lines), dtype=bool)
        self.found: list[tuple[int, str, str]] = []
        self._passed: np.ndarray | None = None

    def fail(self, mask: Any, column: str, message: Callable[[int], str] | str) -> None:
        hit = np.flatnonzero(np.asarray(mask, dtype=bool) & self.ok)
        for i in hit[: _MAX_PROBLEMS + 1]:
            self.found.append((int(self.lines[i]), column, message if isinstance(message, str) else message(i)))
        self.drop(hit)

    def drop(self, rows: np.ndarray) -> None:
        """Leave ``rows`` out of the later checks."""
        if len(rows):
            self.ok[rows] = False
            self._passed = None

    def passed(self) -> np.ndarray:
        """The rows that passed every check so far (the same array until one more fails)."""
        if self._passed is None:
            self._passed = np.flatnonzero(self.ok)
        return self._passed

    def broken_participants(self) -> np.ndarray:
        """Per participant id (code of ``participant_ids``): has any of its rows failed?"""
        broken = np.zeros(len(self.participant_ids.texts), dtype=bool)
        broken[self.participant_ids.codes[~self.ok]] = True
        return broken


def _lookup(texts: Column, convert: Callable[[str], float]) -> np.ndarray:
    """``convert`` applied to each distinct text once, spread over the rows."""
    return np.array([convert(text) for text in texts.texts], dtype=float)[texts.codes]


def _mapped(texts: Column, mapping: dict[str, int]) -> np.ndarray:
    return _lookup(texts, lambda text: mapping.get(text, np.nan))


def _whole_number(text: str) -> float:
    return float(int(text)) if _INTEGER.fullmatch(text) else np.nan


def _integers(texts: Column) -> np.ndarray:
    """Whole numbers as floats; NaN where the text is not one (empty included)."""
    return _lookup(texts, _whole_number)




def _ratings_columns(file: IO, name: str,
                     problems: _Problems) -> tuple[list[str], np.ndarray, dict[str, Column], bool] | None:
    """The header, the line number of every record, each column of stripped texts, and whether
    some cell may hold a NUL."""
    upload = _upload(file, name, problems)
    if upload is None:
        return None
    header = _header(csv.reader(upload.lines()), name, RATING_CSV_COLUMNS, OPTIONAL_RATING_CSV_COLUMNS, problems)
    if header is None:
        return None
    fast = columns_fast(upload, header)
    lines, col = fast if fast is not None else columns_exact(upload.text, header, name, problems)
    return header, lines, col, upload.has_nul


def _holds_nul(texts: Column) -> np.ndarray:
    """Per row: does the cell hold a NUL? (Asked only of a file that has one somewhere.)"""
    return np.array(["\0" in text for text in texts.texts], dtype=bool)[texts.codes]


def _read_ratings(
    file: IO, name: str, study: Study, participants: dict[str, ParsedParticipant] | None, problems: _Problems
) -> pd.DataFrame:
    """The valid rows of ratings.csv as a frame; every problem goes to ``problems``.

    Checks run column-wise over the whole file (a file may hold millions of
    rows), in the order a reader would: row by row first, then within a
    participant's block (times, repeated responses, positions, ranks).
    ``external`` and ``block_key`` come as categoricals of the texts.
    """
    read = _ratings_columns(file, name, problems)
    if read is None:
        return _no_ratings()
    header, lines, col, has_nul = read
    index = _StudyIndex(study)
    if "dimension" not in header and len(index.dimensions) > 1:
        problems.add(name, 1, "dimension", f"missing column; the study rates {', '.join(index.dimensions)}")
        return _no_ratings()
    pid, block_key, response = col["participant_id"], col["block_id"], col["response_id"]
    errors = _RowErrors(lines, pid)

    if has_nul:
        for column in header:
            errors.fail(_holds_nul(col[column]), column, NUL_MESSAGE)
    if participants is not None:  # else the participants file was unreadable, and said so once
        errors.fail(np.isnan(_mapped(pid, dict.fromkeys(participants, 1))), "participant_id",
                    lambda i: f'unknown participant "{pid[i]}" (not in the participants file)')
    block_id = _mapped(block_key, index.block_ids)
    errors.fail(np.isnan(block_id), "block_id", lambda i: f'unknown block "{block_key[i]}"')
    item_id = _mapped(response, {k: v[0] for k, v in index.items.items()})
    item_block = _mapped(response, {k: v[1] for k, v in index.items.items()})
    errors.fail(np.isnan(item_id), "response_id", lambda i: f'unknown response "{response[i]}"')
    errors.fail(item_block != block_id, "response_id",
                lambda i: f'response "{response[i]}" is not in block "{block_key[i]}"')

    position = _integers(col["position"])
    errors.fail(~(position >= 1), "position", lambda i: f'"{col["position"][i]}" is not a position (1, 2, ...)')
    rank = _integers(col["rank"])
    errors.fail(~col["rank"].is_("") & ~(rank >= 1), "rank",
                lambda i: f'"{col["rank"][i]}" is not a rank (1 = first) or empty')
    started = parse_times(col["block_started_at"])
    errors.fail(np.isnan(started), "block_started_at",
                lambda i: f'"{col["block_started_at"][i]}" is not an ISO 8601 time')
    submitted = parse_times(col["block_submitted_at"])
    is_submitted = ~col["block_submitted_at"].is_("")
    errors.fail(is_submitted & np.isnan(submitted), "block_submitted_at",
                lambda i: f'"{col["block_submitted_at"][i]}" is not an ISO 8601 time')
    errors.fail(submitted < started, "block_submitted_at", "before block_started_at")

    dimension_id, dimension_key = _dimensions_of_rows(col, index, errors)
    value = _integers(col["rating"])
    _check_rating_values(col["rating"], value, dimension_id, is_submitted, index, errors)

    submitted = np.where(is_submitted, submitted, -1.0)
    keys = _Keys(pid, block_id=block_id, item_id=item_id, dimension_id=dimension_id, position=position)
    rated = _Rated(pid, block_key, response, position, rank, value, started, submitted, keys)
    _check_within_blocks(rated, "dimension" in header, errors)
    _check_ranks(rated, errors)
    for line, column, message in sorted(errors.found):
        problems.add(name, line, column, message)
    kept = np.flatnonzero(errors.ok)
    frame = pd.DataFrame(
        {
            "external": pid.categorical(pid.codes[kept]), "block_key": block_key.categorical(block_key.codes[kept]),
            "block_id": block_id[kept], "item_id": item_id[kept], "position": position[kept], "rank": rank[kept],
            "dimension_id": dimension_id[kept], "value": value[kept], "started": started[kept],
            "submitted": submitted[kept], "line": lines[kept], "row": kept,
        },
        index=kept,
        copy=False,  # the columns are fresh arrays: no need to stack them into blocks
    )
    return frame.assign(started_at=frame["started"], submitted_at=frame["submitted"])


def _no_ratings() -> pd.DataFrame:
    return pd.DataFrame(columns=["external", "block_key", "block_id", "item_id", "position", "rank",
                                 "dimension_id", "value", "started", "submitted", "line", "row"])


def _dimensions_of_rows(col: dict[str, Column], index: _StudyIndex, errors: _RowErrors) -> tuple[np.ndarray, Any]:
    ids = {key: d.pk for key, d in index.dimensions.items()}
    if "dimension" not in col:
        only = next(iter(ids.values())) if ids else np.nan
        return np.full(len(errors.lines), only, dtype=float), None
    keys = col["dimension"]
    dimension_id = _mapped(keys, ids)
    listed = ", ".join(ids)
    empty = keys.is_("")
    errors.fail(~empty & np.isnan(dimension_id), "dimension",
                lambda i: f'unknown dimension "{keys[i]}"; use one of {listed}')
    if len(ids) > 1:
        errors.fail(empty, "dimension", f"empty; use one of {listed}")
    elif ids:
        dimension_id = np.where(empty, next(iter(ids.values())), dimension_id)
    return dimension_id, keys


def _check_rating_values(texts: Column, value: np.ndarray, dimension_id: np.ndarray, is_submitted: np.ndarray,
                         index: _StudyIndex, errors: _RowErrors) -> None:
    by_id = {d.pk: d for d in index.dimensions.values()}
    given = ~texts.is_("")
    if not by_id:
        errors.fail(given, "rating", "the study has no rating scale; leave it empty")
        return
    errors.fail(given & np.isnan(value), "rating", lambda i: f'"{texts[i]}" is not a whole number')
    # Per distinct dimension id (a handful), then spread over the rows.
    codes, ids = pd.factorize(dimension_id, use_na_sentinel=False)
    scales = [by_id.get(d) for d in ids]
    low = np.array([np.nan if s is None else s.scale_min for s in scales], dtype=float)[codes]
    high = np.array([np.nan if s is None else s.scale_max for s in scales], dtype=float)[codes]

    def outside(i: int) -> str:
        d = by_id[int(dimension_id[i])]
        return f"{int(value[i])} is outside the {d.key} scale {d.scale_min}-{d.scale_max}"

    errors.fail(given & ((value < low) | (value > high)), "rating", outside)
    errors.fail(~given & is_submitted, "rating", "empty, but the block was submitted")


class _Keys:
    """The grouping columns of all rows as integer codes, made once (NaN a value of its own, as in
    ``duplicated``), so that groups and duplicates within a subset of rows come from packed integers."""

    def __init__(self, external: Column, **columns: np.ndarray):
        self.columns = columns
        self.codes: dict[str, tuple[np.ndarray, int]] = {"external": (external.codes, len(external.texts))}
        self._groups: dict[tuple[str, ...], tuple[np.ndarray, tuple[np.ndarray, int]]] = {}
        self._firsts: dict[tuple[str, ...], tuple[np.ndarray, np.ndarray]] = {}

    def _codes(self, name: str) -> tuple[np.ndarray, int]:
        if name not in self.codes:
            codes, distinct = pd.factorize(self.columns[name], use_na_sentinel=False)
            self.codes[name] = (codes, len(distinct))
        return self.codes[name]

    def groups(self, rows: np.ndarray, *names: str) -> tuple[np.ndarray, int]:
        """Per row of ``rows``: a code in [0, span) of its ``names`` values, and the span.
        Asked again for the same ``rows`` array (no row failed in between), the same answer."""
        cached = self._groups.get(names)
        if cached is None or cached[0] is not rows:
            cached = self._groups[names] = (rows, self._pack(rows, names))
        return cached[1]

    def first_of_group(self, rows: np.ndarray, *names: str) -> np.ndarray:
        """Per row of ``rows``: the index (into ``rows``) of the first row with its ``names`` values."""
        cached = self._firsts.get(names)
        if cached is None or cached[0] is not rows:
            cached = self._firsts[names] = (rows, _first_of_group(*self.groups(rows, *names)))
        return cached[1]

    def duplicated(self, rows: np.ndarray, *names: str) -> np.ndarray:
        """``duplicated()`` over ``names`` within ``rows``: True on every row but the first of its values."""
        return self.first_of_group(rows, *names) != np.arange(len(rows))

    def _pack(self, rows: np.ndarray, names: tuple[str, ...]) -> tuple[np.ndarray, int]:
        codes, span = self._codes(names[0])
        codes = _at(codes, rows)
        for name in names[1:]:
            more, more_span = self._codes(name)
            codes, span = pack(codes, span, _at(more, rows), more_span)
        return codes, span


def _at(values: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """``values[rows]`` for ``rows`` of the whole file (ascending, distinct): while every row has
    passed they are all of them, and ``values`` itself will do (no copy)."""
    return values if len(rows) == len(values) else values[rows]


def _first_of_group(codes: np.ndarray, span: int) -> np.ndarray:
    """Per row: the first row with its code (the row where its group starts)."""
    first = np.full(span, len(codes), dtype=np.int64)
    np.minimum.at(first, codes, np.arange(len(codes)))
    return first[codes]


def _duplicated(codes: np.ndarray, span: int) -> np.ndarray:
    """``duplicated()``: True on every row but the first with its code."""
    return _first_of_group(codes, span) != np.arange(len(codes))


def _first_valid(values: np.ndarray, codes: np.ndarray, span: int) -> np.ndarray:
    """Per row: the first non-NaN value with its code, NaN if none (``transform("first")``)."""
    valid = np.flatnonzero(~np.isnan(values))
    first = np.full(span, len(values), dtype=np.int64)
    np.minimum.at(first, codes[valid], valid)
    return np.append(values, np.nan)[first[codes]]


@dataclass(frozen=True)
class _Rated:
    """What the block checks read, per row of the file (valid or not)."""

    pid: Column
    block_key: Column
    response: Column
    position: np.ndarray
    rank: np.ndarray
    value: np.ndarray
    started: np.ndarray
    submitted: np.ndarray  # -1 where the block was not submitted
    keys: _Keys


def _check_within_blocks(rated: _Rated, has_dimension_column: bool, errors: _RowErrors) -> None:
    """Same times on every row of a block; each response once (per dimension); positions unique.

    Each check reads the rows that passed every check before it. Their
    started, submitted and position are never NaN, so a group's first value is
    its first row's.
    """
    keys, lines = rated.keys, errors.lines
    rows = errors.passed()
    first = rows[keys.first_of_group(rows, "external", "block_id")]
    differs = (_at(rated.started, rows) != rated.started[first]) | (_at(rated.submitted, rows) != rated.submitted[first])
    errors.fail(_mask(rows, differs, errors), "block_started_at",
                lambda i: f"the block times differ from line {lines[first[np.searchsorted(rows, i)]]} of the same block")

    rows = errors.passed()
    twice = keys.duplicated(rows, "external", "item_id")
    if has_dimension_column:
        twice = keys.duplicated(rows, "external", "item_id", "dimension_id") | (np.isnan(_at(rated.value, rows)) & twice)
    errors.fail(_mask(rows, twice, errors), "response_id",
                lambda i: f'response "{rated.response[i]}" is listed twice for this participant')

    rows = errors.passed()
    first = rows[keys.first_of_group(rows, "external", "item_id")]
    rank = _at(rated.rank, rows)
    first_rank = _first_valid(rank, *keys.groups(rows, "external", "item_id"))
    differs = (_at(rated.position, rows) != rated.position[first]) | (
        np.where(np.isnan(rank), -1, rank) != np.where(np.isnan(first_rank), -1, first_rank))
    errors.fail(_mask(rows, differs, errors), "position",
                lambda i: f"position or rank differs from line {lines[first[np.searchsorted(rows, i)]]} for the same response")

    rows = errors.passed()
    placements = rows[~keys.duplicated(rows, "external", "item_id")]  # a response's first row
    reused = keys.duplicated(placements, "external", "block_id", "position")
    errors.fail(_mask(placements, reused, errors), "position",
                lambda i: f"position {int(rated.position[i])} is used twice in block {rated.block_key[i]}")


def _mask(rows: np.ndarray, flags: Any, errors: _RowErrors) -> np.ndarray:
    """A mask over all file rows from flags over a subset of them (``rows`` = their row numbers)."""
    mask = np.zeros(len(errors.ok), dtype=bool)
    mask[rows[np.asarray(flags, dtype=bool)]] = True
    return mask


def _check_ranks(rated: _Rated, errors: _RowErrors) -> None:
    """Within a participant's block the ranks are all empty or each of 1..n once."""
    broken = errors.broken_participants()
    rows = errors.passed()
    placements = rows[~rated.keys.duplicated(rows, "external", "item_id")]
    placements = placements[~broken[rated.pid.codes[placements]]]
    codes, span = rated.keys.groups(placements, "external", "block_id")
    rank = rated.rank[placements]
    bad = _bad_rankings(codes, span, rank)
    if not bad.any():
        return
    member = np.flatnonzero(bad[codes])
    member = member[np.argsort(codes[member], kind="stable")]  # by block, in file order within each
    for members in np.split(member, np.flatnonzero(np.diff(codes[member])) + 1):
        shown = ", ".join("" if np.isnan(r) else str(int(r)) for r in rank[members])
        first = placements[members[0]]
        errors.found.append((
            int(errors.lines[first]), "rank",
            f"ranks in block {rated.block_key[first]} of participant {rated.pid[first]} are [{shown}]; "
            f"expected each of 1-{len(members)} once",
        ))
        errors.drop(placements[members])


def _bad_rankings(codes: np.ndarray, span: int, rank: np.ndarray) -> np.ndarray:
    """Per code: ranks given to some of its rows but not all, or not each of 1..n once."""
    valid = ~np.isnan(rank)
    n = np.bincount(codes, minlength=span)
    ranked = np.bincount(codes[valid], minlength=span)
    low = np.full(span, np.inf)
    np.minimum.at(low, codes[valid], rank[valid])
    high = np.full(span, -np.inf)
    np.maximum.at(high, codes[valid], rank[valid])
    rank_codes, ranks = pd.factorize(rank[valid])
    pairs = pack(codes[valid], span, rank_codes, len(ranks))
    distinct = np.bincount(codes[valid][~_duplicated(*pairs)], minlength=span)
    full = ranked == n
    bad = ((ranked > 0) & ~full) | (full & ((low != 1) | (high != n) | (distinct != n)))
    return bad & (n > 0)


# ---------------------------------------------------------------- the services


def responses_import(*, study: Study, participants_file: IO, ratings_file: IO) -> ImportReport:
    """Validate and import participants.csv + ratings.csv (DESIGN 3.1) into ``study``.

    Raises ``ImportProblems`` (nothing written) when any row is invalid.
    """
    began = time.perf_counter()
    problems = _Problems()
    participants_name = _file_name(participants_file, "participants.csv")
    read = _read_participants(participants_file, participants_name, study, problems)
    rows = _read_ratings(ratings_file, _file_name(ratings_file, "ratings.csv"), study, read, problems)
    participants = read or {}
    # Only valid ids reach the query (a NUL, refused above, is a DataError on PostgreSQL).
    valid = [external_id for external_id, parsed in participants.items() if parsed is not None]
    existing = dict(
        Participant.objects.filter(study=study, external_id__in=valid).values_list("external_id", "source")
    )
    for external_id, source in existing.items():
        if source != Participant.Source.IMPORT and participants.get(external_id) is not None:
            problems.add(participants_name, participants[external_id].line, "participant_id",
                         f'"{external_id}" already took part in the survey itself')
    problems.raise_if_any()
    new = [p for external_id, p in participants.items() if external_id not in existing]
    with transaction.atomic():
        # Locking the study keeps its content (blocks, items, dimensions) as validated until commit.
        Study.objects.select_for_update().filter(pk=study.pk).first()
        import_writer.skip_foreign_key_triggers()
        visits, placements, ratings = import_writer.write(study, new, rows)
    if new:
        import_writer.refresh_planner_statistics()
    return ImportReport(
        participants_created=len(new),
        participants_skipped=len(participants) - len(new),
        visits_created=visits,
        placements_created=placements,
        ratings_created=ratings,
        seconds=round(time.perf_counter() - began, 3),
    )


def gold_import(*, study: Study, gold_file: IO) -> GoldImportReport:
    """Validate and write gold.csv (``response_id, gold_score``); existing scores are replaced."""
    problems = _Problems()
    name = _file_name(gold_file, "gold.csv")
    items = dict(Item.objects.filter(study=study).values_list("key", "id"))
    scores: dict[int, float] = {}
    seen: dict[str, int] = {}
    table = _rows(gold_file, name, GOLD_CSV_COLUMNS, [], problems)
    if table is not None:
        header, records = table
        c_resp, c_score = header.index("response_id"), header.index("gold_score")
        for line, cells in records:
            key, text = cells[c_resp], cells[c_score]
            if key not in items:
                problems.add(name, line, "response_id", f'unknown response "{key}"')
                continue
            if key in seen:
                problems.add(name, line, "response_id", f'"{key}" is listed twice (first on line {seen[key]})')
                continue
            seen[key] = line
            try:
                score = float(text)
                if not math.isfinite(score):
                    raise ValueError
            except ValueError:
                problems.add(name, line, "gold_score", f'"{text}" is not a number')
                continue
            scores[items[key]] = score
    problems.raise_if_any()
    current = dict(GoldScore.objects.filter(item_id__in=list(scores)).values_list("item_id", "score"))
    changed = [GoldScore(item_id=item_id, score=score) for item_id, score in scores.items() if current.get(item_id) != score]
    with transaction.atomic():
        GoldScore.objects.bulk_create(
            changed, update_conflicts=True, unique_fields=["item"], update_fields=["score", "updated_at"], batch_size=1000
        )
    return GoldImportReport(scores_written=len(changed), scores_unchanged=len(scores) - len(changed))


@dataclass(frozen=True)
class ImportKind:
    """An upload the import page takes besides responses and gold scores, registered by the app that owns it
    (judges/ registers "judgements"), so analysis never imports that app."""

    #: The form's ``kind`` value; the page's context names the form ``<name>_form``.
    name: str
    form: type[forms.Form]
    #: (study, the form's cleaned data) -> the import's report; raises ``ImportProblems``.
    run: Callable[[Study, dict[str, Any]], Any]


#: The registered kinds, by name.
IMPORT_KINDS: dict[str, ImportKind] = {}


def import_kind_register(kind: ImportKind) -> ImportKind:
    IMPORT_KINDS[kind.name] = kind
    return kind
