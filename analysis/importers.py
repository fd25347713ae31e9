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

import codecs
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


class _Column:
    """One column of ratings.csv: per row a code into the column's distinct (stripped) texts.

    A file repeats the same few ids, numbers and times, so every conversion and
    check runs once per distinct text and reaches the rows through the codes.
    Cut from bytes, the distinct texts may come as ``raw``: their UTF-8 bytes
    (zero-padded rows, no NUL in them) and byte lengths, decoded when asked for.
    """

    def __init__(self, codes: np.ndarray, texts: np.ndarray | None = None,
                 raw: tuple[np.ndarray, np.ndarray] | None = None):
        self.codes = codes  # int64, one per row
        self._texts = texts  # object array of distinct str
        self.raw = raw

    @property
    def texts(self) -> np.ndarray:
        if self._texts is None:
            cells = self.raw[0]
            lines = np.full((len(cells), cells.shape[1] + 1), ord("\n"), dtype=np.uint8)
            lines[:, :-1] = cells
            # All at once: one text per line, the zero padding dropped, decoded and split in C.
            self._texts = np.array(lines.tobytes().decode("utf-8").replace("\0", "").split("\n")[:-1], dtype=object)
        return self._texts

    def text(self, code: int) -> str:
        if self._texts is not None:
            return self._texts[code]
        cells, sizes = self.raw
        return cells[code, : sizes[code]].tobytes().decode("utf-8")

    def __getitem__(self, row: int) -> str:
        return self.text(self.codes[row])

    def is_(self, text: str) -> np.ndarray:
        """Per row: is the cell ``text``?"""
        if text == "" and self._texts is None:
            return (self.raw[1] == 0)[self.codes]
        return np.asarray(self.texts == text, dtype=bool)[self.codes]

    def rows(self, keep: np.ndarray) -> _Column:
        return _Column(self.codes[keep], self._texts, self.raw)

    def categorical(self, codes: np.ndarray) -> pd.Categorical:
        return pd.Categorical.from_codes(codes, dtype=pd.CategoricalDtype(self.texts))

    @staticmethod
    def of(cells: np.ndarray) -> _Column:
        codes, texts = pd.factorize(cells)
        return _Column(codes.astype(np.int64), np.asarray(texts, dtype=object))


class _RowErrors:
    """Problems of ratings.csv rows; a row that failed one check is left out of the later ones."""

    def __init__(self, lines: np.ndarray, participant_ids: _Column):
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


def _lookup(texts: _Column, convert: Callable[[str], float]) -> np.ndarray:
    """``convert`` applied to each distinct text once, spread over the rows."""
    return np.array([convert(text) for text in texts.texts], dtype=float)[texts.codes]


def _mapped(texts: _Column, mapping: dict[str, int]) -> np.ndarray:
    return _lookup(texts, lambda text: mapping.get(text, np.nan))


def _whole_number(text: str) -> float:
    return float(int(text)) if _INTEGER.fullmatch(text) else np.nan


def _integers(texts: _Column) -> np.ndarray:
    """Whole numbers as floats; NaN where the text is not one (empty included)."""
    return _lookup(texts, _whole_number)


def _parse_times(texts: _Column) -> np.ndarray:
    """Microseconds since the epoch per cell (NaN when empty or unparseable)."""
    if texts.raw is None:
        return _time_micros(texts.texts)[texts.codes]
    cells, sizes = texts.raw
    chars = np.zeros((_LONGEST_TIME, len(sizes)), dtype=np.uint8)
    width = min(cells.shape[1], _LONGEST_TIME)
    chars[:width] = cells[:, :width].T
    return _micros(chars, sizes, texts.text)[texts.codes]


