"""The only module that turns database rows into pandas frames.

Everything downstream (quality rules, statistics, charts) works on these
frames, so their column names are a contract (DESIGN 2; docs/quality.md):

``ratings_frame``
    one row per rating of a non-preview participant (live or imported):
    participant_id, block_id, scenario, response_id, model, condition,
    dimension, position, rating, rank, block_order, seconds_on_block, best, worst,
    rank_changed.
``participants_frame``
    one row per non-preview participant (see ``participants_frame``).
``gold_frame``
    response_id, gold_score.
``visits_frame``
    one row per block visit, with its block_order, seconds_on_block and rank_changed.
``pairwise_frame``
    one row per answered pairwise block (the columns of pairwise.csv):
    participant_id, block_id, scenario, left_response_id, right_response_id,
    left_model, right_model, left_condition, right_condition, preference,
    seconds_on_block.

The derived columns (block_order, seconds_on_block, rank_changed, attention_passed) are
defined in ``analysis.derived``; the exports and the API read them from
these frames.

Speed matters (a study may hold 1.2 million ratings): rows are read as small
integers (ids), never as ORM objects; on PostgreSQL the visits, placements
and ratings of a study are read at once, each table by its own connection
from one snapshot, and joined here by id (``pgcopy.int_rows_out_together``).
Text labels are attached through categorical codes instead of being joined
and transferred per row.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from django.db import connection
from django.db.models import (
    BigIntegerField, Case, Count, DurationField, ExpressionWrapper, F, Func, IntegerField, Q, QuerySet, TextField, Value,
    When,
)
from django.db.models.functions import Coalesce

from analysis import derived, pgcopy
from analysis.models import GoldScore
from analysis.design import Design, study_design
from surveys.models import Block, BlockVisit, Dimension, Item, ItemPlacement, Participant, Rating
from surveys.questions import best_worst, pairwise

RATING_COLUMNS = [
    "participant_id", "block_id", "scenario", "response_id", "model", "condition", "dimension",
    "position", "rating", "rank", "block_order", "seconds_on_block", "best", "worst", "rank_changed",
]
# The study's demographic answers (one column per question key) and ``region`` sit between the two.
PARTICIPANT_COLUMNS_BEFORE = [
    "participant_id", "external_id", "status", "started_at", "finished_at", "attention_passed",
    "attention_failures", "attention_checks",
]
PARTICIPANT_COLUMNS_AFTER = ["region", "duration_minutes", "blocks_assigned", "blocks_answered", "completion_code"]
GOLD_COLUMNS = ["response_id", "gold_score"]


def _fetch(queryset: QuerySet) -> list[tuple]:
    """Run a ``values_list`` queryset as raw SQL: tuples without per-row ORM conversion."""
    sql, params = queryset.query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def _int_rows(queryset: QuerySet, width: int) -> np.ndarray:
    """A ``values_list`` queryset of integers as an int64 array of ``width`` columns.

    PostgreSQL: ``COPY (query) TO STDOUT`` parsed by pandas' C reader, which
    spares building a Python tuple per row (1.2 million rows: seconds less).
    Elsewhere: the raw cursor's tuples.
    """
    if connection.vendor != "postgresql":
        rows = _fetch(queryset)
        return np.array(rows, dtype=np.int64) if rows else np.zeros((0, width), dtype=np.int64)
    sql, params = queryset.query.sql_with_params()
    return pgcopy.int_rows_out(sql, params, width)


def _utc(values: Sequence) -> pd.DatetimeIndex:
    # ISO texts (see _IsoText); SQLite's carry no offset and are UTC.
    return pd.DatetimeIndex(pd.to_datetime(pd.Series(values, dtype=object), utc=True, format="ISO8601"))


def _categorical(codes: np.ndarray, labels: Sequence[str]) -> pd.Categorical:
    return pd.Categorical.from_codes(codes, categories=pd.Index(list(labels), dtype=object))


def _positions(ids: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Where each of ``values`` sits in ``ids`` (unique, in any order); -1 when absent.

    Ids of one study are nearly contiguous, so a lookup table indexed by id is
    used when it stays small (a few times the number of ids): one scatter and
    one gather instead of a sort and a binary search per row (1.2 million rows).
    """
    if not len(ids) or not len(values):
        return np.full(len(values), -1, dtype=np.int64)
    low, high = int(ids.min()), int(ids.max())
    inside = (values >= low) & (values <= high)
    if high - low < 4 * len(ids) + 1024:
        table = np.full(high - low + 1, -1, dtype=np.int64)
        table[ids - low] = np.arange(len(ids))
        return np.where(inside, table[np.clip(values - low, 0, high - low)], -1)
    order = np.argsort(ids, kind="stable")
    at = np.minimum(np.searchsorted(ids[order], values), len(ids) - 1)
    return np.where(ids[order][at] == values, order[at], -1)


