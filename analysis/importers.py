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
import math
import os
import re
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import IO, Any

from django.db import connection, transaction
from django.db.models import Max, Model

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


def _rows(file: IO, name: str, required: list[str], optional: list[str], problems: _Problems) -> tuple[list[str], Iterator[tuple[int, list[str]]]] | None:
    """The header and (line, cells) records; None when the header is unusable."""
    reader = csv.reader(_text(file))
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

    return (header, records()) if usable else None


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


class _Block:
    """One participant's block as read from ratings.csv."""

    __slots__ = ("line", "started_at", "submitted_at", "placements", "positions", "ratings")

    def __init__(self, line: int, started_at: datetime, submitted_at: datetime | None):
        self.line = line
        self.started_at = started_at
        self.submitted_at = submitted_at
        self.placements: dict[int, list[Any]] = {}  # item id -> [position, rank, line]
        self.positions: set[int] = set()
        self.ratings: list[tuple[int, int, int]] = []  # (item id, dimension id, value)


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


def _int_cell(value: str) -> int:
    return int(value)


def _read_ratings(
    file: IO, name: str, study: Study, participants: dict[str, _ParsedParticipant], problems: _Problems
) -> dict[str, dict[str, _Block]]:
    """participant id -> block key -> _Block, validated row by row and block by block."""
    blocks: dict[str, dict[str, _Block]] = {}
    table = _rows(file, name, RATING_CSV_COLUMNS, OPTIONAL_RATING_CSV_COLUMNS, problems)
    if table is None:
        return blocks
    header, records = table
    col = {c: header.index(c) for c in header}
    index = _StudyIndex(study)
    dimension_col = col.get("dimension")
    if dimension_col is None and len(index.dimensions) > 1:
        problems.add(name, 1, "dimension", f"missing column; the study rates {', '.join(index.dimensions)}")
        return blocks
    only_dimension = next(iter(index.dimensions.values())) if len(index.dimensions) == 1 else None
    time_cache: dict[str, datetime] = {}

    def when(value: str) -> datetime:
        found = time_cache.get(value)
        if found is None:
            found = time_cache[value] = parse_time(value)
        return found

    c_pid, c_block, c_resp = col["participant_id"], col["block_id"], col["response_id"]
    c_pos, c_rating, c_rank = col["position"], col["rating"], col["rank"]
    c_start, c_submit = col["block_started_at"], col["block_submitted_at"]
    broken: set[str] = set()  # participants with a bad row: their rank check would only echo it
    for line, cells in records:
        external_id, block_key, response_key = cells[c_pid], cells[c_block], cells[c_resp]

        def bad(column: str, message: str) -> None:
            problems.add(name, line, column, message)
            broken.add(external_id)

        if external_id not in participants:
            bad("participant_id", f'unknown participant "{external_id}" (not in the participants file)')
            continue
        block_id = index.block_ids.get(block_key)
        if block_id is None:
            bad("block_id", f'unknown block "{block_key}"')
            continue
        item = index.items.get(response_key)
        if item is None:
            bad("response_id", f'unknown response "{response_key}"')
            continue
        if item[1] != block_id:
            bad("response_id", f'response "{response_key}" is not in block "{block_key}"')
            continue
        item_id = item[0]
        try:
            position = _int_cell(cells[c_pos])
            if position < 1:
                raise ValueError
        except ValueError:
            bad("position", f'"{cells[c_pos]}" is not a position (1, 2, ...)')
            continue
        rank_text = cells[c_rank]
        try:
            rank = None if rank_text == "" else _int_cell(rank_text)
            if rank is not None and rank < 1:
                raise ValueError
        except ValueError:
            bad("rank", f'"{rank_text}" is not a rank (1 = most empathetic) or empty')
            continue
        try:
            started_at = when(cells[c_start])
        except ValueError:
            bad("block_started_at", f'"{cells[c_start]}" is not an ISO 8601 time')
            continue
        try:
            submitted_at = None if cells[c_submit] == "" else when(cells[c_submit])
        except ValueError:
            bad("block_submitted_at", f'"{cells[c_submit]}" is not an ISO 8601 time')
            continue
        if submitted_at is not None and submitted_at < started_at:
            bad("block_submitted_at", "before block_started_at")
            continue

        if dimension_col is not None and cells[dimension_col] != "":
            dimension = index.dimensions.get(cells[dimension_col])
            if dimension is None:
                bad("dimension", f'unknown dimension "{cells[dimension_col]}"; use one of {", ".join(index.dimensions)}')
                continue
        else:
            dimension = only_dimension
            if dimension_col is not None and len(index.dimensions) > 1:
                bad("dimension", f"empty; use one of {', '.join(index.dimensions)}")
                continue
        value_text = cells[c_rating]
        value = None
        if value_text != "":
            if dimension is None:
                bad("rating", "the study has no rating scale; leave it empty")
                continue
            try:
                value = _int_cell(value_text)
            except ValueError:
                bad("rating", f'"{value_text}" is not a whole number')
                continue
            if not dimension.scale_min <= value <= dimension.scale_max:
                bad("rating", f"{value} is outside the {dimension.key} scale {dimension.scale_min}-{dimension.scale_max}")
                continue
        elif dimension is not None and submitted_at is not None:
            bad("rating", "empty, but the block was submitted")
            continue

        per_participant = blocks.setdefault(external_id, {})
        block = per_participant.get(block_key)
        if block is None:
            block = per_participant[block_key] = _Block(line, started_at, submitted_at)
        elif (block.started_at, block.submitted_at) != (started_at, submitted_at):
            bad("block_started_at", f"the block times differ from line {block.line} of the same block")
            continue
        placement = block.placements.get(item_id)
        if placement is not None:
            # Several rows per response are allowed only for different dimensions.
            if value is None or dimension_col is None or any(
                r[0] == item_id and r[1] == dimension.pk for r in block.ratings
            ):
                bad("response_id", f'response "{response_key}" is listed twice for this participant')
                continue
            if placement[0] != position or placement[1] != rank:
                bad("position", f"position or rank differs from line {placement[2]} for the same response")
                continue
        else:
            if position in block.positions:
                bad("position", f"position {position} is used twice in block {block_key}")
                continue
            block.positions.add(position)
            block.placements[item_id] = [position, rank, line]
        if value is not None:
            block.ratings.append((item_id, dimension.pk, value))
    _check_ranks(name, blocks, broken, problems)
    return blocks