def _python_micros(text: str) -> float:
    try:
        return float((parse_time(text) - _EPOCH) // timedelta(microseconds=1))
    except ValueError:
        return np.nan


# The layouts read with numpy instead of parse_time, one text at a time: exactly
#   YYYY-MM-DD[T ]HH:MM:SS(.f{1,6})?(Z|[+-]HH:MM)?
# with the year in [_FIRST_YEAR, _LAST_YEAR] and every field in range. For
# these datetime.fromisoformat gives the obvious moment (tests check that the
# two agree); anything else, valid or not, goes to parse_time itself.
_FIRST_YEAR, _LAST_YEAR = 1900, 2199  # micros stay far below 2**53: floats are exact
_SHORTEST_TIME, _LONGEST_TIME = 19, 32


def _time_micros(texts: np.ndarray) -> np.ndarray:
    """``parse_time`` of each text as microseconds since the epoch, NaN where it raises."""
    length = np.fromiter(map(len, texts), dtype=np.int64, count=len(texts))
    chars = np.zeros((_LONGEST_TIME, len(texts)), dtype=np.uint8)
    short = np.flatnonzero(length <= _LONGEST_TIME)
    if len(short):
        # The lengths come from Python, so a text that ends in NUL characters
        # cannot pass for a shorter one here.
        points = np.array(texts[short].tolist(), dtype=f"U{_LONGEST_TIME}").view(np.uint32)
        chars[:, short] = np.minimum(points.reshape(len(short), _LONGEST_TIME), 255).T
    return _micros(chars, length, texts.__getitem__)


def _micros(chars: np.ndarray, length: np.ndarray, text: Callable[[int], str]) -> np.ndarray:
    """Per text, ``parse_time`` as microseconds since the epoch, NaN where it raises.

    ``chars[p]`` holds each text's character at position p (zero past its end,
    255 for any above 255: no character looked for), ``length`` its length.
    Texts of the strict layout are read from them with numpy; the others,
    valid or not, are given to parse_time by ``text(i)``.
    """
    micros = np.full(len(length), np.nan)
    candidate = np.flatnonzero((length >= _SHORTEST_TIME) & (length <= _LONGEST_TIME))
    if len(candidate):
        micros[candidate] = _strict_iso_micros(chars[:, candidate], length[candidate])
    for i in np.flatnonzero(np.isnan(micros)):
        micros[i] = _python_micros(text(i))
    return micros


def _strict_iso_micros(chars: np.ndarray, length: np.ndarray) -> np.ndarray:
    """Microseconds since the epoch of each text in the strict layout; NaN for any other text.

    ``chars[p]`` holds the character at position p of every text (see ``_micros``).
    """
    texts = np.arange(len(length))
    value = chars - np.uint8(ord("0"))  # as digits; anything below "0" wraps above 9
    digit = value <= 9

    def at(position: np.ndarray) -> np.ndarray:
        return chars[position, texts]

    def number(*positions: int) -> np.ndarray:
        total = np.zeros(len(length), dtype=np.int64)
        for position in positions:
            total *= 10
            total += value[position]
        return total

    ok = digit[[0, 1, 2, 3, 5, 6, 8, 9, 11, 12, 14, 15, 17, 18]].all(axis=0)
    ok &= (chars[4] == ord("-")) & (chars[7] == ord("-")) & (chars[13] == ord(":")) & (chars[16] == ord(":"))
    ok &= (chars[10] == ord("T")) | (chars[10] == ord(" "))
    year, month, day = number(0, 1, 2, 3), number(5, 6), number(8, 9)
    hour, minute, second = number(11, 12), number(14, 15), number(17, 18)

    # Offset: "Z", "+HH:MM", "-HH:MM" or none.
    zulu = at(length - 1) == ord("Z")
    sign_at = np.maximum(length - 6, 0)
    sign = at(sign_at)
    numeric = ((sign == ord("+")) | (sign == ord("-"))) & (at(sign_at + 3) == ord(":")) & (length >= 25) & ~zulu
    for k in (1, 2, 4, 5):
        numeric &= digit[sign_at + k, texts]
    offset_hours = value[sign_at + 1, texts].astype(np.int64) * 10 + value[sign_at + 2, texts]
    offset_minutes = value[sign_at + 4, texts].astype(np.int64) * 10 + value[sign_at + 5, texts]
    ok &= ~numeric | ((offset_hours <= 23) & (offset_minutes <= 59))
    offset = np.where(numeric, np.where(sign == ord("-"), -1, 1) * (offset_hours * 60 + offset_minutes), 0)

    # Fraction: nothing, or "." and 1 to 6 digits, between the seconds and the offset.
    end = length - np.where(zulu, 1, np.where(numeric, 6, 0))
    places = end - 20  # digits after the "."
    ok &= (end == 19) | ((chars[19] == ord(".")) & (places >= 1) & (places <= 6))
    used = np.arange(6)[:, None] < places  # which of the six places hold a digit
    ok &= (digit[20:26] | ~used).all(axis=0)
    scale = 10 ** np.arange(5, -1, -1)[:, None]
    fraction = (np.where(used, value[20:26], 0) * scale).sum(axis=0)

    ok &= (year >= _FIRST_YEAR) & (year <= _LAST_YEAR) & (month >= 1) & (month <= 12)
    ok &= (hour <= 23) & (minute <= 59) & (second <= 59)
    months = ((np.where(ok, year, 1970) - 1970) * 12 + np.where(ok, month, 1) - 1).astype("datetime64[M]")
    first_day = months.astype("datetime64[D]").astype(np.int64)
    month_days = (months + 1).astype("datetime64[D]").astype(np.int64) - first_day
    ok &= (day >= 1) & (day <= month_days)

    seconds = (first_day + day - 1) * 86_400 + hour * 3600 + minute * 60 + second - offset * 60
    return np.where(ok, (seconds * 1_000_000 + fraction).astype(float), np.nan)


def _ratings_columns(file: IO, name: str, problems: _Problems) -> tuple[list[str], np.ndarray, dict[str, _Column]] | None:
    """The header, the line number of every record and each column of stripped texts."""
    upload = _Upload(file)
    header = _header(csv.reader(upload.lines()), name, RATING_CSV_COLUMNS, OPTIONAL_RATING_CSV_COLUMNS, problems)
    if header is None:
        return None
    fast = _columns_fast(upload, header)
    return (header, *fast) if fast is not None else (header, *_columns_exact(upload.text, header, name, problems))


class _Upload:
    """A whole upload: its text as ``_text`` reads it and, when it came as bytes, those bytes less
    a leading BOM, which are the text's UTF-8 encoding (strict decoding round-trips). Plain ASCII
    is decoded only if the text is asked for: the fast reader works on the bytes."""

    def __init__(self, file: IO):
        self.data: bytes | None = None
        self._text: str | None = None
        if isinstance(file, io.TextIOBase) or not (hasattr(file, "read") and isinstance(file.read(0), bytes)):
            self._text = _text(file).read()
            return
        raw = file.read()
        if not raw.isascii():
            self._text = raw.decode("utf-8-sig")  # as io.TextIOWrapper(file, "utf-8-sig", newline="") reads
        self.data = raw[len(codecs.BOM_UTF8):] if raw.startswith(codecs.BOM_UTF8) else raw

    @property
    def text(self) -> str:
        if self._text is None:
            self._text = self.data.decode("ascii")
        return self._text

    def lines(self) -> Iterator[str]:
        """The lines of the text as ``io.StringIO(text)`` yields them, one at a time."""
        if self._text is not None:
            yield from _lines(self._text)
            return
        start = 0
        while start < len(self.data):
            end = self.data.find(b"\n", start)
            end = len(self.data) if end < 0 else end + 1
            yield self.data[start:end].decode("ascii")
            start = end


def _lines(content: str) -> Iterator[str]:
    """The lines of ``content`` as ``io.StringIO(content)`` yields them, without copying the whole text."""
    start = 0
    while start < len(content):
        end = content.find("\n", start)
        end = len(content) if end < 0 else end + 1
        yield content[start:end]
        start = end


def _columns_fast(upload: _Upload, header: list[str]) -> tuple[np.ndarray, dict[str, _Column]] | None:
    """The common file: no quoting, one record per line, every line the right number of fields
    (checked by counting commas). None sends the file to the exact reader.

    Cut with numpy on the encoded bytes (cells lie between commas and newlines)
    and factorized 8 bytes at a time: no Python string per cell. The cells are
    those pandas' C reader gave for such a file (the reader this replaced): a
    line holds one record; a whitespace-only line (no comma) is a record whose
    first cell is that whitespace; a record of empty cells is dropped.
    """
    if upload.data is None:
        content = upload.text.replace("\r\n", "\n") if "\r" in upload.text else upload.text
        if '"' in content or "\r" in content:
            return None
        encoded = content.encode("utf-8")
    else:  # the same tests on the UTF-8 bytes, where these characters are single bytes
        encoded = upload.data.replace(b"\r\n", b"\n") if b"\r" in upload.data else upload.data
        if b'"' in encoded or b"\r" in encoded:
            return None
    separators = len(header) - 1
    lines = _Lines(np.frombuffer(encoded, dtype=np.uint8), separators)
    full = lines.commas == separators
    if not full.all() and not _short_lines_blank(encoded, lines, full):
        return None
    comma = lines.comma_offsets(full, separators)

    cells = _Cells(encoded)
    padded = b" " in encoded or b"\t" in encoded  # stripping costs a Python call per text: only when needed
    blank = np.ones(len(lines.starts), dtype=bool)
    columns: dict[str, _Column] = {}
    for k, column in enumerate(header):
        left = lines.starts if k == 0 else comma(k - 1) + 1
        right = lines.ends if k == separators else comma(k)
        length = np.maximum(right - left, 0)
        blank &= length == 0
        columns[column] = cells.column(left, length, strip=padded)
    keep = ~blank
    numbers = np.arange(2, len(lines.starts) + 2, dtype=np.int64)
    if keep.all():
        return numbers, columns
    return numbers[keep], {column: values.rows(keep) for column, values in columns.items()}


class _Lines:
    """The lines after the header of an encoded file (``content.split("\\n")[1:]``, less the empty
    piece after a final newline): offsets, and commas counted from one pass over the bytes."""

    def __init__(self, data: np.ndarray, separators: int):
        marks = _newlines_and_commas(data)
        kinds = data[marks]
        self.table = self._table(data, marks, kinds, separators)
        if self.table is not None:
            self.starts = self.table[:-1, separators] + 1
            self.ends = self.table[1:, separators]
            self.commas = np.full(len(self.starts), separators)
            return
        is_newline = kinds == ord("\n")
        self.comma_at = marks[~is_newline]
        newline = np.flatnonzero(is_newline)  # index in marks of each newline
        self.starts = marks[newline] + 1
        self.ends = np.append(marks[newline[1:]], len(data)).astype(marks.dtype)[: len(newline)]
        self.first_comma = newline - np.arange(len(newline))  # commas before each newline
        self.commas = np.append(self.first_comma[1:], len(self.comma_at))[: len(newline)] - self.first_comma
        if len(self.starts) and self.starts[-1] == len(data):
            self.starts, self.ends = self.starts[:-1], self.ends[:-1]
            self.first_comma, self.commas = self.first_comma[:-1], self.commas[:-1]

    @staticmethod
    def _table(data: np.ndarray, marks: np.ndarray, kinds: np.ndarray, separators: int) -> np.ndarray | None:
        """The common layout, every line (the header too) its commas and then a newline (or the end
        of the file), as one row of offsets per line; None for any other."""
        if len(data) and data[-1] != ord("\n"):
            marks, kinds = np.append(marks, len(data)), np.append(kinds, ord("\n"))
        if not len(marks) or len(marks) % (separators + 1):
            return None
        kinds = kinds.reshape(-1, separators + 1)
        if not ((kinds[:, :separators] == ord(",")).all() and (kinds[:, separators] == ord("\n")).all()):
            return None
        return marks.reshape(-1, separators + 1)

    def comma_offsets(self, full: np.ndarray, separators: int) -> Callable[[int], np.ndarray]:
        """Offset of each line's k-th comma, by k; a (blank) line without commas gives its end."""
        if self.table is not None:
            table = self.table[1:]
            return lambda k: table[:, k]
        padded = np.append(self.comma_at, 0)  # an index past the last comma stays inside
        return lambda k: np.where(full, padded[np.minimum(self.first_comma + k, len(self.comma_at))], self.ends)


_SCAN_CHUNK = 1 << 20


def _newlines_and_commas(data: np.ndarray) -> np.ndarray:
    """Offsets of the newlines and commas, in order. Scanned a chunk at a time so that the masks
    stay in cache instead of filling (and first touching) hundreds of megabytes."""
    offset = np.int32 if len(data) < 2**31 - 64 else np.int64
    hit, comma = np.empty(_SCAN_CHUNK, dtype=bool), np.empty(_SCAN_CHUNK, dtype=bool)
    found = [np.zeros(0, dtype=offset)]
    for start in range(0, len(data), _SCAN_CHUNK):
        chunk = data[start:start + _SCAN_CHUNK]
        size = len(chunk)
        np.equal(chunk, ord("\n"), out=hit[:size])
        np.equal(chunk, ord(","), out=comma[:size])
        np.logical_or(hit[:size], comma[:size], out=hit[:size])
        found.append(np.flatnonzero(hit[:size]).astype(offset) + offset(start))
    return np.concatenate(found)


def _short_lines_blank(encoded: bytes, lines: _Lines, full: np.ndarray) -> bool:
    """Whether every line without the full count of commas is blank (no comma, only whitespace)."""
    short = np.flatnonzero(~full)
    if (lines.commas[short] != 0).any():
        return False  # a comma too many or too few
    return not any(encoded[lines.starts[i]:lines.ends[i]].decode("utf-8").strip() for i in short)


class _Cells:
    """Cells of an encoded file given as (offset, length) arrays, turned into columns of texts.

    A cell is read 8 bytes at a time, each word as one uint64 with the bytes
    past the cell's end zeroed, and the words are factorized: no Python string
    per cell, only per distinct text. Zero padding is unambiguous unless the
    file holds NUL bytes; then the length is part of the key too.
    """

    _LOW_BYTES = np.array([(1 << (8 * n)) - 1 for n in range(9)], dtype=np.uint64)  # a word's first n bytes

    def __init__(self, encoded: bytes):
        self.encoded = encoded
        # Word i = bytes i..i+7 as one uint64, read in place; the last offsets (fewer than 8 bytes
        # left) read from a zero-padded copy of the file's end.
        self.last = max(len(encoded) - 8, 0)
        data = np.frombuffer(encoded, dtype=np.uint8)
        self.head = np.ndarray((len(encoded) - 7 if len(encoded) >= 8 else 0,), dtype="<u8", buffer=data, strides=(1,))
        tail = np.frombuffer(encoded[self.last:] + bytes(8), dtype=np.uint8)
        self.tail = np.ndarray((len(tail) - 7,), dtype="<u8", buffer=tail, strides=(1,))
        self.has_nul = b"\0" in encoded

    def word(self, left: np.ndarray, length: np.ndarray, w: int) -> np.ndarray:
        """Bytes 8w..8w+7 of each cell as a uint64, zero past the cell's end."""
        at = np.minimum(left + 8 * w, len(self.encoded)) if w or left.max(initial=0) > len(self.encoded) else left
        if at.max(initial=0) <= self.last and len(self.head):
            word = self.head[at]
        elif len(self.head):
            word = self.head[np.minimum(at, self.last)]
            late = np.flatnonzero(at > self.last)
            word[late] = self.tail[at[late] - self.last]
        else:
            word = self.tail[at]
        keep = length - 8 * w  # bytes of the cell in this word
        if keep.min(initial=8) >= 8:
            return word  # every cell fills the word
        word &= self._LOW_BYTES[np.clip(keep, 0, 8, out=keep)]
        return word

    def column(self, left: np.ndarray, length: np.ndarray, strip: bool) -> _Column:
        words = [self.word(left, length, w) for w in range(-(-int(length.max(initial=0)) // 8))]
        codes, first = _run_codes(([length] if self.has_nul else []) + words, len(left))
        if self.has_nul:
            spans = zip(left[first].tolist(), (left + length)[first].tolist())
            column = _Column(codes, np.array([self.encoded[a:b].decode("utf-8") for a, b in spans], dtype=object))
        elif words:
            column = _Column(codes, raw=(np.stack([word[first] for word in words], axis=1).view(np.uint8), length[first]))
        else:
            column = _Column(codes, raw=(np.zeros((len(first), 0), dtype=np.uint8), length[first]))
        if not strip:
            return column
        stripped, texts = pd.factorize(np.array([text.strip() for text in column.texts], dtype=object))
        return _Column(stripped[codes], np.asarray(texts, dtype=object))


def _run_codes(parts: list[np.ndarray], n: int) -> tuple[np.ndarray, np.ndarray]:
    """``_combined(parts, n)`` and the row where each code first appears. When runs of equal rows
    are long, only the first row of each run is hashed: a file lists a participant's rows
    together, and a block's rows share their times."""
    same = np.ones(max(n - 1, 0), dtype=bool)
    for part in parts:
        same &= part[1:] == part[:-1]
    starts = np.flatnonzero(np.r_[True, ~same]) if n else np.zeros(0, dtype=np.int64)
    if len(starts) > n // 2:
        codes = _combined(parts, n)
        return codes, _first_rows(codes)
    run = _combined([part[starts] for part in parts], len(starts))
    return np.repeat(run, np.diff(np.r_[starts, n])), starts[_first_rows(run)]


def _combined(parts: list[np.ndarray], n: int) -> np.ndarray:
    """A code per row (of ``n``), equal exactly where every part is (NaN equal to NaN, as in
    ``duplicated``), numbered in order of first appearance."""
    if len(parts) == 1:
        return pd.factorize(parts[0], use_na_sentinel=False)[0]
    codes = np.zeros(n, dtype=np.int64)
    span = 1
    for part in parts:
        part_codes, distinct = pd.factorize(part, use_na_sentinel=False)
        codes, span = _pack(codes, span, part_codes, len(distinct))
    return pd.factorize(codes)[0]


def _first_rows(codes: np.ndarray) -> np.ndarray:
    """The row where each code first appears, for codes numbered in order of first appearance."""
    if not len(codes):
        return np.zeros(0, dtype=np.int64)
    return np.flatnonzero(np.r_[True, codes[1:] > np.maximum.accumulate(codes)[:-1]])


def _columns_exact(content: str, header: list[str], name: str, problems: _Problems) -> tuple[np.ndarray, dict[str, _Column]]:
    """The csv module, record by record: exact line numbers and field-count problems."""
    reader = csv.reader(_lines(content))
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
        column: _Column.of(np.array([cell.strip() for cell in values], dtype=object))
        for column, values in zip(header, columns)
    }


def _read_ratings(
    file: IO, name: str, study: Study, participants: dict[str, _ParsedParticipant], problems: _Problems
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
    errors.fail(~col["rank"].is_("") & ~(rank >= 1), "rank",
                lambda i: f'"{col["rank"][i]}" is not a rank (1 = most empathetic) or empty')
    started = _parse_times(col["block_started_at"])
    errors.fail(np.isnan(started), "block_started_at",
                lambda i: f'"{col["block_started_at"][i]}" is not an ISO 8601 time')
    submitted = _parse_times(col["block_submitted_at"])
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


def _dimensions_of_rows(col: dict[str, _Column], index: _StudyIndex, errors: _RowErrors) -> tuple[np.ndarray, Any]:
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


def _check_rating_values(texts: _Column, value: np.ndarray, dimension_id: np.ndarray, is_submitted: np.ndarray,
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

    def __init__(self, external: _Column, **columns: np.ndarray):
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
            codes, span = _pack(codes, span, _at(more, rows), more_span)
        return codes, span


def _pack(codes: np.ndarray, span: int, more: np.ndarray, more_span: int) -> tuple[np.ndarray, int]:
    """Codes of the (codes, more) pairs, and their span; renumbered (hashing) only when the span
    would outgrow arrays indexed by code, about twice the rows."""
    if span * more_span >= 2**62:
        codes, distinct = pd.factorize(codes)
        span = len(distinct)
    codes, span = codes * more_span + more, span * more_span
    if span > 2 * len(codes) + 65536:
        codes, distinct = pd.factorize(codes)
        span = len(distinct)
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

    pid: _Column
    block_key: _Column
    response: _Column
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
    pairs = _pack(codes[valid], span, rank_codes, len(ranks))
    distinct = np.bincount(codes[valid][~_duplicated(*pairs)], minlength=span)
    full = ranked == n
    bad = ((ranked > 0) & ~full) | (full & ((low != 1) | (high != n) | (distinct != n)))
    return bad & (n > 0)


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
    visit_of_row, first = _run_codes([participant, block], len(rows))
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
    placement_of_row, first = _run_codes([participant, item], len(rows))
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