def _labels_by_id(pairs: list[tuple[int, str]]) -> tuple[np.ndarray, list[str]]:
    """Ids (ascending) and their labels, for ``_positions`` lookups."""
    pairs = sorted(pairs)
    return np.array([p[0] for p in pairs], dtype=np.int64), [p[1] for p in pairs]


def _unique_codes(labels: list[str]) -> tuple[np.ndarray, list[str]]:
    """Codes into a de-duplicated category list (two ids may share a label)."""
    categories = sorted(set(labels))
    where = {label: i for i, label in enumerate(categories)}
    return np.array([where[label] for label in labels], dtype=np.int64), categories


class _Microseconds(Func):
    """An interval expression as whole microseconds (an integer on every backend).

    Integers let the visits travel through ``_int_rows`` (COPY on PostgreSQL)
    instead of a Python ``timedelta`` per row.
    """

    output_field = BigIntegerField()

    def as_postgresql(self, compiler, connection, **extra_context):
        return self.as_sql(
            compiler, connection, template="(EXTRACT(EPOCH FROM %(expressions)s) * 1000000)::bigint", **extra_context
        )

    def as_sqlite(self, compiler, connection, **extra_context):
        # Django's SQLite backend already gives duration arithmetic in microseconds.
        return self.as_sql(compiler, connection, template="CAST(%(expressions)s AS integer)", **extra_context)


class _IsoText(Func):
    """A time as ISO 8601 text in UTC (NULL stays NULL).

    pandas parses a column of such texts at once, where the database driver
    would build a Python datetime per value. PostgreSQL formats it with
    ``to_char`` (independent of the session's DateStyle); SQLite stores the text.
    """

    output_field = TextField()

    def as_postgresql(self, compiler, connection, **extra_context):
        template = """to_char(%(expressions)s AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')"""
        return self.as_sql(compiler, connection, template=template, **extra_context)

    def as_sqlite(self, compiler, connection, **extra_context):
        return self.as_sql(compiler, connection, template="%(expressions)s", **extra_context)


def _visit_query(study_id: int, participant_ids: Sequence[int] | QuerySet | None = None) -> QuerySet:
    """Block visits of non-preview participants as integers: id, participant, block, sequence,
    has a duration (0/1), duration in microseconds, submitted (0/1). Int rows cannot hold NULL.
    ``participant_ids``: ids, or a queryset of one column of ids (a subquery)."""
    duration = ExpressionWrapper(F("submitted_at") - F("shown_at"), output_field=DurationField())
    visits = BlockVisit.objects.filter(derived.BLOCK_VISIT, participant__study_id=study_id, participant__is_preview=False)
    if participant_ids is not None:
        who = participant_ids if isinstance(participant_ids, QuerySet) else list(participant_ids)
        visits = visits.filter(participant_id__in=who)
    return visits.order_by().values_list(
        "id", "participant_id", "block_id", "sequence",
        Case(When(shown_at__isnull=False, submitted_at__isnull=False, then=Value(1)), default=Value(0)),
        Coalesce(_Microseconds(duration), Value(0)),
        Case(When(submitted_at__isnull=False, then=Value(1)), default=Value(0)),
    )


VISIT_COLUMNS = [
    "visit", "participant", "block", "sequence", "submitted", "block_order", "seconds_on_block", "rank_changed",
]


def _visits(rows: np.ndarray, placements: np.ndarray) -> pd.DataFrame:
    """The visit rows in id order, with their derived columns (``analysis.derived``).

    ``placements`` are ``_placement_query`` rows of (at least) these visits: the ranks they hold.
    """
    rows = rows[np.argsort(rows[:, 0], kind="stable")]
    visit_of_placement = _positions(rows[:, 0], placements[:, 1])
    return pd.DataFrame(
        {
            "visit": rows[:, 0],
            "participant": rows[:, 1],
            "block": rows[:, 2],
            "sequence": rows[:, 3],
            "submitted": rows[:, 6] == 1,
            "block_order": derived.block_order(rows[:, 1], rows[:, 3]),
            "seconds_on_block": derived.seconds_on_block(rows[:, 5], rows[:, 4] == 1),
            "rank_changed": derived.rank_changed(visit_of_placement, placements[:, 3], placements[:, 4], len(rows)),
        },
        columns=VISIT_COLUMNS,
    )