def _check_ranks(
    name: str, blocks: dict[str, dict[str, _Block]], broken: set[str], problems: _Problems
) -> None:
    for external_id, per_participant in blocks.items():
        if external_id in broken:
            continue
        for block_key, block in per_participant.items():
            ranks = [p[1] for p in block.placements.values()]
            if all(rank is None for rank in ranks):
                continue
            if any(rank is None for rank in ranks) or sorted(ranks) != list(range(1, len(ranks) + 1)):
                shown = ", ".join("" if r is None else str(r) for r in ranks)
                problems.add(
                    name, block.line, "rank",
                    f"ranks in block {block_key} of participant {external_id} are [{shown}]; "
                    f"expected each of 1-{len(ranks)} once",
                )


# ---------------------------------------------------------------- writing


def _allocate_ids(model: type[Model], count: int) -> Iterator[int]:
    """Primary keys for ``count`` new rows, so children can refer to them before insertion."""
    if count == 0:
        return iter(())
    table = model._meta.db_table
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                "SELECT nextval(pg_get_serial_sequence(%s, 'id')) FROM generate_series(1, %s)", [table, count]
            )
            return iter([row[0] for row in cursor.fetchall()])
    # SQLite: the IMMEDIATE transaction holds the write lock, so nobody else inserts meanwhile.
    start = (model.objects.aggregate(top=Max("id"))["top"] or 0) + 1
    return iter(range(start, start + count))


