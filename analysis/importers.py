"""Import of responses collected elsewhere, and of gold scores (DESIGN 3.1).

Both services validate the whole upload first and raise ``ImportProblems``
listing every problem as ``file:line:column: message`` (line counts the
header as line 1); only a clean upload is written, in one transaction, so a
single bad row imports nothing. Re-importing the same files changes nothing:
participants are matched by their external id and those already imported are
skipped (their rows are still validated, not compared; docs/quality.md).

Writes are bulk: ids are read into dicts once, rows are built as tuples, and
on PostgreSQL they go in with ``COPY`` (1.2 million ratings in seconds).
"""

from __future__ import annotations

import csv
import io
import itertools
import math
import os
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import IO, Any

import numpy as np
import pandas as pd
from django.db import DatabaseError, connection, transaction
from django.db.models import Max, Model

from analysis import pgcopy
from analysis.models import GoldScore
from surveys.definition import OUTSIDE_US, PREFER_NOT
from surveys.models import Block, BlockVisit, Item, ItemPlacement, Participant, Rating, Study
from surveys.pseudonyms import pseudonym_for

PARTICIPANT_CSV_COLUMNS = [
    "participant_id", "started_at", "finished_at", "attention_passed",
    "age", "sex", "gender", "race", "hispanic", "education", "employment", "state",
]
RATING_CSV_COLUMNS = [
    "participant_id", "block_id", "response_id", "position", "rating", "rank",
    "block_started_at", "block_submitted_at",
]
OPTIONAL_RATING_CSV_COLUMNS = ["dimension"]
GOLD_CSV_COLUMNS = ["response_id", "gold_score"]
DEMOGRAPHIC_COLUMNS = ["age", "sex", "gender", "race", "hispanic", "education", "employment", "state"]

_TRUE_WORDS = {"true", "1", "yes", "y", "t"}
_FALSE_WORDS = {"false", "0", "no", "n", "f"}
_MAX_PROBLEMS = 1000

# Common wordings of other survey tools, mapped onto the TIDE demographics
# table; used only when the target wording is one of the study's choices.
_ANY_QUESTION_SYNONYMS = {
    "prefer not to say": PREFER_NOT, "rather not say": PREFER_NOT, "decline to answer": PREFER_NOT,
    "other": "Other/Unknown", "unknown": "Other/Unknown",
}
_SYNONYMS: dict[str, dict[str, str]] = {
    "gender": {"female": "Woman", "f": "Woman", "woman": "Woman", "male": "Man", "m": "Man", "man": "Man",
               "nonbinary": "Non-binary", "non binary": "Non-binary"},
    "sex": {"f": "Female", "m": "Male", "woman": "Female", "man": "Male"},
    "race": {"white": "White or Caucasian", "caucasian": "White or Caucasian",
             "black": "Black or African American", "african american": "Black or African American",
             "multiple": "Multiracial", "two or more races": "Multiracial"},
    "hispanic": {"y": "Yes", "n": "No", "true": "Yes", "false": "No"},
    "education": {"high school": "High school diploma or less", "some college": "Some college, no degree",
                  "associate": "Associate degree", "associates": "Associate degree",
                  "bachelor": "Bachelor's degree", "bachelors": "Bachelor's degree",
                  "graduate degree": "Graduate or professional degree",
                  "postgraduate": "Graduate or professional degree"},
    "employment": {"full-time": "Employed full-time", "full time": "Employed full-time",
                   "part-time": "Employed part-time", "part time": "Employed part-time"},
    "state": {"outside us": OUTSIDE_US, "outside the usa": OUTSIDE_US, "non-us": OUTSIDE_US},
}