def visits_frame(study_id: int, *, participant_ids: Sequence[int] | None = None) -> pd.DataFrame:
    """One row per block visit of the study's non-preview participants (or of ``participant_ids``).

    Columns: visit, participant (database ids), block (id), sequence,
    submitted, block_order, seconds_on_block, rank_changed; the last three as
    in ``ratings_frame``, for readers that need them for a few visits only
    (the API's pages of ratings).
    """
    if participant_ids is not None and not len(participant_ids):
        # An empty IN () is no query at all.
        return _visits(np.zeros((0, 7), dtype=np.int64), np.zeros((0, 6), dtype=np.int64))
    who = None if participant_ids is None else list(participant_ids)
    item_ids = list(Item.objects.filter(study_id=study_id).values_list("id", flat=True))
    visit_rows, placement_rows = _read_at_once([(_visit_query(study_id, who), 7), (_placement_query(item_ids, who), 6)])
    return _visits(visit_rows, placement_rows)


def _choice_code(field: str) -> Case:
    return Case(
        When(**{field: best_worst.Choice.BEST}, then=Value(1)),
        When(**{field: best_worst.Choice.WORST}, then=Value(2)),
        default=Value(0),
        output_field=IntegerField(),
    )


def _placement_query(item_ids: list[int], participant_ids: list[int] | None = None) -> QuerySet:
    """Placements of the study's items: id, visit, item, position, rank or 0, choice (0, 1 best, 2 worst)."""
    placements = ItemPlacement.objects.filter(item_id__in=item_ids)
    if participant_ids is not None:
        placements = placements.filter(visit__participant_id__in=participant_ids)
    return placements.order_by().values_list(
        "id", "visit_id", "item_id", "position", Coalesce("rank", Value(0)), _choice_code("choice")
    )


def _rating_query(dimension_ids: list[int], participant_ids: list[int] | None = None) -> QuerySet:
    """Ratings on the study's dimensions: placement, dimension, value."""
    ratings = Rating.objects.filter(dimension_id__in=dimension_ids)
    if participant_ids is not None:
        ratings = ratings.filter(placement__visit__participant_id__in=participant_ids)
    return ratings.order_by().values_list("placement_id", "dimension_id", "value")


# On PostgreSQL, read the visits, placements and ratings of a study at once (each table on its own
# connection, joined here by id): the database works on several cores and joins nothing.
CONCURRENT_READS = True


def _read_at_once(queries: list[tuple[QuerySet, int]]) -> list[np.ndarray]:
    """Integer querysets read together; on PostgreSQL each by its own connection, from one snapshot."""
    if connection.vendor != "postgresql" or not CONCURRENT_READS:
        return [_int_rows(queryset, width) for queryset, width in queries]
    return pgcopy.int_rows_out_together([(*queryset.query.sql_with_params(), width) for queryset, width in queries])


def _answers(visits: pd.DataFrame, placements: np.ndarray, ratings: np.ndarray | None) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """The frame's rows as indexes: (placement row, visit row, rating row or None) per answer.

    With ``ratings`` (a study with a scale): one answer per rating, its
    placement found by id. Without (best-worst studies): one per placement in
    a submitted block. Placements of visits not in ``visits`` (preview
    participants) are left out.
    """
    visit_of_placement = _positions(visits["visit"].to_numpy(), placements[:, 1])
    if ratings is None:
        shown = visit_of_placement >= 0
        submitted = visits["submitted"].to_numpy()[np.maximum(visit_of_placement, 0)]
        placement_at = np.flatnonzero(shown & submitted)
        return placement_at, visit_of_placement[placement_at], None
    placement_at = _positions(placements[:, 0], ratings[:, 0])
    visit_at = np.where(placement_at >= 0, visit_of_placement[np.maximum(placement_at, 0)], -1)
    rating_at = np.flatnonzero(visit_at >= 0)
    return placement_at[rating_at], visit_at[rating_at], rating_at


