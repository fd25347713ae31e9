"""PostgreSQL bulk reads and writes: rows in (binary COPY), integer rows out, id reservation.

The importer writes 1.2 million placements and ratings and the frame builder
reads them back; going through Python tuples would cost a Python object per
cell. Here rows are encoded and decoded with numpy over whole columns:

* ``copy_frame_in`` writes a DataFrame with ``COPY ... FROM STDIN (FORMAT
  binary)``. The rows are laid out by numpy over whole columns, so the client
  spends a fraction of a second where ``to_csv`` spent seconds, and the
  server skips parsing text.
* ``int_rows_out`` reads ``COPY (query) TO STDOUT`` as text and parses it with
  pandas' C reader (psycopg hands over one row per call either way; the text
  form was measured faster to collect than the binary one).
* ``int_rows_out_together`` reads several such queries at once, each on its
  own connection from one snapshot, as text chunks the database aggregates.
* ``int_row_batches`` streams one such query a few hundred groups (say,
  participants) at a time through a server-side cursor, each group's rows
  joined into one text by the database, so memory stays flat however many
  rows there are (the ratings export).
* ``reserve_ids`` takes ids from a table's identity sequence in one statement,
  so rows that reference each other can be written without reading ids back.

PostgreSQL only; callers keep their own path for SQLite.
"""

from __future__ import annotations

import io
import queue
import re
import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pandas as pd
from django.db import DatabaseError, connection, connections, transaction
from django.db.models import Model

_SIGNATURE = b"PGCOPY\n\xff\r\n\x00" + np.zeros(2, dtype=">i4").tobytes()  # no flags, no header extension
_TRAILER = np.array([-1], dtype=">i2").tobytes()
# PostgreSQL's timestamps count microseconds from 2000-01-01 UTC.
_PG_EPOCH_US = 946_684_800_000_000
_FIXED = {"bigint": ">i8", "integer": ">i4", "smallint": ">i2", "boolean": "u1", "double precision": ">f8"}
_TIMESTAMP = "timestamp with time zone"


def _encoded(series: pd.Series, db_type: str) -> tuple[np.ndarray, np.ndarray]:
    """One column as (each row's value bytes padded to the widest, an n x width uint8 matrix;
    each row's byte length, -1 for NULL)."""
    null = series.isna().to_numpy(dtype=bool)
    if db_type in _FIXED or db_type == _TIMESTAMP:
        if db_type == _TIMESTAMP:
            moments = pd.to_datetime(series, utc=True).dt.as_unit("us")
            values = moments.to_numpy(dtype="datetime64[us]").view(np.int64) - _PG_EPOCH_US
            dtype = np.dtype(">i8")
        else:
            dtype = np.dtype(_FIXED[db_type])
            values = series.to_numpy(dtype=object if null.any() else None)
        values = np.where(null, 0, values).astype(dtype) if null.any() else values.astype(dtype)
        matrix = np.ascontiguousarray(values).view(np.uint8).reshape(len(series), dtype.itemsize)
        return matrix, np.where(null, -1, dtype.itemsize)
    if db_type in ("varchar", "text", "character varying", "jsonb"):
        # Encode each distinct text once; columns repeat a few values (a status, "").
        # jsonb's binary form is a version byte (1) and the JSON text; its column holds JSON texts.
        codes, distinct = pd.factorize(series)
        prefix = b"\x01" if db_type == "jsonb" else b""
        encoded = [prefix + str(text).encode() for text in distinct]
        width = max((len(text) for text in encoded), default=0)
        padded = np.array(encoded + [b""], dtype=f"S{max(width, 1)}").view(np.uint8).reshape(-1, max(width, 1))
        lengths = np.array([len(text) for text in encoded] + [-1], dtype=np.int64)
        return padded[codes, :width], lengths[codes]  # code -1 (NULL) takes the trailing entries
    raise TypeError(f"binary COPY does not encode {db_type} columns")


