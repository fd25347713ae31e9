"""Entry with allocation on PostgreSQL in three round trips, whatever the study's size.

The general path (``surveys.services.participant_enroll``) reads and writes a newcomer in about 17 queries,
each one built by the ORM; with 20 newcomers at a time on two cores, building them and waiting for them is
most of an entry's time. Here:

1. one call of ``surveys_participant_enrol`` (migration 0016) checks that the person did not withdraw,
   inserts them, takes the study's lock and allocates their blocks; it commits on its own, like the general
   path's first transaction, and so releases the lock;
2. one query reads the blocks' items and how often each was shown first (one counter per item, kept by
   PostgreSQL from the placements: ``FirstShownTally``; after the lock: newcomers do not queue behind it);
3. their sequence is drawn in Python from their seed (``surveys.sequence``, as on the general path), and one
   statement writes their pages and placements.

Rows are written with every column of the model, taken from the model's own defaults, so a new field with a
Python default needs no change here. Pairwise studies (whose pairs are drawn from their own counters),
previews and SQLite take the general path, as does an entry that finds lapsed holds to release first or a
person who already enrolled.
"""

from __future__ import annotations

import datetime
import json
import random
from collections import Counter
from contextlib import nullcontext
from functools import cache
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.db import DatabaseError, connection, models, transaction
from django.db.models.expressions import DatabaseDefault

from . import allocation, sequence
from .models import BlockVisit, ItemPlacement, Participant, Study
from .places import StudyClosed, StudyFull
from .study_content import study_content_get

# The function's refusals (migration 0016).
CLOSED_OR_WITHDRAWN = "HV001"
FULL = "HV002"


def applies(*, study: Study, is_preview: bool) -> bool:
    return (connection.vendor == "postgresql" and study.allocates and not is_preview
            and not study.pairwise_enabled)


def participant_enrol(*, fields: dict[str, Any]) -> Participant | None:
    """Enrol a newcomer to a study that allocates blocks (``fields``: the participant's, as the general path
    builds them). None when the general path must decide (lapsed holds, or this person already enrolled).
    Raises ``StudyClosed`` (closed, or they withdrew) or ``StudyFull``; nothing is written then."""
    study = fields["study"]
    participant = Participant(**fields)
    result = _enrol_call(participant)
    if "participant" not in result:
        return None
    participant.pk = result["participant"]
    participant._state.adding = False
    participant._state.db = connection.alias
    rng = random.Random(participant.seed)
    # Blocks in id order before the shuffle, and checks in id order, as on the general path.
    blocks = [("block", block_id) for block_id in sorted(result["blocks"])]
    checks = [("check", check_id) for check_id in study_content_get(study=study).attention_check_ids]
    pages = sequence.pages_order(blocks, checks, rng)
    try:  # the participant and their blocks are committed: anything that fails from here gives them back
        items, first_counts = _items_and_first_counts(result["blocks"])
        orders = sequence.rotations(study_key=study.pseudonym_key, items=items, first_counts=first_counts,
                                    rng=rng)
        _pages_write(participant.pk, pages, orders)
    except BaseException:
        allocation.enrolment_undo(participant_id=participant.pk)
        raise
    participant.blocks_assigned = len(blocks)
    return participant


def _enrol_call(participant: Participant) -> dict[str, Any]:
    study = participant.study
    # Every column: the function inserts the whole record (a missing one would be NULL, not its default).
    columns = tuple(field.column for field in Participant._meta.concrete_fields if not field.primary_key)
    arguments = [json.dumps(_row(participant, columns)), study.blocks_per_participant,
                 study.judgements_per_block, allocation.candidates_limit(study), participant.last_seen_at]
    try:
        # Inside a caller's transaction (tests, scripts), a savepoint keeps a refusal from ending it; a
        # request's call is a statement of its own and commits at once.
        with transaction.atomic() if connection.in_atomic_block else nullcontext():
            with connection.cursor() as cursor:
                cursor.execute("SELECT surveys_participant_enrol(%s::jsonb, %s, %s, %s, %s)", arguments)
                return json.loads(cursor.fetchone()[0])  # Django leaves jsonb as text
    except DatabaseError as error:
        state = getattr(error.__cause__, "sqlstate", None)
        if state == CLOSED_OR_WITHDRAWN:
            raise StudyClosed(study.slug) from None
        if state == FULL:
            raise StudyFull(study.slug) from None
        raise