class ImportProblems(Exception):
    """Everything wrong with an upload, one ``file:line:column: message`` per entry."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__("\n".join(problems))


@dataclass(frozen=True)
class ImportReport:
    participants_created: int
    participants_skipped: int
    visits_created: int
    placements_created: int
    ratings_created: int
    seconds: float


@dataclass(frozen=True)
class GoldImportReport:
    scores_written: int
    scores_unchanged: int


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


def _text(file: IO) -> IO[str]:
    """A text view of an upload, binary or text; utf-8 with or without BOM."""
    if isinstance(file, io.TextIOBase):
        return file
    if hasattr(file, "read") and isinstance(file.read(0), bytes):
        return io.TextIOWrapper(file, encoding="utf-8-sig", newline="")
    return file


def _header(reader, name: str, required: list[str], optional: list[str], problems: _Problems) -> list[str] | None:
    """The normalized header row; None (with problems reported) when it is unusable."""
    try:
        header = [cell.strip().lstrip("\ufeff").lower() for cell in next(reader)]
    except StopIteration:
        problems.add(name, 1, "", "the file is empty; expected a header row")
        return None
    except (csv.Error, UnicodeDecodeError) as exc:
        problems.add(name, 1, "", f"cannot read the header: {exc}")
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


def _rows(file: IO, name: str, required: list[str], optional: list[str],
          problems: _Problems) -> tuple[list[str], Iterator[tuple[int, list[str]]]] | None:
    """The header and (line, stripped cells) records; None when the header is unusable."""
    reader = csv.reader(_text(file))
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
                yield line, [cell.strip() for cell in cells]
        except (csv.Error, UnicodeDecodeError) as exc:
            problems.add(name, reader.line_num, "", f"cannot read the file: {exc}")

    return header, records()


def parse_time(value: str) -> datetime:
    """ISO 8601; a time without an offset is taken as UTC."""
    parsed = datetime.fromisoformat(value)
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=timezone.utc)


def parse_bool(value: str) -> bool | None:
    word = value.lower()
    if word == "":
        return None
    if word in _TRUE_WORDS:
        return True
    if word in _FALSE_WORDS:
        return False
    raise ValueError(f'"{value}" is not a boolean; use true or false (or leave it empty)')


def _normalized(text: str) -> str:
    text = text.replace("\u2019", "'").replace("\u2013", "-").replace("\u2014", "-")
    return " ".join(text.casefold().split()).rstrip(".")


class DemographicNormalizer:
    """Maps free wording onto the study's choices for each demographic question."""

    def __init__(self, study: Study):
        self.choices: dict[str, list[str]] = {
            q.key: list(q.choices) for q in study.demographic_questions.all()
        }
        self.lookup: dict[str, dict[str, str]] = {}
        for key, choices in self.choices.items():
            table = {_normalized(c): c for c in choices}
            for synonyms in (_ANY_QUESTION_SYNONYMS, _SYNONYMS.get(key, {})):
                for word, target in synonyms.items():
                    if target in choices:
                        table.setdefault(_normalized(word), target)
            self.lookup[key] = table
        self.age_bands = [(band, _band_bounds(band)) for band in self.choices.get("age", [])]

    def normalize(self, key: str, value: str) -> str:
        if value == "":
            return ""
        if key not in self.choices:
            raise ValueError(f"the study does not ask about {key}; leave the column empty")
        found = self.lookup[key].get(_normalized(value))
        if found is not None:
            return found
        if key == "age":
            return self._age_band(value)
        if key == "state":
            raise ValueError(f'"{value}" is not a USPS state code (e.g. CA, NY, DC), "{OUTSIDE_US}" or "{PREFER_NOT}"')
        raise ValueError(f'"{value}" is not one of: {"; ".join(self.choices[key])}')

    def _age_band(self, value: str) -> str:
        try:
            age = float(value)
        except ValueError:
            raise ValueError(f'"{value}" is neither an age nor one of: {"; ".join(self.choices["age"])}') from None
        for band, bounds in self.age_bands:
            if bounds and bounds[0] <= age <= bounds[1]:
                return band
        raise ValueError(f"age {value} is in none of the bands {', '.join(self.choices['age'])}")


def _band_bounds(band: str) -> tuple[float, float] | None:
    """ "18-29" -> (18, 29.999), "70+" -> (70, inf); None for a non-numeric choice."""
    text = band.replace("\u2013", "-").replace(" ", "")
    if match := re.fullmatch(r"(\d+)-(\d+)", text):
        return float(match[1]), float(match[2]) + 0.999
    if match := re.fullmatch(r"(\d+)\+", text):
        return float(match[1]), math.inf
    return None


@dataclass
class _ParsedParticipant:
    line: int
    external_id: str
    started_at: datetime
    finished_at: datetime | None
    attention_passed: bool | None
    demographics: dict[str, str]