def _insert(model: type[Model], fields: list[str], rows: Iterable[tuple]) -> int:
    """Insert tuples into ``model``'s table: COPY on PostgreSQL, executemany elsewhere."""
    columns = [model._meta.get_field(f).column for f in fields]
    table = connection.ops.quote_name(model._meta.db_table)
    quoted = ", ".join(connection.ops.quote_name(c) for c in columns)
    count = 0
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            with cursor.cursor.copy(f"COPY {table} ({quoted}) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(row)
                    count += 1
            return count
        batch: list[tuple] = []
        sql = f"INSERT INTO {table} ({quoted}) VALUES ({', '.join(['%s'] * len(columns))})"
        for row in rows:
            batch.append(row)
            if len(batch) == 5000:
                cursor.executemany(sql, batch)
                count += len(batch)
                batch = []
        if batch:
            cursor.executemany(sql, batch)
            count += len(batch)
    return count


def _db_time(value: datetime | None) -> Any:
    return connection.ops.adapt_datetimefield_value(value)


def _new_participant(study: Study, p: _ParsedParticipant, n_blocks: int, last_seen: datetime) -> Participant:
    completed = p.finished_at is not None
    return Participant(
        study=study,
        external_id=p.external_id,
        pseudonym=pseudonym_for(key=study.pseudonym_key, external_id=p.external_id),
        source=Participant.Source.IMPORT,
        status=Participant.Status.COMPLETED if completed else Participant.Status.EXITED,
        consented_at=p.started_at,
        started_at=p.started_at,
        finished_at=p.finished_at,
        last_seen_at=p.finished_at or last_seen,
        instructions_seen=True,
        blocks_assigned=n_blocks,
        demographics_done=any(p.demographics.values()),
        completion_code=study.completion_code if completed else "",
        imported_attention_passed=p.attention_passed,
        **p.demographics,
    )


def _write(study: Study, new: list[_ParsedParticipant], blocks: dict[str, dict[str, _Block]]) -> tuple[int, int, int]:
    created = Participant.objects.bulk_create(
        [
            _new_participant(
                study, p, len(blocks.get(p.external_id, {})),
                max([b.submitted_at or b.started_at for b in blocks.get(p.external_id, {}).values()], default=p.started_at),
            )
            for p in new
        ],
        batch_size=2000,
    )
    participant_ids = {p.external_id: p.pk for p in created}
    block_ids = dict(Block.objects.filter(study=study).values_list("key", "id"))
    ordered = [
        (participant_ids[p.external_id], key, block)
        for p in new
        for key, block in sorted(blocks.get(p.external_id, {}).items(), key=lambda kv: (kv[1].started_at, kv[1].line))
    ]
    visit_ids = _allocate_ids(BlockVisit, len(ordered))
    placement_ids = _allocate_ids(ItemPlacement, sum(len(b.placements) for _, _, b in ordered))
    visits, placements, ratings = [], [], []
    sequence, previous = 0, None
    for participant_id, block_key, block in ordered:
        sequence = sequence + 1 if participant_id == previous else 1
        previous = participant_id
        visit_id = next(visit_ids)
        visits.append(
            (visit_id, participant_id, sequence, block_ids[block_key], _db_time(block.started_at), _db_time(block.submitted_at))
        )
        placement_of: dict[int, int] = {}
        for item_id, (position, rank, _line) in sorted(block.placements.items(), key=lambda kv: kv[1][0]):
            placement_of[item_id] = pid = next(placement_ids)
            placements.append((pid, visit_id, item_id, position, rank, ""))
        ratings.extend((placement_of[item_id], dimension_id, value) for item_id, dimension_id, value in block.ratings)
    _insert(BlockVisit, ["id", "participant", "sequence", "block", "shown_at", "submitted_at"], visits)
    _insert(ItemPlacement, ["id", "visit", "item", "position", "rank", "choice"], placements)
    _insert(Rating, ["placement", "dimension", "value"], ratings)
    return len(visits), len(placements), len(ratings)


def responses_import(*, study: Study, participants_file: IO, ratings_file: IO) -> ImportReport:
    """Validate and import participants.csv + ratings.csv (DESIGN 3.1) into ``study``.

    Raises ``ImportProblems`` (nothing written) when any row is invalid.
    """
    began = time.perf_counter()
    problems = _Problems()
    participants_name = _file_name(participants_file, "participants.csv")
    participants = _read_participants(participants_file, participants_name, study, problems)
    blocks = _read_ratings(ratings_file, _file_name(ratings_file, "ratings.csv"), study, participants, problems)
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
        visits, placements, ratings = _write(study, new, blocks)
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