def binary_rows(columns: list[tuple[pd.Series, str]]) -> bytes:
    """The COPY binary payload (signature, rows, trailer) of columns given with their PostgreSQL types.

    Every row is first laid out at the widest size in one n x width byte
    matrix (field count, then per field a 4-byte length, -1 = NULL, and the
    value); a mask of the bytes each row really has (no value bytes for a
    NULL, a text's own length) then packs the rows back to back in one step.
    """
    n = len(columns[0][0])
    encoded = [_encoded(series.reset_index(drop=True), db_type) for series, db_type in columns]
    # A structured row type: numpy then copies whole fields rather than single bytes.
    layout = [("count", ">i2")]
    for k, (values, _) in enumerate(encoded):
        layout += [(f"length{k}", ">i4"), (f"value{k}", f"V{values.shape[1]}" if values.shape[1] else "V0")]
    rows = np.empty(n, dtype=np.dtype(layout))
    rows["count"] = len(columns)
    full = True
    for k, (values, lengths) in enumerate(encoded):
        rows[f"length{k}"] = lengths
        if values.shape[1]:
            rows[f"value{k}"] = np.ascontiguousarray(values).view(f"V{values.shape[1]}").ravel()
        full = full and bool((lengths == values.shape[1]).all())
    if full:
        return _SIGNATURE + rows.tobytes() + _TRAILER
    matrix = rows.view(np.uint8).reshape(n, rows.dtype.itemsize)
    keep = np.ones(matrix.shape, dtype=bool)
    at = 2
    for values, lengths in encoded:
        size = values.shape[1]
        if not (lengths == size).all():
            keep[:, at + 4:at + 4 + size] = np.arange(size) < lengths[:, None]
        at += 4 + size
    return _SIGNATURE + matrix[keep].tobytes() + _TRAILER


def db_type(model: type[Model], field_name: str) -> str:
    """The PostgreSQL type of a model field's column ("bigint" for a foreign key to a big auto id)."""
    field = model._meta.get_field(field_name)
    return field.db_type(connection).split("(")[0].strip() if not field.is_relation else field.target_field.rel_db_type(connection)


def copy_frame_in(model: type[Model], frame: pd.DataFrame) -> None:
    """Insert ``frame``'s rows (columns named after ``model`` fields) with one binary COPY."""
    columns = [(frame[name], db_type(model, name)) for name in frame.columns]
    quoted = ", ".join(connection.ops.quote_name(model._meta.get_field(name).column) for name in frame.columns)
    table = connection.ops.quote_name(model._meta.db_table)
    payload = binary_rows(columns)
    with connection.cursor() as cursor, cursor.cursor.copy(f"COPY {table} ({quoted}) FROM STDIN (FORMAT binary)") as copy:
        view = memoryview(payload)
        step = 1 << 20  # psycopg sends large buffers in pieces anyway; this keeps each write bounded
        for start in range(0, len(view), step):
            copy.write(view[start:start + step])


def int_rows_out(sql: str, params: list | tuple, width: int) -> np.ndarray:
    """The rows of an all-integer query as an int64 array of ``width`` columns."""
    buffer = io.BytesIO()
    with connection.cursor() as cursor, cursor.cursor.copy(f"COPY ({sql}) TO STDOUT", params) as copy:
        for chunk in copy:
            buffer.write(chunk)
    if not buffer.tell():
        return np.zeros((0, width), dtype=np.int64)
    buffer.seek(0)
    return pd.read_csv(buffer, sep="\t", header=None, dtype=np.int64, engine="c").to_numpy()


_SNAPSHOT_ID = re.compile(r"[0-9A-F]+-[0-9A-F]+(-[0-9A-F]+)?")
# Rows per text chunk in int_rows_out_together: rows sharing first-column // this.
_CHUNK_KEY_DIVISOR = 64


