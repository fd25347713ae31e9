"""PostgreSQL COPY for bulk frames: rows in (binary) and integer rows out (text), plus id reservation.

The importer writes 1.2 million placements and ratings and the frame builder
reads them back; going through Python tuples would cost a Python object per
cell. Here rows are encoded and decoded with numpy over whole columns:

* ``copy_frame_in`` writes a DataFrame with ``COPY ... FROM STDIN (FORMAT
  binary)``. Each row is built by numpy scatters into one byte buffer, so the
  client spends milliseconds where ``to_csv`` spent seconds, and the server
  skips parsing text.
* ``int_rows_out`` reads ``COPY (query) TO STDOUT`` as text and parses it with
  pandas' C reader (psycopg hands over one row per call either way; the text
  form was measured faster to collect than the binary one).
* ``reserve_ids`` takes ids from a table's identity sequence in one statement,
  so rows that reference each other can be written without reading ids back.

PostgreSQL only; callers keep their own path for SQLite.
"""

from __future__ import annotations

import io

import numpy as np
import pandas as pd
from django.db import connection
from django.db.models import Model

_SIGNATURE = b"PGCOPY\n\xff\r\n\x00" + np.zeros(2, dtype=">i4").tobytes()  # no flags, no header extension
_TRAILER = np.array([-1], dtype=">i2").tobytes()
# PostgreSQL's timestamps count microseconds from 2000-01-01 UTC.
_PG_EPOCH_US = 946_684_800_000_000
_FIXED = {"bigint": ">i8", "integer": ">i4", "smallint": ">i2", "boolean": "u1", "double precision": ">f8"}
_TIMESTAMP = "timestamp with time zone"


def _encoded(series: pd.Series, db_type: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One column as (the non-NULL values' bytes back to back, byte length per row, NULL mask)."""
    null = series.isna().to_numpy(dtype=bool)
    present = ~null
    if db_type in _FIXED or db_type == _TIMESTAMP:
        if db_type == _TIMESTAMP:
            moments = pd.to_datetime(series[present], utc=True).dt.as_unit("us")
            values = moments.to_numpy(dtype="datetime64[us]").view(np.int64) - _PG_EPOCH_US
            dtype = ">i8"
        else:
            dtype = _FIXED[db_type]
            values = series[present].to_numpy()
        raw = np.ascontiguousarray(values.astype(dtype)).view(np.uint8)
        return raw, np.where(null, 0, np.dtype(dtype).itemsize), null
    if db_type in ("varchar", "text", "character varying"):
        # Encode each distinct text once; columns repeat a few values (a status, "").
        codes, distinct = pd.factorize(series)
        encoded = [str(text).encode() for text in distinct]
        distinct_lengths = np.array([len(text) for text in encoded] + [0], dtype=np.int64)
        lengths = distinct_lengths[codes]  # code -1 (NULL) takes the trailing 0
        starts = np.cumsum(distinct_lengths) - distinct_lengths
        return _gather(np.frombuffer(b"".join(encoded), dtype=np.uint8), starts[codes[present]], lengths[present]), lengths, null
    raise TypeError(f"binary COPY does not encode {db_type} columns")


def _byte_positions(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The positions ``starts[i] .. starts[i] + lengths[i] - 1`` for every i, back to back."""
    if len(lengths) and (lengths == lengths[0]).all():
        return (starts[:, None] + np.arange(lengths[0])).ravel()
    row_of_byte = np.repeat(np.arange(len(starts)), lengths)
    first_byte = np.cumsum(lengths) - lengths
    return starts[row_of_byte] + np.arange(int(lengths.sum())) - first_byte[row_of_byte]


def _gather(source: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """``source[starts[i]:starts[i] + lengths[i]]`` for every i, back to back."""
    return source[_byte_positions(starts, lengths)]


def _scatter(buffer: np.ndarray, starts: np.ndarray, raw: np.ndarray, lengths: np.ndarray) -> None:
    """Write ``raw`` (rows' bytes back to back, ``lengths[i]`` bytes for row i) into ``buffer`` at ``starts``."""
    buffer[_byte_positions(starts, lengths)] = raw


def binary_rows(columns: list[tuple[pd.Series, str]]) -> bytes:
    """The COPY binary payload (signature, rows, trailer) of columns given with their PostgreSQL types."""
    n = len(columns[0][0])
    encoded = [_encoded(series.reset_index(drop=True), db_type) for series, db_type in columns]
    # Per row: a 2-byte field count, then per field a 4-byte length (-1 = NULL) and the value.
    row_bytes = 2 + sum(4 + lengths for _, lengths, _ in encoded)
    starts = len(_SIGNATURE) + np.cumsum(row_bytes) - row_bytes
    buffer = np.empty(len(_SIGNATURE) + int(row_bytes.sum()) + len(_TRAILER), dtype=np.uint8)
    buffer[: len(_SIGNATURE)] = np.frombuffer(_SIGNATURE, dtype=np.uint8)
    buffer[len(buffer) - len(_TRAILER):] = np.frombuffer(_TRAILER, dtype=np.uint8)
    _scatter(buffer, starts, np.full(n, len(columns), dtype=">i2").view(np.uint8), np.full(n, 2))
    at = starts + 2
    for raw, lengths, null in encoded:
        _scatter(buffer, at, np.where(null, -1, lengths).astype(">i4").view(np.uint8), np.full(n, 4))
        _scatter(buffer, (at + 4)[~null], raw, lengths[~null])
        at = at + 4 + lengths
    return buffer.tobytes()


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


def reserve_ids(model: type[Model], count: int) -> np.ndarray:
    """``count`` fresh ids from ``model``'s id sequence (ascending; other sessions may take ids in between)."""
    if count == 0:
        return np.zeros(0, dtype=np.int64)
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_get_serial_sequence(%s, %s)::regclass::oid",
                       [connection.ops.quote_name(model._meta.db_table), model._meta.pk.column])
        sequence = cursor.fetchone()[0]
    # The sequence as a constant: looked up per row, it would cost a catalog lookup per id.
    ids = int_rows_out("SELECT nextval(%s::regclass) FROM generate_series(1, %s)", [sequence, count], 1)[:, 0]
    return np.sort(ids)
