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
    with pytest.raises(TypeError, match="jsonb"):
        pgcopy.binary_rows([(pd.Series([1]), "jsonb")])


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


def test_int_rows_out_parallel_shares_rows_out_by_ranges_of_the_first_column(transactional_db, monkeypatch):
    calls = []
    share = pgcopy._share
    monkeypatch.setattr(pgcopy, "_share", lambda *args: calls.append(args[4:]) or share(*args))
    sql = "SELECT g, g %% 7, -g FROM generate_series(1, %s) AS g"
    rows = pgcopy.int_rows_out_parallel(sql, [1000], 3, splits=[300, 700])
    assert sorted(calls, key=str) == sorted([(None, 300), (300, 700), (700, None)], key=str)
    assert sorted(map(tuple, rows.tolist())) == [(g, g % 7, -g) for g in range(1, 1001)]
    assert pgcopy.int_rows_out_parallel(sql, [0], 3, splits=[5]).shape == (0, 3)


def test_inside_a_transaction_it_reads_on_the_callers_connection(db, monkeypatch):
    # Helper connections could not see this transaction's uncommitted rows.
    monkeypatch.setattr(pgcopy, "_share", lambda *args: pytest.fail("no helper inside a transaction"))
    with connection.cursor() as cursor:
        cursor.execute("CREATE TEMP TABLE mine (a bigint)")
        cursor.execute("INSERT INTO mine SELECT generate_series(1, 10)")
    rows = pgcopy.int_rows_out_parallel("SELECT a FROM mine", [], 1, splits=[5])
    assert sorted(rows[:, 0].tolist()) == list(range(1, 11))


def test_the_ratings_frame_read_by_several_connections_equals_the_one_connection_read(transactional_db, tmp_path, monkeypatch):
    from analysis import frames
    from analysis.importers import responses_import
    from bench import generate
    from tests.conftest import load_fixture

    study = load_fixture("tide.json")
    paths = generate.write(tmp_path, 40, seed=3)
    with paths["participants"].open("rb") as people, paths["ratings"].open("rb") as ratings:
        responses_import(study=study, participants_file=people, ratings_file=ratings)
    shares = []
    share = pgcopy._share
    monkeypatch.setattr(pgcopy, "_share", lambda *args: shares.append(args[4:]) or share(*args))
    monkeypatch.setattr(frames, "PARALLEL_READ_MIN_VISITS", 0)
    parallel = frames.ratings_frame(study.pk)
    assert len(shares) == frames.READ_CONNECTIONS
    monkeypatch.setattr(frames, "READ_CONNECTIONS", 1)
    single = frames.ratings_frame(study.pk)
    assert len(shares) == frames.READ_CONNECTIONS + 1 and len(single) > 1000
    pd.testing.assert_frame_equal(parallel, single)