def int_rows_out_together(queries: Sequence[tuple[str, Sequence, int]]) -> list[np.ndarray]:
    """Several all-integer queries (sql, params, width) read at once, each by its own helper connection.

    Through one connection rows come one at a time, each formatted by the
    database and then collected by Python (about a microsecond each), one
    query after the other on one core. Here every query runs on a helper
    connection of its own, so the database works on several cores, and has
    the database join its rows into text chunks (rows sharing first column
    // 64), so Python collects thousands of chunks instead of millions of
    rows. Rows come back in no particular order.

    The helpers read the caller's snapshot (``pg_export_snapshot``), so
    together they see what one transaction would. Inside a transaction the
    helpers could not see its uncommitted writes: there each query is read by
    ``int_rows_out`` on the caller's connection.
    """
    if connection.in_atomic_block:
        return [int_rows_out(sql, params, width) for sql, params, width in queries]
    with transaction.atomic(using=connection.alias), connection.cursor() as cursor:
        cursor.execute("SELECT pg_export_snapshot()")
        snapshot = cursor.fetchone()[0]
        with ThreadPoolExecutor(len(queries)) as pool:
            return list(pool.map(lambda query: _read_in_snapshot(snapshot, *query), queries))


def _read_in_snapshot(snapshot: str, sql: str, params: Sequence, width: int) -> np.ndarray:
    """One query of ``int_rows_out_together``, read on this thread's own connection."""
    if not _SNAPSHOT_ID.fullmatch(snapshot):
        raise DatabaseError(f"unexpected snapshot id {snapshot!r}")
    helper = connections[connection.alias]  # Django gives each thread its own connection
    columns = ", ".join(f"c{i}" for i in range(width))
    try:
        with transaction.atomic(using=helper.alias), helper.cursor() as cursor:
            cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            cursor.execute(f"SET TRANSACTION SNAPSHOT '{snapshot}'")
            # Hash tables in memory rather than in batches on disk; no parallel workers
            # (the helpers already share the cores); JIT compiling costs more than it saves.
            cursor.execute("SET LOCAL work_mem = '256MB'")
            cursor.execute("SET LOCAL max_parallel_workers_per_gather = 0")
            cursor.execute("SET LOCAL jit = off")
            cursor.execute(
                f"SELECT string_agg(concat_ws(',', {columns}), E'\\n') FROM ({sql}) AS query({columns}) "
                f"GROUP BY c0 / {_CHUNK_KEY_DIVISOR}",
                list(params),
            )
            # Bytes for the C reader, chunk by chunk: a StringIO would hold four bytes per
            # character, and joining all the chunks would hold the text twice over.
            buffer = io.BytesIO()
            for (chunk,) in cursor:
                buffer.write(chunk.encode())
                buffer.write(b"\n")
    finally:
        helper.close()
    if not buffer.tell():
        return np.zeros((0, width), dtype=np.int64)
    buffer.seek(0)
    return pd.read_csv(buffer, sep=",", header=None, dtype=np.int64, engine="c").to_numpy()


def int_row_batches(sql: str, params: Sequence, width: int, *, groups_per_batch: int) -> Iterator[np.ndarray]:
    """The rows of an all-integer query (no NULLs) as int64 arrays of ``width`` columns, a batch of groups at a time.

    A group is the rows sharing the first column; batches come in ascending
    order of it, each with every row of up to ``groups_per_batch`` groups (rows
    within a batch in no particular order). The database joins each group's
    rows into one text and a server-side cursor hands over ``groups_per_batch``
    texts per fetch: Python touches one object per group instead of one per
    row, and holds a batch or two at a time however large the result.

    Outside a transaction a helper connection (a thread of its own) reads the
    next batches while the caller works on this one, so the database and
    Python work at the same time instead of taking turns. The query is one
    statement, so it sees one state of the database; the caller's other
    queries may see a later one. Inside a transaction the helper could not see
    its uncommitted writes: there the caller's connection reads each batch
    when it is asked for.
    """
    if groups_per_batch < 1:
        raise ValueError("groups_per_batch must be at least 1")
    if connection.in_atomic_block:
        yield from _batches_read(connection, sql, params, width, groups_per_batch)
        return
    ahead: queue.Queue = queue.Queue(maxsize=_BATCHES_AHEAD)
    stop = threading.Event()

    def read_ahead() -> None:
        helper = connections[connection.alias]  # Django gives each thread its own connection
        try:
            for batch in _batches_read(helper, sql, params, width, groups_per_batch):
                if not _put(ahead, batch, stop):
                    return
            _put(ahead, _END, stop)
        except BaseException as exc:  # handed to the caller, who raises it
            _put(ahead, exc, stop)
        finally:
            helper.close()

    reader = threading.Thread(target=read_ahead, name="int_row_batches", daemon=True)
    reader.start()
    try:
        while (batch := ahead.get()) is not _END:
            if isinstance(batch, BaseException):
                raise batch
            yield batch
    finally:
        # Also when the caller stops early (a download cancelled): the reader ends at its next batch.
        stop.set()
        reader.join()