def ratings_frame(study_id: int, *, participant_ids: Sequence[int] | None = None) -> pd.DataFrame:
    """One row per rating (see the module docstring for the columns).

    Label columns are categoricals; ``rank`` is NaN when the item was not
    ranked; for studies without a rating dimension ``dimension`` is "" and
    ``rating`` NaN, one row per shown response, so best/worst analyses work.
    With ``participant_ids`` (database ids), the rows of those participants
    only. ``ratings_frames`` gives the same rows a few hundred participants at
    a time (the ratings export of a large study).
    """
    who = None if participant_ids is None else list(participant_ids)
    if who is not None and not who:
        return _empty_ratings_frame()
    labels = _study_labels(study_id)
    queries = [(_visit_query(study_id, who), 7), (_placement_query(labels.item_ids.tolist(), who), 6)]
    if labels.are_ratings:
        queries.append((_rating_query(labels.dimension_ids.tolist(), who), 3))
    visit_rows, placement_rows, *rating_rows = _read_at_once(queries)
    people = Participant.objects.filter(study_id=study_id, is_preview=False)
    return _ratings_of(labels, people if who is None else people.filter(pk__in=who),
                       visit_rows, placement_rows, rating_rows[0] if labels.are_ratings else None)


def ratings_frames(study_id: int, *, participants: QuerySet, per_frame: int = 500) -> Iterator[pd.DataFrame]:
    """``ratings_frame`` of ``participants`` (a queryset of one column of participant ids, such as a run's
    retained ones), ``per_frame`` participants at a time in id order.

    Concatenated, the frames are ``ratings_frame(study_id, participant_ids=<those ids>)``, row for row;
    memory holds one frame at a time however large the study. On PostgreSQL the database joins the
    visits, placements and ratings (the queries of ``ratings_frame``) in one pass over the study and
    hands them over participant by participant (``pgcopy.int_row_batches``): reading each frame's
    participants with a query of its own would scan the placements and ratings once per frame.
    Elsewhere each frame is ``ratings_frame`` of its participants.
    """
    if connection.vendor != "postgresql":
        for ids in _id_groups(participants, per_frame):
            yield ratings_frame(study_id, participant_ids=ids)
        return
    labels = _study_labels(study_id)
    sql, params, width = _joined_rows_query(study_id, labels, participants)
    people = Participant.objects.filter(study_id=study_id, is_preview=False)
    for rows in pgcopy.int_row_batches(sql, params, width, groups_per_batch=per_frame):
        # Each visit's and placement's columns come once per rating: keep the first of each.
        _, first_of_visit = np.unique(rows[:, 1], return_index=True)
        visit_rows = rows[np.ix_(first_of_visit, _JOINED_VISIT)]
        placed = np.flatnonzero(rows[:, _JOINED_PLACEMENT[0]] > 0)
        _, first_of_placement = np.unique(rows[placed, _JOINED_PLACEMENT[0]], return_index=True)
        placement_rows = rows[np.ix_(placed[first_of_placement], _JOINED_PLACEMENT)]
        rating_rows = (rows[np.ix_(np.flatnonzero(rows[:, _JOINED_RATING[1]] > 0), _JOINED_RATING)]
                       if labels.are_ratings else None)
        del rows
        frame = _ratings_of(labels, people.filter(pk__in=np.unique(visit_rows[:, 1]).tolist()),
                            visit_rows, placement_rows, rating_rows)
        if len(frame):
            yield frame


def _id_groups(participants: QuerySet, size: int) -> Iterator[list[int]]:
    """The ids of ``participants`` (a queryset of one column of ids) in ascending order, ``size`` at a time."""
    ids = sorted({row[0] for row in _fetch(participants)})
    for start in range(0, len(ids), size):
        yield ids[start:start + size]


# Where the columns of _visit_query, _placement_query and _rating_query sit in a row of
# _joined_rows_query: the participant first (the group), then the visit, placement and rating
# columns that do not repeat another (a placement's visit is the visit; a rating's placement the placement).
_JOINED_VISIT = [1, 0, 2, 3, 4, 5, 6]
_JOINED_PLACEMENT = [7, 1, 8, 9, 10, 11]
_JOINED_RATING = [7, 12, 13]


def _joined_rows_query(study_id: int, labels: _StudyLabels, participants: QuerySet) -> tuple[str, list, int]:
    """The block visits of ``participants``, each with its placements and their ratings: one row per
    rating (or placement without one, or visit without any) laid out as ``_JOINED_*`` say. The three
    queries of ``ratings_frame``, joined by the database (LEFT JOINs; 0 stands for none: ids start at 1)."""
    parts = [(_visit_query(study_id, participants), "v", 7), (_placement_query(labels.item_ids.tolist()), "p", 6)]
    if labels.are_ratings:
        parts.append((_rating_query(labels.dimension_ids.tolist()), "r", 3))
    joined, params = [], []
    for queryset, alias, width in parts:
        sql, part_params = queryset.query.sql_with_params()
        source = f"({sql}) AS {alias}({', '.join(f'{alias}{i}' for i in range(width))})"
        joined.append(source if alias == "v" else f"LEFT JOIN {source} ON " + ("p1 = v0" if alias == "p" else "r0 = p0"))
        params += list(part_params)
    selected = ["v1", "v0", "v2", "v3", "v4", "v5", "v6", *(f"coalesce({c}, 0)" for c in ("p0", "p2", "p3", "p4", "p5"))]
    if labels.are_ratings:
        selected += ["coalesce(r1, 0)", "coalesce(r2, 0)"]
    return f"SELECT {', '.join(selected)} FROM {' '.join(joined)}", params, len(selected)