def _items_and_first_counts(block_ids: list[int]) -> tuple[dict[int, list[int]], Counter]:
    """The blocks' items (``sequence.items_by_block``) and how often each was shown first to a participant (not
    a preview): the rotations' counts, as PostgreSQL keeps them (``FirstShownTally``)."""
    with connection.cursor() as cursor:
        # The ids as a literal array (client-side binding): planned with them, so the indexes are used.
        cursor.execute("""
            SELECT i.id, i.block_id, tally.shown_first
            FROM surveys_item i LEFT JOIN surveys_firstshowntally tally ON tally.item_id = i.id
            WHERE i.block_id = ANY (%s) ORDER BY i.option, i.id""", [block_ids])
        rows = cursor.fetchall()
    items = sequence.items_by_block((item_id, block_id) for item_id, block_id, _ in rows)
    return items, Counter({item_id: firsts for item_id, _, firsts in rows if firsts})


def _pages_write(participant_id: int, pages: list[tuple[str, int]], orders: dict[int, list[int]]) -> None:
    """The participant's pages, their placements and their count of blocks, in one statement.

    Its commit does not wait for the disk (``synchronous_commit`` off for this statement's transaction, as
    for the allocation's): nobody has answered anything yet, and the first answer's commit, which does wait,
    flushes the log up to it and so this one's too. A crash of the database in the fraction of a second
    before the log is written may lose a newcomer's entry, never an answer: their next page is then the one
    that asks them to come in again by their link (surveys/session_expired.html)."""
    visit_defaults, placement_defaults = _defaults(BlockVisit), _defaults(ItemPlacement)
    visits, placements = [], []
    for number, (kind, object_id) in enumerate(pages, start=1):
        visits.append({**visit_defaults, "participant_id": participant_id, "sequence": number,
                       "block_id": object_id if kind == "block" else None,
                       "attention_check_id": object_id if kind == "check" else None})
        if kind == "block":
            # The visit is known by its sequence number until it is written (joined back on it below).
            placements.extend({**placement_defaults, "visit_id": number, "item_id": item_id, "position": position}
                              for position, item_id in enumerate(orders[object_id], start=1))
    n_blocks = sum(1 for kind, _ in pages if kind == "block")
    with connection.cursor() as cursor:
        cursor.execute(_pages_sql(), [json.dumps(visits), json.dumps(placements), n_blocks, participant_id])


@cache
def _pages_sql() -> str:
    visit_columns = _columns(BlockVisit)
    placement_columns = _columns(ItemPlacement)
    placement_values = ", ".join("visits.id" if column == "visit_id" else f"r.{column}" for column in placement_columns)
    return f"""
        WITH visits AS (
            INSERT INTO {BlockVisit._meta.db_table} ({", ".join(visit_columns)})
            SELECT {", ".join(visit_columns)} FROM jsonb_populate_recordset(NULL::{BlockVisit._meta.db_table}, %s::jsonb)
            RETURNING id, sequence
        ), placed AS (
            INSERT INTO {ItemPlacement._meta.db_table} ({", ".join(placement_columns)})
            SELECT {placement_values}
            FROM jsonb_populate_recordset(NULL::{ItemPlacement._meta.db_table}, %s::jsonb) AS r
            JOIN visits ON visits.sequence = r.visit_id
        )
        UPDATE {Participant._meta.db_table} SET blocks_assigned = %s
        FROM (SELECT set_config('synchronous_commit', 'off', true)) AS commit_without_waiting_for_the_disk
        WHERE id = %s"""


@cache
def _columns(model: type[models.Model]) -> tuple[str, ...]:
    """The columns a new row is written with: all but the id and those left to a database default."""
    blank = model()
    return tuple(field.column for field in model._meta.concrete_fields
                 if not field.primary_key and not isinstance(field.value_from_object(blank), DatabaseDefault))


@cache
def _defaults(model: type[models.Model]) -> dict[str, Any]:
    return _row(model(), _columns(model))


def _row(instance: models.Model, columns: tuple[str, ...]) -> dict[str, Any]:
    by_column = {field.column: field for field in instance._meta.concrete_fields}
    return {column: _json_value(by_column[column].value_from_object(instance)) for column in columns}


def _json_value(value: Any) -> Any:
    if isinstance(value, (datetime.datetime, datetime.date)):
        return value.isoformat()
    if isinstance(value, DatabaseDefault):
        raise ImproperlyConfigured("a column left to a database default cannot be written by surveys_participant_enrol")
    return value