# Batches read ahead of the caller: enough to keep the database busy, few enough to bound memory.
_BATCHES_AHEAD = 1
_END = object()


def _put(ahead: queue.Queue, item: object, stop: threading.Event) -> bool:
    """Put ``item`` once there is room, unless the caller has stopped (then False)."""
    while not stop.is_set():
        try:
            ahead.put(item, timeout=0.1)
            return True
        except queue.Full:
            continue
    return False


def _batches_read(database, sql: str, params: Sequence, width: int, groups_per_batch: int) -> Iterator[np.ndarray]:
    """``int_row_batches`` read on one connection, through a server-side cursor.

    The cursor lives in a transaction (a savepoint inside one): outside one,
    Django would declare it WITH HOLD, which computes the whole result before
    the first fetch and keeps it on the server.
    """
    columns = ", ".join(f"c{i}" for i in range(width))
    grouped = (
        f"SELECT string_agg(concat_ws(',', {columns}), E'\\n') FROM ({sql}) AS query({columns}) "
        f"GROUP BY c0 ORDER BY c0"
    )
    with transaction.atomic(using=database.alias):
        with database.cursor() as cursor:
            # JIT compiling a plan over a million rows costs more than it saves (as in the helpers).
            cursor.execute("SET LOCAL jit = off")
            cursor.execute("SET LOCAL work_mem = '256MB'")
        with database.chunked_cursor() as cursor:
            cursor.execute(grouped, list(params))
            while texts := cursor.fetchmany(groups_per_batch):
                # One bytes object for the C reader (a StringIO would hold four bytes per character).
                buffer = io.BytesIO("\n".join(text for (text,) in texts).encode())
                yield pd.read_csv(buffer, sep=",", header=None, dtype=np.int64, engine="c").to_numpy()


def reserve_ids(model: type[Model], count: int) -> np.ndarray:
    """``count`` fresh ids from ``model``'s id sequence (ascending; other sessions may take ids in between)."""
    if count == 0:
        return np.zeros(0, dtype=np.int64)
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_get_serial_sequence(%s, %s)::regclass::oid",
                       [connection.ops.quote_name(model._meta.db_table), model._meta.pk.column])
        sequence = cursor.fetchone()[0]
    # The sequence as a constant: looked up per row, it would cost a catalog lookup per id.
    # nextval rises with i, so id - i is constant along each unbroken run of ids: the
    # server answers with one row per run instead of one per id.
    runs = int_rows_out(
        "SELECT min(id), max(id), count(*) FROM (SELECT nextval(%s::regclass) AS id, i "
        "FROM generate_series(1, %s) AS i) AS reserved GROUP BY id - i",
        [sequence, count], 3,
    )
    if not (runs[:, 1] - runs[:, 0] + 1 == runs[:, 2]).all() or runs[:, 2].sum() != count:
        raise DatabaseError("the id sequence did not hand out unbroken runs")
    ids = np.concatenate([np.arange(low, high + 1, dtype=np.int64) for low, high, _ in runs])
    return np.sort(ids)
