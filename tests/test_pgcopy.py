"""Binary COPY in, text COPY out and id reservation on PostgreSQL (analysis.pgcopy), checked by reading the rows back."""

from __future__ import annotations

from datetime import datetime, timezone

import numpy as np
import pandas as pd
import pytest
from django.db import connection

from analysis import pgcopy
from surveys.models import BlockVisit, ItemPlacement, Participant

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def postgresql_only():
    if connection.vendor != "postgresql":
        pytest.skip("COPY is PostgreSQL's; SQLite imports with executemany")


def read_back(table: str) -> list[tuple]:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT * FROM {table} ORDER BY a")
        return cursor.fetchall()


def test_binary_rows_carry_every_type_and_null_exactly():
    with connection.cursor() as cursor:
        cursor.execute("CREATE TEMP TABLE copied (a bigint, b smallint, c integer, d varchar(20), e timestamptz,"
                       " f boolean, g double precision)")
    moments = pd.to_datetime([0, None, 1_700_000_000_123_456, -1_000_000], unit="us", utc=True)
    payload = pgcopy.binary_rows([
        (pd.Series([1, 2, 3, -(2**62)]), "bigint"),
        (pd.Series([5.0, np.nan, -7.0, 32767.0]), "smallint"),
        (pd.Series(pd.array([None, 2**31 - 1, 0, -3], dtype="Int64")), "integer"),
        (pd.Series(["", "héllo wörld", None, "héllo wörld"], dtype=object), "varchar"),
        (pd.Series(moments), "timestamp with time zone"),
        (pd.Series([True, None, False, True], dtype=object), "boolean"),
        (pd.Series([0.5, np.nan, -1e300, 3.0]), "double precision"),
    ])
    with connection.cursor() as cursor, cursor.cursor.copy("COPY copied FROM STDIN (FORMAT binary)") as copy:
        copy.write(payload)
    utc = timezone.utc
    assert read_back("copied") == [
        (-(2**62), 32767, -3, "héllo wörld", datetime(1969, 12, 31, 23, 59, 59, tzinfo=utc), True, 3.0),
        (1, 5, None, "", datetime(1970, 1, 1, tzinfo=utc), True, 0.5),
        (2, None, 2**31 - 1, "héllo wörld", None, None, None),
        (3, -7, 0, None, datetime(2023, 11, 14, 22, 13, 20, 123456, tzinfo=utc), False, -1e300),
    ]


def test_an_empty_frame_is_a_valid_payload():
    with connection.cursor() as cursor:
        cursor.execute("CREATE TEMP TABLE copied (a bigint, d varchar(5))")
    payload = pgcopy.binary_rows([(pd.Series([], dtype="int64"), "bigint"), (pd.Series([], dtype=object), "varchar")])
    with connection.cursor() as cursor, cursor.cursor.copy("COPY copied FROM STDIN (FORMAT binary)") as copy:
        copy.write(payload)
    assert read_back("copied") == []


def test_an_unknown_column_type_is_refused():
    with pytest.raises(TypeError, match="bytea"):
        pgcopy.binary_rows([(pd.Series([b"x"]), "bytea")])


def test_json_texts_arrive_as_jsonb_values():
    """Demographic answers are written as JSON texts; jsonb's binary form is a version byte and the text."""
    with connection.cursor() as cursor:
        cursor.execute("CREATE TEMP TABLE answers (a jsonb)")
    texts = ['{"age": "63", "race": "Two or more races"}', '{}', '{"note": "caf\u00e9 \u4e2d\u6587"}']
    payload = pgcopy.binary_rows([(pd.Series(texts, dtype=object), "jsonb")])
    with connection.cursor() as cursor, cursor.cursor.copy("COPY answers FROM STDIN (FORMAT binary)") as copy:
        copy.write(payload)
    with connection.cursor() as cursor:
        cursor.execute("SELECT a ->> 'age', a ->> 'note', a = '{}'::jsonb FROM answers")
        assert cursor.fetchall() == [("63", None, False), (None, None, True), (None, "café 中文", False)]


def test_copy_frame_in_writes_model_rows_with_their_column_types(tide):
    participant = Participant.objects.create(study=tide, external_id="x", pseudonym="p-x")
    block = tide.blocks.order_by("order").first()
    items = list(block.items.order_by("option")[:2])
    visit_id, *placement_ids = (int(i) for i in [*pgcopy.reserve_ids(BlockVisit, 1), *pgcopy.reserve_ids(ItemPlacement, 2)])
    shown = pd.Timestamp("2025-03-03T09:00:00.5Z")
    pgcopy.copy_frame_in(BlockVisit, pd.DataFrame({
        "id": [visit_id], "participant": [participant.pk], "sequence": [1], "block": [block.pk],
        "shown_at": pd.Series([shown]), "submitted_at": pd.Series([pd.NaT], dtype="datetime64[us, UTC]"),
    }))
    pgcopy.copy_frame_in(ItemPlacement, pd.DataFrame({
        "id": placement_ids, "visit": visit_id, "item": [item.pk for item in items], "position": [2, 1],
        "rank": pd.array([1, None], dtype="Int64"), "choice": ["", "best"],
    }))
    visit = BlockVisit.objects.get(pk=visit_id)
    assert (visit.participant_id, visit.block_id, visit.shown_at, visit.submitted_at) == (
        participant.pk, block.pk, shown.to_pydatetime(), None)
    assert list(ItemPlacement.objects.filter(visit=visit).order_by("id").values_list("id", "item_id", "position", "rank", "choice")) == [
        (placement_ids[0], items[0].pk, 2, 1, ""), (placement_ids[1], items[1].pk, 1, None, "best")]


