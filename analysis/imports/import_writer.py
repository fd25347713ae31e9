"""Writing an import: participants, visits, placements and ratings in one bulk write per table.

Every id is known before anything is written (``new_ids``), so rows are
linked with numpy instead of reading ids back. PostgreSQL gets one binary
``COPY`` per table (``analysis.pgcopy``), SQLite ``executemany`` batches.
"""

from __future__ import annotations

import json

import itertools
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np
import pandas as pd
from django.db import DatabaseError, connection, transaction
from django.db.models import Max, Model

from analysis import pgcopy
from analysis.imports.csv_columns import run_codes
from surveys.models import BlockVisit, ItemPlacement, Participant, Rating, Study
from surveys.pseudonyms import pseudonym_for


@dataclass
class ParsedParticipant:
    """One valid row of participants.csv, as the importer read it and this module writes it."""

    line: int
    external_id: str
    started_at: datetime
    finished_at: datetime | None
    attention_passed: bool | None
    demographics: dict[str, str]


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


def insert_rows(model: type[Model], frame: pd.DataFrame) -> None:
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


def new_ids(model: type[Model], count: int) -> np.ndarray:
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


def _participant_rows(study: Study, new: list[ParsedParticipant], rows: pd.DataFrame) -> pd.DataFrame:
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
        "id": new_ids(Participant, len(new)),
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
        # JSON text: the binary COPY and SQLite both take the column as text.
        "demographics": [json.dumps({k: v for k, v in p.demographics.items() if v}) for p in new],
    })
    return _with_field_defaults(Participant, frame)


def skip_foreign_key_triggers() -> bool:
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


def write(study: Study, new: list[ParsedParticipant], rows: pd.DataFrame) -> tuple[int, int, int]:
    """Insert the new participants with their visits, placements and ratings; returns the three counts.

    Every id is known before anything is written (``new_ids``), so rows are
    linked with numpy instead of reading ids back, and each table is one bulk write.
    """
    rows = rows[rows["external"].isin({p.external_id for p in new})]
    participants = _participant_rows(study, new, rows)
    insert_rows(Participant, participants)

    participant = pd.Index(participants["external_id"]).get_indexer(rows["external"])
    block = rows["block_id"].to_numpy(dtype=np.int64)
    item = rows["item_id"].to_numpy(dtype=np.int64)
    started, line = rows["started"].to_numpy(), rows["line"].to_numpy()

    # One visit per participant x block: its first row carries the block's times. Visits are
    # numbered (sequence) and written in the order the participant saw them.
    visit_of_row, first = run_codes([participant, block], len(rows))
    order = np.lexsort((line[first], started[first], participant[first]))
    shown = first[order]
    visit_ids = np.empty(len(first), dtype=np.int64)
    visit_ids[order] = new_ids(BlockVisit, len(first))
    insert_rows(BlockVisit, pd.DataFrame({
        "id": visit_ids[order],
        "participant": participants["id"].to_numpy()[participant[shown]],
        "sequence": pd.Series(participant[shown]).groupby(participant[shown]).cumcount().to_numpy() + 1,
        "block": block[shown],
        "shown_at": _utc_times(started[shown]),
        "submitted_at": _utc_times(rows["submitted"].to_numpy()[shown]),
    }))

    # One placement per participant x response (a response is shown once, rated per dimension).
    placement_of_row, first = run_codes([participant, item], len(rows))
    placement_ids = new_ids(ItemPlacement, len(first))
    insert_rows(ItemPlacement, pd.DataFrame({
        "id": placement_ids,
        "visit": visit_ids[visit_of_row[first]],
        "item": item[first],
        "position": rows["position"].to_numpy(dtype=np.int64)[first],
        "rank": pd.array(rows["rank"].to_numpy()[first], dtype="Int64"),
        "choice": "",
    }))

    rated = rows["value"].notna().to_numpy()
    insert_rows(Rating, pd.DataFrame({
        "placement": placement_ids[placement_of_row[rated]],
        "dimension": rows["dimension_id"].to_numpy()[rated].astype(np.int64),
        "value": rows["value"].to_numpy()[rated].astype(np.int64),
    }))
    return len(visit_ids), len(placement_ids), int(rated.sum())


def refresh_planner_statistics() -> None:
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