@dataclass(frozen=True)
class _StudyLabels:
    """A study's items (ids ascending: key, scenario, model, condition), dimensions and blocks, for labelling rows."""

    item_ids: np.ndarray
    items: list[tuple]
    dimension_ids: np.ndarray
    dimension_keys: list[str]
    block_ids: np.ndarray
    block_keys: list[str]

    @property
    def are_ratings(self) -> bool:
        return bool(len(self.dimension_ids))


def _study_labels(study_id: int) -> _StudyLabels:
    items = list(
        Item.objects.filter(study_id=study_id).values_list(
            "id", "key", "block__scenario__key", "system__name", "condition__name"
        ).order_by("id")
    )
    dimension_ids, dimension_keys = _labels_by_id(
        list(Dimension.objects.filter(study_id=study_id).values_list("id", "key"))
    )
    block_ids, block_keys = _labels_by_id(list(Block.objects.filter(study_id=study_id).values_list("id", "key")))
    return _StudyLabels(np.array([item[0] for item in items], dtype=np.int64), items, dimension_ids, dimension_keys,
                        block_ids, block_keys)


def _ratings_of(labels: _StudyLabels, people: QuerySet, visit_rows: np.ndarray, placement_rows: np.ndarray,
                rating_rows: np.ndarray | None) -> pd.DataFrame:
    """The ratings frame of rows read by the queries of ``ratings_frame``; ``people`` holds (at least) their
    participants."""
    visits = _visits(visit_rows, placement_rows)
    placement_at, visit_at, rating_at = _answers(visits, placement_rows, rating_rows)
    if not len(placement_at):
        return _empty_ratings_frame()

    person_ids, pseudonyms = _labels_by_id(list(people.values_list("id", "pseudonym")))
    participant_at = _positions(person_ids, visits["participant"].to_numpy())
    dimension_at = (_positions(labels.dimension_ids, rating_rows[rating_at, 1]) if rating_at is not None
                    else np.zeros(len(placement_at), dtype=np.int64))
    # Put the row indexes in the frame's order first: each column is then gathered once.
    order = _row_order([participant_at[visit_at], visits["block_order"].to_numpy()[visit_at],
                        placement_rows[placement_at, 3], dimension_at])
    placement_at, visit_at, dimension_at = placement_at[order], visit_at[order], dimension_at[order]

    items = labels.items
    item_at = _positions(labels.item_ids, placement_rows[placement_at, 2])
    scenario_codes, scenarios = _unique_codes([item[2] for item in items])
    model_codes, models = _unique_codes([item[3] for item in items])
    condition_codes, conditions = _unique_codes([item[4] for item in items])
    if rating_at is not None:
        dimension = _categorical(dimension_at, labels.dimension_keys)
        rating = rating_rows[rating_at[order], 2].astype(float)
    else:
        dimension = _categorical(dimension_at, [""])
        rating = np.full(len(placement_at), np.nan)

    rank, choice = placement_rows[placement_at, 4], placement_rows[placement_at, 5]
    return pd.DataFrame(
        {
            "participant_id": _categorical(participant_at[visit_at], pseudonyms),
            "block_id": _categorical(_positions(labels.block_ids, visits["block"].to_numpy())[visit_at],
                                     labels.block_keys),
            "scenario": _categorical(scenario_codes[item_at], scenarios),
            "response_id": _categorical(item_at, [item[1] for item in items]),
            "model": _categorical(model_codes[item_at], models),
            "condition": _categorical(condition_codes[item_at], conditions),
            "dimension": dimension,
            "position": placement_rows[placement_at, 3],
            "rating": rating,
            "rank": np.where(rank > 0, rank, np.nan),
            "block_order": visits["block_order"].to_numpy()[visit_at],
            "seconds_on_block": visits["seconds_on_block"].to_numpy()[visit_at],
            "best": choice == 1,
            "worst": choice == 2,
            "rank_changed": visits["rank_changed"].array[visit_at],
        }
    )