def _read_participants(file: IO, name: str, study: Study, problems: _Problems) -> dict[str, _ParsedParticipant]:
    parsed: dict[str, _ParsedParticipant] = {}
    table = _rows(file, name, PARTICIPANT_CSV_COLUMNS, [], problems)
    if table is None:
        return parsed
    header, records = table
    col = {c: header.index(c) for c in header}
    normalizer = DemographicNormalizer(study)
    for line, cells in records:
        def bad(column: str, message: str) -> None:
            problems.add(name, line, column, message)

        external_id = cells[col["participant_id"]]
        if not external_id:
            bad("participant_id", "empty participant id")
            continue
        if len(external_id) > 128:
            bad("participant_id", "longer than 128 characters")
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
        for key in DEMOGRAPHIC_COLUMNS:
            try:
                demographics[key] = normalizer.normalize(key, cells[col[key]])
            except ValueError as exc:
                bad(key, str(exc))
                ok = False
        if ok:
            parsed[external_id] = _ParsedParticipant(
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


_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_INTEGER = re.compile(r"[+-]?\d+")


class _RowErrors:
    """Problems of ratings.csv rows; a row that failed one check is left out of the later ones."""

    def __init__(self, lines: np.ndarray, participant_ids: np.ndarray):
        self.lines = lines
        self.participant_ids = participant_ids
        self.ok = np.ones(len(lines), dtype=bool)
        self.found: list[tuple[int, str, str]] = []

    def fail(self, mask: Any, column: str, message: Callable[[int], str] | str) -> None:
        hit = np.flatnonzero(np.asarray(mask, dtype=bool) & self.ok)
        for i in hit[: _MAX_PROBLEMS + 1]:
            self.found.append((int(self.lines[i]), column, message if isinstance(message, str) else message(i)))
        self.ok[hit] = False

    @property
    def broken_participants(self) -> set[str]:
        return set(self.participant_ids[~self.ok])


def _lookup(texts: np.ndarray, convert: Callable[[str], float]) -> np.ndarray:
    """``convert`` applied to each distinct text once (a file repeats the same few ids and times)."""
    codes, distinct = pd.factorize(texts)
    values = np.array([convert(text) for text in distinct] + [np.nan], dtype=float)
    return values[codes]  # code -1 (none) takes the trailing NaN


def _mapped(texts: np.ndarray, mapping: dict[str, int]) -> np.ndarray:
    return _lookup(texts, lambda text: mapping.get(text, np.nan))


def _whole_number(text: str) -> float:
    return float(int(text)) if _INTEGER.fullmatch(text) else np.nan


def _integers(texts: np.ndarray) -> np.ndarray:
    """Whole numbers as floats; NaN where the text is not one (empty included)."""
    return _lookup(texts, _whole_number)


def _parse_times(texts: np.ndarray) -> np.ndarray:
    """Microseconds since the epoch per cell (NaN when empty or unparseable)."""
    def micros(text: str) -> float:
        try:
            return float((parse_time(text) - _EPOCH) // timedelta(microseconds=1))
        except ValueError:
            return np.nan

    return _lookup(texts, micros)


def _ratings_columns(file: IO, name: str, problems: _Problems) -> tuple[list[str], np.ndarray, dict[str, np.ndarray]] | None:
    """The header, the line number of every record and each column as an array of stripped texts."""
    content = _text(file).read()
    header = _header(csv.reader(io.StringIO(content)), name, RATING_CSV_COLUMNS, OPTIONAL_RATING_CSV_COLUMNS, problems)
    if header is None:
        return None
    fast = _columns_fast(content, header)
    return (header, *fast) if fast is not None else (header, *_columns_exact(content, header, name, problems))


def _columns_fast(content: str, header: list[str]) -> tuple[np.ndarray, dict[str, np.ndarray]] | None:
    """pandas' C reader for the common file: no quoting, one record per line, every line the
    right number of fields (checked by counting commas). None sends the file to the exact reader."""
    content = content.replace("\r\n", "\n")
    if '"' in content or "\r" in content:
        return None
    body = content.split("\n")[1:]
    if body and body[-1] == "":
        body.pop()
    separators = len(header) - 1
    if any(line.count(",") != separators for line in body if line.strip()):
        return None
    frame = pd.read_csv(io.StringIO(content), dtype=str, na_filter=False, skip_blank_lines=False,
                        engine="c", header=0, names=header)
    if len(frame) != len(body):
        return None
    lines = np.arange(2, len(frame) + 2, dtype=np.int64)
    blank = (frame == "").all(axis=1).to_numpy()
    padded = " " in content or "\t" in content  # stripping costs a Python call per cell: only when needed
    return lines[~blank], {
        column: (frame[column].str.strip() if padded else frame[column]).to_numpy(dtype=object)[~blank]
        for column in header
    }


def _columns_exact(content: str, header: list[str], name: str, problems: _Problems) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """The csv module, record by record: exact line numbers and field-count problems."""
    reader = csv.reader(io.StringIO(content))
    next(reader)
    width = len(header)
    lines: list[int] = []
    records: list[list[str]] = []
    try:
        for cells in reader:
            if len(cells) != width:
                if cells and any(cell.strip() for cell in cells):
                    problems.add(name, reader.line_num, "", f"expected {width} fields, found {len(cells)}")
                continue
            records.append(cells)
            lines.append(reader.line_num)
    except csv.Error as exc:
        problems.add(name, reader.line_num, "", f"cannot read the file: {exc}")
    columns = list(zip(*records)) if records else [()] * width
    return np.array(lines, dtype=np.int64), {
        column: np.array([cell.strip() for cell in values], dtype=object) for column, values in zip(header, columns)
    }


def _read_ratings(
    file: IO, name: str, study: Study, participants: dict[str, _ParsedParticipant], problems: _Problems
) -> pd.DataFrame:
    """The valid rows of ratings.csv as a frame; every problem goes to ``problems``.

    Checks run column-wise over the whole file (a file may hold millions of
    rows), in the order a reader would: row by row first, then within a
    participant's block (times, repeated responses, positions, ranks).
    """
    read = _ratings_columns(file, name, problems)
    if read is None:
        return _no_ratings()
    header, lines, col = read
    index = _StudyIndex(study)
    if "dimension" not in header and len(index.dimensions) > 1:
        problems.add(name, 1, "dimension", f"missing column; the study rates {', '.join(index.dimensions)}")
        return _no_ratings()
    pid, block_key, response = col["participant_id"], col["block_id"], col["response_id"]
    errors = _RowErrors(lines, pid)

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
    errors.fail((col["rank"] != "") & ~(rank >= 1), "rank",
                lambda i: f'"{col["rank"][i]}" is not a rank (1 = most empathetic) or empty')
    started = _parse_times(col["block_started_at"])
    errors.fail(np.isnan(started), "block_started_at",
                lambda i: f'"{col["block_started_at"][i]}" is not an ISO 8601 time')
    submitted = _parse_times(col["block_submitted_at"])
    is_submitted = col["block_submitted_at"] != ""
    errors.fail(is_submitted & np.isnan(submitted), "block_submitted_at",
                lambda i: f'"{col["block_submitted_at"][i]}" is not an ISO 8601 time')
    errors.fail(submitted < started, "block_submitted_at", "before block_started_at")

    dimension_id, dimension_key = _dimensions_of_rows(col, index, errors)
    _check_rating_values(col["rating"], dimension_id, is_submitted, index, errors)

    frame = pd.DataFrame(
        {
            "external": pid, "block_key": block_key, "block_id": block_id, "item_id": item_id,
            "position": position, "rank": rank, "dimension_id": dimension_id, "value": _integers(col["rating"]),
            "started": started, "submitted": np.where(is_submitted, submitted, -1.0), "line": lines,
            "row": np.arange(len(lines)),
        }
    )
    frame = _check_within_blocks(frame[errors.ok], "dimension" in header, response, errors)
    frame = frame[errors.ok[frame["row"].to_numpy()]]
    _check_ranks(frame, errors)
    for line, column, message in sorted(errors.found):
        problems.add(name, line, column, message)
    frame = frame[errors.ok[frame["row"].to_numpy()]]
    return frame.assign(started_at=frame["started"], submitted_at=frame["submitted"])


def _no_ratings() -> pd.DataFrame:
    return pd.DataFrame(columns=["external", "block_key", "block_id", "item_id", "position", "rank",
                                 "dimension_id", "value", "started", "submitted", "line", "row"])


def _dimensions_of_rows(col: dict[str, np.ndarray], index: _StudyIndex, errors: _RowErrors) -> tuple[np.ndarray, Any]:
    ids = {key: d.pk for key, d in index.dimensions.items()}
    if "dimension" not in col:
        only = next(iter(ids.values())) if ids else np.nan
        return np.full(len(errors.lines), only, dtype=float), None
    keys = col["dimension"]
    dimension_id = pd.Series(keys).map(ids).to_numpy(dtype=float)
    listed = ", ".join(ids)
    errors.fail((keys != "") & np.isnan(dimension_id), "dimension",
                lambda i: f'unknown dimension "{keys[i]}"; use one of {listed}')
    if len(ids) > 1:
        errors.fail(keys == "", "dimension", f"empty; use one of {listed}")
    elif ids:
        dimension_id = np.where(keys == "", next(iter(ids.values())), dimension_id)
    return dimension_id, keys


def _check_rating_values(texts: np.ndarray, dimension_id: np.ndarray, is_submitted: np.ndarray,
                         index: _StudyIndex, errors: _RowErrors) -> None:
    by_id = {d.pk: d for d in index.dimensions.values()}
    value = _integers(texts)
    given = texts != ""
    if not by_id:
        errors.fail(given, "rating", "the study has no rating scale; leave it empty")
        return
    errors.fail(given & np.isnan(value), "rating", lambda i: f'"{texts[i]}" is not a whole number')
    low = pd.Series(dimension_id).map({k: d.scale_min for k, d in by_id.items()}).to_numpy(dtype=float)
    high = pd.Series(dimension_id).map({k: d.scale_max for k, d in by_id.items()}).to_numpy(dtype=float)

    def outside(i: int) -> str:
        d = by_id[int(dimension_id[i])]
        return f"{int(value[i])} is outside the {d.key} scale {d.scale_min}-{d.scale_max}"

    errors.fail(given & ((value < low) | (value > high)), "rating", outside)
    errors.fail(~given & is_submitted, "rating", "empty, but the block was submitted")


def _check_within_blocks(frame: pd.DataFrame, has_dimension_column: bool, response: np.ndarray,
                         errors: _RowErrors) -> pd.DataFrame:
    """Same times on every row of a block; each response once (per dimension); positions unique."""
    block = frame.groupby(["external", "block_id"], sort=False)
    first = block[["started", "submitted", "line"]].transform("first")
    differs = (frame["started"] != first["started"]) | (frame["submitted"] != first["submitted"])
    first_line = first["line"].to_numpy()
    rows = frame["row"].to_numpy()
    errors.fail(_mask(rows, differs, errors), "block_started_at",
                lambda i: f"the block times differ from line {first_line[np.searchsorted(rows, i)]} of the same block")
    frame = frame[errors.ok[rows]]
    rows = frame["row"].to_numpy()

    twice = frame.duplicated(["external", "item_id", "dimension_id"] if has_dimension_column else ["external", "item_id"])
    if has_dimension_column:
        twice |= frame["value"].isna() & frame.duplicated(["external", "item_id"])
    errors.fail(_mask(rows, twice, errors), "response_id",
                lambda i: f'response "{response[i]}" is listed twice for this participant')
    frame = frame[errors.ok[rows]]
    rows = frame["row"].to_numpy()

    placement = frame.groupby(["external", "item_id"], sort=False)
    first = placement[["position", "rank", "line"]].transform("first")
    differs = (frame["position"] != first["position"]) | (frame["rank"].fillna(-1) != first["rank"].fillna(-1))
    first_line = first["line"].to_numpy()
    errors.fail(_mask(rows, differs, errors), "position",
                lambda i: f"position or rank differs from line {first_line[np.searchsorted(rows, i)]} for the same response")
    frame = frame[errors.ok[rows]]
    rows = frame["row"].to_numpy()

    placements = frame.drop_duplicates(["external", "item_id"])
    reused = placements.duplicated(["external", "block_id", "position"])
    positions = frame["position"].to_numpy()
    blocks = frame["block_key"].to_numpy()
    errors.fail(_mask(rows, frame.index.isin(reused.index[reused.to_numpy()]), errors), "position",
                lambda i: f"position {int(positions[np.searchsorted(rows, i)])} is used twice in block "
                          f"{blocks[np.searchsorted(rows, i)]}")
    return frame


def _mask(rows: np.ndarray, flags: pd.Series, errors: _RowErrors) -> np.ndarray:
    """A mask over all file rows from flags over a subset of them (``rows`` = their row numbers)."""
    mask = np.zeros(len(errors.ok), dtype=bool)
    mask[rows[np.asarray(flags, dtype=bool)]] = True
    return mask


def _check_ranks(frame: pd.DataFrame, errors: _RowErrors) -> None:
    """Within a participant's block the ranks are all empty or each of 1..n once."""
    broken = errors.broken_participants
    placements = frame.drop_duplicates(["external", "item_id"])
    placements = placements[~placements["external"].isin(broken)]
    grouped = placements.groupby(["external", "block_id"], sort=False)["rank"]
    summary = pd.DataFrame({
        "n": grouped.size(), "ranked": grouped.count(), "low": grouped.min(), "high": grouped.max(),
        "distinct": grouped.nunique(),
    })
    full = summary["ranked"] == summary["n"]
    bad = ((summary["ranked"] > 0) & ~full) | (
        full & ((summary["low"] != 1) | (summary["high"] != summary["n"]) | (summary["distinct"] != summary["n"]))
    )
    for external_id, block_id in summary.index[bad.to_numpy()]:
        rows = placements[(placements["external"] == external_id) & (placements["block_id"] == block_id)]
        shown = ", ".join("" if np.isnan(r) else str(int(r)) for r in rows["rank"])
        first = rows.iloc[0]
        errors.found.append((
            int(first["line"]), "rank",
            f"ranks in block {first['block_key']} of participant {external_id} are [{shown}]; "
            f"expected each of 1-{len(rows)} once",
        ))
        errors.ok[rows["row"].to_numpy()] = False


# ---------------------------------------------------------------- writing


def _utc_times(micros: Any) -> pd.Series:
    """Microseconds since the epoch as UTC datetimes; NaN and negative values (no time) become NaT."""
    micros = pd.Series(np.asarray(micros, dtype=float))
    return pd.to_datetime(micros.where(micros >= 0), unit="us", utc=True)


def _sqlite_values(series: pd.Series) -> list:
    """Plain Python values for SQLite's executemany; None for missing, naive UTC text for times."""
    if isinstance(series.dtype, pd.DatetimeTZDtype):
        text = series.dt.tz_convert("UTC").dt.strftime("%Y-%m-%d %H:%M:%S.%f")
        return text.astype(object).where(series.notna(), None).tolist()
    if not pd.api.types.is_numeric_dtype(series.dtype) or pd.api.types.is_bool_dtype(series.dtype):
        return [None if v is None or v is pd.NA or v != v else v for v in series.tolist()]
    if series.isna().any():
        return [None if pd.isna(v) else int(v) for v in series.tolist()]
    return series.astype(np.int64).tolist()


def _insert_rows(model: type[Model], frame: pd.DataFrame) -> None:
    """Insert the rows of ``frame`` (columns named after model fields) into ``model``'s table.

    PostgreSQL: one binary COPY built with numpy (``analysis.pgcopy``).
    Elsewhere: executemany in batches.
    """
    if not len(frame):
        return
    if connection.vendor == "postgresql":
        pgcopy.copy_frame_in(model, frame)
        return
    names = [model._meta.get_field(f).column for f in frame.columns]
    table = connection.ops.quote_name(model._meta.db_table)
    quoted = ", ".join(connection.ops.quote_name(c) for c in names)
    sql = f"INSERT INTO {table} ({quoted}) VALUES ({', '.join(['%s'] * len(names))})"
    rows = zip(*(_sqlite_values(frame[c]) for c in frame.columns))
    with connection.cursor() as cursor:
        batch = list(itertools.islice(rows, 10000))
        while batch:
            cursor.executemany(sql, batch)
            batch = list(itertools.islice(rows, 10000))


def _new_ids(model: type[Model], count: int) -> np.ndarray:
    """Ids for ``count`` new rows of ``model``, so rows that reference them can be built before writing.

    PostgreSQL: taken from the table's sequence. SQLite: the IMMEDIATE
    transaction holds the write lock, so the ids after the current maximum
    are ours.
    """
    if connection.vendor == "postgresql":
        return pgcopy.reserve_ids(model, count)
    start = (model.objects.aggregate(top=Max("id"))["top"] or 0) + 1
    return np.arange(start, start + count, dtype=np.int64)


def _with_field_defaults(model: type[Model], frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` plus every other concrete field of ``model`` at its default (bulk writes skip ``save``)."""
    missing = {}
    for field in model._meta.concrete_fields:
        if field.primary_key or field.name in frame.columns:
            continue
        if field.has_default() and callable(field.default):
            raise TypeError(f"{model.__name__}.{field.name} has a per-row default; give it a column")
        missing[field.name] = field.get_default()
    return frame.assign(**missing)


def _participant_rows(study: Study, new: list[_ParsedParticipant], rows: pd.DataFrame) -> pd.DataFrame:
    """The Participant rows of an import (ids included), one per new participant."""
    n_blocks = rows.groupby("external", observed=True)["block_id"].nunique()
    last_us = rows[["started", "submitted"]].max(axis=1).groupby(rows["external"], observed=True).max()
    externals = [p.external_id for p in new]
    started = pd.to_datetime(pd.Series([p.started_at for p in new], dtype=object), utc=True)
    finished = pd.to_datetime(pd.Series([p.finished_at for p in new], dtype=object), utc=True)
    completed = finished.notna().to_numpy()
    # Last seen: the finish, else the participant's last block time, else the start.
    last_seen = finished.fillna(_utc_times(last_us.reindex(externals).to_numpy())).fillna(started)
    frame = pd.DataFrame({
        "id": _new_ids(Participant, len(new)),
        "study": study.pk,
        "external_id": externals,
        "pseudonym": [pseudonym_for(key=study.pseudonym_key, external_id=e) for e in externals],
        "source": Participant.Source.IMPORT.value,
        "status": np.where(completed, Participant.Status.COMPLETED.value, Participant.Status.EXITED.value),
        "consented_at": started,
        "started_at": started,
        "finished_at": finished,
        "last_seen_at": last_seen,
        "instructions_seen": True,
        "blocks_assigned": n_blocks.reindex(externals, fill_value=0).to_numpy(dtype=np.int64),
        "demographics_done": [any(p.demographics.values()) for p in new],
        "completion_code": np.where(completed, study.completion_code, ""),
        "imported_attention_passed": pd.Series([p.attention_passed for p in new], dtype=object),
        **{key: [p.demographics[key] for p in new] for key in DEMOGRAPHIC_COLUMNS},
    })
    return _with_field_defaults(Participant, frame)


def _key_codes(*codes: np.ndarray) -> np.ndarray:
    """Non-negative integer columns packed into one int64 key per row (same key = same tuple)."""
    key = np.zeros(len(codes[0]), dtype=np.int64)
    for code in codes:
        key = key * (int(code.max()) + 1 if len(code) else 1) + code
    return key


def _skip_foreign_key_triggers() -> bool:
    """On PostgreSQL, skip the per-row foreign-key triggers for the rest of this transaction, if allowed.

    Checking millions of references one by one at commit costs more than the
    rest of the import together. Every id written here was just read from
    the locked study's content or created in this transaction, so the checks
    cannot fail. ``session_replication_role`` needs a superuser or, on
    PostgreSQL 15+, ``GRANT SET ON PARAMETER session_replication_role``;
    without it the import is just slower.
    """
    if connection.vendor != "postgresql":
        return False
    try:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("SET LOCAL session_replication_role = replica")
        return True
    except DatabaseError:
        return False


def _write(study: Study, new: list[_ParsedParticipant], rows: pd.DataFrame) -> tuple[int, int, int]:
    """Insert the new participants with their visits, placements and ratings; returns the three counts.

    Every id is known before anything is written (``_new_ids``), so rows are
    linked with numpy instead of reading ids back, and each table is one bulk write.
    """
    rows = rows[rows["external"].isin({p.external_id for p in new})]
    participants = _participant_rows(study, new, rows)
    _insert_rows(Participant, participants)

    participant = pd.Index(participants["external_id"]).get_indexer(rows["external"])
    block = rows["block_id"].to_numpy(dtype=np.int64)
    item = rows["item_id"].to_numpy(dtype=np.int64)
    started, line = rows["started"].to_numpy(), rows["line"].to_numpy()

    # One visit per participant x block: its first row carries the block's times. Visits are
    # numbered (sequence) and written in the order the participant saw them.
    visit_of_row, first = _first_rows(_key_codes(participant, block))
    order = np.lexsort((line[first], started[first], participant[first]))
    shown = first[order]
    visit_ids = np.empty(len(first), dtype=np.int64)
    visit_ids[order] = _new_ids(BlockVisit, len(first))
    _insert_rows(BlockVisit, pd.DataFrame({
        "id": visit_ids[order],
        "participant": participants["id"].to_numpy()[participant[shown]],
        "sequence": pd.Series(participant[shown]).groupby(participant[shown]).cumcount().to_numpy() + 1,
        "block": block[shown],
        "shown_at": _utc_times(started[shown]),
        "submitted_at": _utc_times(rows["submitted"].to_numpy()[shown]),
    }))

    # One placement per participant x response (a response is shown once, rated per dimension).
    placement_of_row, first = _first_rows(_key_codes(participant, item))
    placement_ids = _new_ids(ItemPlacement, len(first))
    _insert_rows(ItemPlacement, pd.DataFrame({
        "id": placement_ids,
        "visit": visit_ids[visit_of_row[first]],
        "item": item[first],
        "position": rows["position"].to_numpy(dtype=np.int64)[first],
        "rank": pd.array(rows["rank"].to_numpy()[first], dtype="Int64"),
        "choice": "",
    }))

    rated = rows["value"].notna().to_numpy()
    _insert_rows(Rating, pd.DataFrame({
        "placement": placement_ids[placement_of_row[rated]],
        "dimension": rows["dimension_id"].to_numpy()[rated].astype(np.int64),
        "value": rows["value"].to_numpy()[rated].astype(np.int64),
    }))
    return len(visit_ids), len(placement_ids), int(rated.sum())


def _first_rows(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each row's group (groups numbered in order of first appearance) and each group's first row."""
    group_of_row, _ = pd.factorize(keys)
    if not len(keys):
        return group_of_row, np.zeros(0, dtype=np.int64)
    # A row opens a group when its number exceeds every number before it.
    seen = np.maximum.accumulate(group_of_row)
    return group_of_row, np.flatnonzero(np.r_[True, group_of_row[1:] > seen[:-1]])


def _refresh_planner_statistics() -> None:
    """ANALYZE the tables a bulk import grew, on PostgreSQL.

    Autovacuum would get to it within a minute or so, but a researcher
    typically starts an analysis right after an import: with the row counts
    of the empty study the planner picks a join that spills to disk, and the
    frame build takes about half as long again.
    """
    if connection.vendor != "postgresql":
        return
    tables = [model._meta.db_table for model in (Participant, BlockVisit, ItemPlacement, Rating)]
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE " + ", ".join(connection.ops.quote_name(table) for table in tables))


def responses_import(*, study: Study, participants_file: IO, ratings_file: IO) -> ImportReport:
    """Validate and import participants.csv + ratings.csv (DESIGN 3.1) into ``study``.

    Raises ``ImportProblems`` (nothing written) when any row is invalid.
    """
    began = time.perf_counter()
    problems = _Problems()
    participants_name = _file_name(participants_file, "participants.csv")
    participants = _read_participants(participants_file, participants_name, study, problems)
    rows = _read_ratings(ratings_file, _file_name(ratings_file, "ratings.csv"), study, participants, problems)
    existing = dict(
        Participant.objects.filter(study=study, external_id__in=list(participants)).values_list("external_id", "source")
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
        _skip_foreign_key_triggers()
        visits, placements, ratings = _write(study, new, rows)
    if new:
        _refresh_planner_statistics()
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