def test_reserved_ids_are_fresh_and_later_rows_do_not_take_them(tide):
    reserved = pgcopy.reserve_ids(Participant, 1000)
    assert len(np.unique(reserved)) == 1000 and (np.diff(reserved) > 0).all()
    later = Participant.objects.create(study=tide, external_id="later", pseudonym="p-later")
    assert later.pk > reserved.max()
    assert len(pgcopy.reserve_ids(Participant, 0)) == 0


def test_int_rows_out_reads_an_integer_query_as_an_array():
    rows = pgcopy.int_rows_out("SELECT g, g * %s, -g FROM generate_series(1, 5) AS g", [10], 3)
    assert rows.dtype == np.int64 and rows.tolist() == [[g, g * 10, -g] for g in range(1, 6)]
    assert pgcopy.int_rows_out("SELECT 1, 2 WHERE false", [], 2).shape == (0, 2)


def test_int_rows_out_together_reads_each_query_on_its_own_connection(transactional_db, monkeypatch):
    backends = []
    read = pgcopy._read_in_snapshot

    def spy(*args):
        with connection.cursor() as cursor:  # this thread's connection: the helper's
            cursor.execute("SELECT pg_backend_pid()")
            backends.append(cursor.fetchone()[0])
        return read(*args)

    monkeypatch.setattr(pgcopy, "_read_in_snapshot", spy)
    squares = "SELECT g, g * g FROM generate_series(1, %s) AS g"
    signs = "SELECT g, -g, g %% 7 FROM generate_series(1, %s) AS g"
    first, second, empty = pgcopy.int_rows_out_together([(squares, [1000], 2), (signs, [500], 3), (squares, [0], 2)])
    assert sorted(map(tuple, first.tolist())) == [(g, g * g) for g in range(1, 1001)]
    assert sorted(map(tuple, second.tolist())) == [(g, -g, g % 7) for g in range(1, 501)]
    assert empty.shape == (0, 2)
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        mine = cursor.fetchone()[0]
    assert len(set(backends)) == 3 and mine not in backends


def test_the_helpers_read_the_callers_snapshot(transactional_db, monkeypatch):
    # A row committed after the snapshot was exported is not seen by a helper that starts later.
    with connection.cursor() as cursor:
        cursor.execute("CREATE TABLE snapshot_probe (a bigint)")
        cursor.execute("INSERT INTO snapshot_probe VALUES (1)")
    read = pgcopy._read_in_snapshot

    def later(snapshot, *args):
        from psycopg import connect

        with connect(**{k: v for k, v in connection.get_connection_params().items()
                        if k not in ("cursor_factory", "context")}, autocommit=True) as other:
            other.execute("INSERT INTO snapshot_probe VALUES (2)")
        return read(snapshot, *args)

    monkeypatch.setattr(pgcopy, "_read_in_snapshot", later)
    try:
        (rows,) = pgcopy.int_rows_out_together([("SELECT a FROM snapshot_probe", [], 1)])
        assert rows[:, 0].tolist() == [1]
    finally:
        with connection.cursor() as cursor:
            cursor.execute("DROP TABLE snapshot_probe")


def test_inside_a_transaction_it_reads_on_the_callers_connection(db, monkeypatch):
    # Helper connections could not see this transaction's uncommitted rows.
    monkeypatch.setattr(pgcopy, "_read_in_snapshot", lambda *args: pytest.fail("no helper inside a transaction"))
    with connection.cursor() as cursor:
        cursor.execute("CREATE TEMP TABLE mine (a bigint)")
        cursor.execute("INSERT INTO mine SELECT generate_series(1, 10)")
    (rows,) = pgcopy.int_rows_out_together([("SELECT a FROM mine", [], 1)])
    assert sorted(rows[:, 0].tolist()) == list(range(1, 11))


def test_the_ratings_frame_read_at_once_equals_the_one_connection_read(transactional_db, tmp_path, monkeypatch):
    from analysis import frames
    from analysis.imports.importers import responses_import
    from bench import generate
    from tests.support.studies import load_fixture

    study = load_fixture("tide.json")
    paths = generate.write(tmp_path, 40, seed=3)
    with paths["participants"].open("rb") as people, paths["ratings"].open("rb") as ratings:
        responses_import(study=study, participants_file=people, ratings_file=ratings)
    helpers = []
    read = pgcopy._read_in_snapshot
    monkeypatch.setattr(pgcopy, "_read_in_snapshot", lambda *args: helpers.append(args[3]) or read(*args))
    together = frames.ratings_frame(study.pk)
    assert sorted(helpers) == [3, 6, 7]  # ratings, placements, visits
    monkeypatch.setattr(frames, "CONCURRENT_READS", False)
    single = frames.ratings_frame(study.pk)
    assert len(helpers) == 3 and len(single) > 1000
    pd.testing.assert_frame_equal(together, single)