def _row_order(keys: list[np.ndarray]) -> np.ndarray:
    """Participant, block order, position, dimension: the frame's documented row order.

    The four small non-negative integers are packed into one int64 key: one
    stable argsort instead of a four-key lexsort (the same order, ties kept).
    """
    keys = [key.astype(np.int64, copy=False) for key in keys]
    if not len(keys[0]) or min(int(key.min()) for key in keys) < 0:
        return np.lexsort(keys[::-1])
    packed = np.zeros(len(keys[0]), dtype=np.int64)
    for key in keys:
        packed = packed * (int(key.max()) + 1) + key
    return np.argsort(packed, kind="stable")


def _empty_ratings_frame() -> pd.DataFrame:
    frame = pd.DataFrame({name: pd.Categorical([]) for name in RATING_COLUMNS[:7]})
    for name, dtype in (("position", "int64"), ("rating", float), ("rank", float), ("block_order", "int64"),
                        ("seconds_on_block", float), ("best", bool), ("worst", bool), ("rank_changed", "boolean")):
        frame[name] = pd.Series([], dtype=dtype)
    return frame


_PARTICIPANT_FIELDS = (
    "id", "pseudonym", "external_id", "status", "started_text", "finished_text", "source",
    "imported_attention_passed", "demographics", "blocks_assigned", "completion_code",
)
_VISIT_COUNTS = ("n_blocks_answered", "n_checks", "n_failures")


def participants_frame(study_id: int, design: Design | None = None) -> pd.DataFrame:
    """One row per non-preview participant, in enrolment order.

    ``attention_passed``, ``attention_checks`` and ``attention_failures`` of
    live and imported participants as ``analysis.derived`` defines them; one
    column per demographic question of the study (its key; "" unanswered) and
    ``region`` from the study's region map ("" without one).
    """
    design = design if design is not None else study_design(study_id)
    rows = _fetch(
        Participant.objects.filter(study_id=study_id, is_preview=False)
        .annotate(started_text=_IsoText("started_at"), finished_text=_IsoText("finished_at"))
        .order_by("id")
        .values_list(*_PARTICIPANT_FIELDS)
    )
    # Counted in a query of their own: grouped together with the participant's
    # fields, every field would be carried through the join to each visit.
    counts = _fetch(
        BlockVisit.objects.filter(participant__study_id=study_id, participant__is_preview=False)
        .values("participant_id")
        .annotate(
            n_blocks_answered=Count("id", filter=derived.BLOCK_VISIT & Q(submitted_at__isnull=False)),
            n_checks=Count("id", filter=derived.ANSWERED_CHECK),
            n_failures=Count("id", filter=derived.FAILED_CHECK),
        )
        .order_by()
        .values_list("participant_id", *_VISIT_COUNTS)
    )
    raw = pd.DataFrame(rows, columns=list(_PARTICIPANT_FIELDS))
    by_participant = pd.DataFrame(counts, columns=["id", *_VISIT_COUNTS]).set_index("id")
    raw = raw.join(by_participant.reindex(raw["id"], fill_value=0).reset_index(drop=True))
    checks, failures = derived.attention_counts(
        imported=(raw["source"] == Participant.Source.IMPORT).to_numpy(dtype=bool),
        imported_passed=raw["imported_attention_passed"],
        answered=raw["n_checks"].to_numpy(),
        failed=raw["n_failures"].to_numpy(),
    )
    started, finished = _utc(raw["started_text"].tolist()), _utc(raw["finished_text"].tolist())

    frame = pd.DataFrame(
        {
            "participant_id": raw["pseudonym"].astype(object),
            "external_id": raw["external_id"].astype(object),
            "status": raw["status"].astype(object),
            "started_at": started,
            "finished_at": finished,
            "attention_passed": derived.attention_passed(checks, failures),
            "attention_failures": failures,
            "attention_checks": checks,
        }
    )
    answers = [_as_dict(value) for value in raw["demographics"]]
    for key in design.demographics:
        frame[key] = np.array([str(a.get(key, "")) for a in answers], dtype=object)
    if design.region_demographic is not None:
        frame["region"] = np.array([design.region_of(a.get(design.region_demographic)) for a in answers], dtype=object)
    else:
        frame["region"] = np.full(len(answers), "", dtype=object)
    frame["duration_minutes"] = np.asarray((finished - started).total_seconds(), dtype=float) / 60.0
    frame["blocks_assigned"] = raw["blocks_assigned"].astype(np.int64)
    frame["blocks_answered"] = raw["n_blocks_answered"].astype(np.int64)
    frame["completion_code"] = raw["completion_code"].astype(object)
    return frame[PARTICIPANT_COLUMNS_BEFORE + list(design.demographics) + PARTICIPANT_COLUMNS_AFTER]


def _as_dict(value: Any) -> dict[str, Any]:
    """A JSON answer column as a dict (SQLite hands JSON over as text when read with values_list on some paths)."""
    if isinstance(value, dict):
        return value
    if isinstance(value, str) and value:
        parsed = json.loads(value)
        return parsed if isinstance(parsed, dict) else {}
    return {}


def gold_frame(study_id: int) -> pd.DataFrame:
    """Gold scores of the study's responses: response_id, gold_score."""
    rows = list(GoldScore.objects.filter(item__study_id=study_id).order_by("item_id").values_list("item__key", "score"))
    return pd.DataFrame(
        {
            "response_id": pd.Series([r[0] for r in rows], dtype=object),
            "gold_score": pd.Series([r[1] for r in rows], dtype=float),
        }
    )


PAIRWISE_COLUMNS = pairwise.PAIRWISE_COLUMNS  # pairwise.csv's, declared by the question type
#: The answers of a pairwise block, in the order of their codes in ``_pairwise_visit_query`` (1, 2, ...).
PREFERENCES = [choice.value for choice in pairwise.Preference]


def _pairwise_visit_query(study_id: int, participant_ids: list[int] | None,
                          visit_ids: list[int] | None) -> QuerySet:
    """Answered pairwise visits as integers: id, participant, block, sequence, has a duration (0/1),
    duration in microseconds, preference (its 1-based place in ``PREFERENCES``)."""
    duration = ExpressionWrapper(F("submitted_at") - F("shown_at"), output_field=DurationField())
    visits = BlockVisit.objects.filter(derived.BLOCK_VISIT, participant__study_id=study_id,
                                       participant__is_preview=False, submitted_at__isnull=False).exclude(preference="")
    if participant_ids is not None:
        visits = visits.filter(participant_id__in=participant_ids)
    if visit_ids is not None:
        visits = visits.filter(pk__in=visit_ids)
    return visits.order_by().values_list(
        "id", "participant_id", "block_id", "sequence",
        Case(When(shown_at__isnull=False, then=Value(1)), default=Value(0)),
        Coalesce(_Microseconds(duration), Value(0)),
        Case(*(When(preference=name, then=Value(code)) for code, name in enumerate(PREFERENCES, start=1)),
             default=Value(0)),
    )


def _side_placement_query(item_ids: list[int], participant_ids: list[int] | None,
                          visit_ids: list[int] | None) -> QuerySet:
    """The left (position 1) and right (position 2) placements of the study's items: visit, position, item.

    Filtered by item, not by a join to the visits (as ``_placement_query``): the placements of visits that are
    not answered pairs are dropped when matched to the visits.
    """
    placements = ItemPlacement.objects.filter(item_id__in=item_ids, position__in=(1, 2))
    if participant_ids is not None:
        placements = placements.filter(visit__participant_id__in=participant_ids)
    if visit_ids is not None:
        placements = placements.filter(visit_id__in=visit_ids)
    return placements.order_by().values_list("visit_id", "position", "item_id")


def pairwise_frame(study_id: int, *, participant_ids: Sequence[int] | None = None,
                   visit_ids: Sequence[int] | None = None) -> pd.DataFrame:
    """One row per answered pairwise block of a non-preview participant (``PAIRWISE_COLUMNS``: pairwise.csv).

    An answered block is a submitted block visit with a ``preference``. The
    response at display position 1 is the left one, at position 2 the right
    one. ``seconds_on_block`` is ``analysis.derived``'s (as in ratings.csv).
    Rows per participant (enrolment order), in the order the blocks were
    shown. Label columns are categoricals. ``participant_ids`` (database
    ids) narrows the rows to those participants (the export reads a large
    study a few hundred at a time), ``visit_ids`` to those visits (a page of
    the API). Five small queries, whatever the size of the study.
    """
    who = None if participant_ids is None else list(participant_ids)
    which = None if visit_ids is None else list(visit_ids)
    if (who is not None and not who) or (which is not None and not which):
        return _empty_pairwise_frame()
    items = list(Item.objects.filter(study_id=study_id).values_list(
        "id", "key", "block__scenario__key", "system__name", "condition__name").order_by("id"))
    item_ids = np.array([item[0] for item in items], dtype=np.int64)
    visit_rows, side_rows = _read_at_once([(_pairwise_visit_query(study_id, who, which), 7),
                                           (_side_placement_query(item_ids.tolist(), who, which), 3)])
    if not len(visit_rows):
        return _empty_pairwise_frame()
    visit_rows = visit_rows[np.lexsort((visit_rows[:, 3], visit_rows[:, 1]))]
    visit_ids_in_order = visit_rows[:, 0]
    side_item = np.full((len(visit_rows), 2), -1, dtype=np.int64)
    at = _positions(visit_ids_in_order, side_rows[:, 0])
    found = at >= 0
    side_item[at[found], side_rows[found, 1] - 1] = side_rows[found, 2]
    # A pairwise visit shows two responses (of its block's two, or a pair drawn from more); a visit missing one is not a pair.
    paired = (side_item >= 0).all(axis=1)
    visit_rows, side_item = visit_rows[paired], side_item[paired]

    left_at, right_at = _positions(item_ids, side_item[:, 0]), _positions(item_ids, side_item[:, 1])
    scenario_codes, scenarios = _unique_codes([item[2] for item in items])
    model_codes, models = _unique_codes([item[3] for item in items])
    condition_codes, conditions = _unique_codes([item[4] for item in items])
    item_keys = [item[1] for item in items]
    person_ids, pseudonyms = _labels_by_id(list(
        Participant.objects.filter(pk__in=np.unique(visit_rows[:, 1]).tolist()).values_list("id", "pseudonym")))
    block_ids, block_keys = _labels_by_id(list(Block.objects.filter(study_id=study_id).values_list("id", "key")))
    return pd.DataFrame(
        {
            "participant_id": _categorical(_positions(person_ids, visit_rows[:, 1]), pseudonyms),
            "block_id": _categorical(_positions(block_ids, visit_rows[:, 2]), block_keys),
            # Both responses of a block belong to its scenario.
            "scenario": _categorical(scenario_codes[left_at], scenarios),
            "left_response_id": _categorical(left_at, item_keys),
            "right_response_id": _categorical(right_at, item_keys),
            "left_model": _categorical(model_codes[left_at], models),
            "right_model": _categorical(model_codes[right_at], models),
            "left_condition": _categorical(condition_codes[left_at], conditions),
            "right_condition": _categorical(condition_codes[right_at], conditions),
            "preference": _categorical(visit_rows[:, 6] - 1, PREFERENCES),
            "seconds_on_block": derived.seconds_on_block(visit_rows[:, 5], visit_rows[:, 4] == 1),
        },
        columns=PAIRWISE_COLUMNS,
    )


def pairwise_frames(study_id: int, *, participants: QuerySet, per_frame: int = 500) -> Iterator[pd.DataFrame]:
    """``pairwise_frame`` of ``participants`` (a queryset of one column of participant ids), ``per_frame``
    participants at a time in id order (as ``ratings_frames``)."""
    for ids in _id_groups(participants, per_frame):
        yield pairwise_frame(study_id, participant_ids=ids)


def _empty_pairwise_frame() -> pd.DataFrame:
    frame = pd.DataFrame({name: pd.Categorical([]) for name in PAIRWISE_COLUMNS[:-2]})
    frame["preference"] = pd.Categorical([], categories=PREFERENCES)
    frame["seconds_on_block"] = pd.Series([], dtype=float)
    return frame


#: The frames a question type's answer file is written from (``surveys.questions.AnswerFile.frame``): name ->
#: the frames of some participants (a queryset of their ids), ``per_frame`` participants each, in the file's
#: row order.
ANSWER_FRAMES: dict[str, Callable[..., Iterator[pd.DataFrame]]] = {"ratings": ratings_frames,
                                                                   "pairwise": pairwise_frames}


RESPONSE_COLUMNS = [
    "response_id", "model", "condition", "scenario", "block_id", "text", "reference_text", "is_reference",
]


def responses_frame(study_id: int) -> pd.DataFrame:
    """One row per response (item) with its text and the text of its block's reference.

    The reference of a block is its item whose condition is a reference
    condition (the lowest option if there are several); ``reference_text`` is
    "" for the references themselves and in blocks without one.
    """
    items = list(
        Item.objects.filter(study_id=study_id)
        .order_by("block__order", "block_id", "option")
        .values_list("key", "system__name", "condition__name", "block__scenario__key", "block__key", "text",
                     "condition__is_reference", "block_id")
    )
    references: dict[int, str] = {}
    for item in items:
        if item[6]:
            references.setdefault(item[7], item[5])
    return pd.DataFrame(
        [(*item[:6], "" if item[6] else references.get(item[7], ""), bool(item[6])) for item in items],
        columns=RESPONSE_COLUMNS,
    )
