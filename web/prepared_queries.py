"""Querysets compiled to SQL once per process, then run with new values.

Every participant page runs the same few statements with different ids. Building their SQL in the ORM cost
as much CPU as running them on PostgreSQL (issue 31: about 4 ms of the 11 ms ``participant_flow_get`` took,
on a machine where a block request cost 34 ms of CPU). A prepared statement builds its queryset once per
process and database, with stand-in values for its parameters, keeps the compiled SQL, and afterwards only
executes it with the caller's values:

- ``PreparedQuery`` reads: the rows become model instances as Django's ``ModelIterable`` makes them (fields,
  ``select_related`` objects and annotations, with the backend's converters);
- ``PreparedUpdate`` writes what ``queryset.update(**changes)`` writes and returns the number of rows.

A parameter is an ``int``, a ``str``, a ``datetime`` (for a DateTimeField: the backend's adaptation is applied
to the value, as the ORM applies it) or a ``list`` of ints (one compilation per length).

On PostgreSQL the statement is also prepared on the server, once per connection: planning these statements
cost PostgreSQL more than running them (the participant's flow read 1.0 ms of planning and 0.7 ms of execution,
the block page's placements 1.3 and 0.3 ms, measured with pg_stat_statements under load). Django's cursors
bind values on the client, which PostgreSQL plans anew each time; a prepared statement's cursor binds them on
the server (psycopg prepares a statement on its first execution on a connection when the connection's
``prepare_threshold`` is 0, which ``config.settings`` sets unless ``DATABASE_PREPARED_STATEMENTS`` is off, e.g.
behind a pooler in transaction mode older than PgBouncer 1.21). Every other query keeps Django's cursor.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import datetime, timedelta, timezone
from typing import Any, Generic, TypeVar

import psycopg
from django.db import connections, router, transaction
from django.db.models import Model, QuerySet
from django.db.models.query import get_related_populators
from django.db.models.sql import UpdateQuery
from django.db.models.sql.compiler import SQLCompiler

M = TypeVar("M", bound=Model)

# Stand-in values no real id, text or time takes, one per parameter, so that each one's places in the compiled
# parameters can be found; a counter keeps them distinct across every prepared statement of the process.
_stand_in_numbers = itertools.count(start=-9_000_000_000_000_000_001, step=-1)
_EPOCH = datetime(1901, 1, 1, tzinfo=timezone.utc)


def _stand_in(kind: type) -> Any:
    number = next(_stand_in_numbers)
    if kind is int:
        return number
    if kind is str:
        return f"\x1fstand-in {number}\x1f"
    return _EPOCH + timedelta(microseconds=-number % 10**15)  # datetime


def _as_parameter(kind: type, value: Any, connection) -> Any:
    """The value as the ORM hands it to the database driver."""
    if kind is datetime:
        return connection.ops.adapt_datetimefield_value(value)
    return value


class _ServerBindingCursor(psycopg.Cursor):
    """psycopg's cursor that binds values on the server. Django's query log (``CaptureQueriesContext``, the
    SQL debug log) reads the last statement from ``_query``, which psycopg 3.3 leaves unset when it runs a
    prepared statement; this cursor keeps it set (the SQL with ``$1`` placeholders)."""

    def _maybe_prepare_gen(self, pgq, **options):
        self._query = pgq
        return super()._maybe_prepare_gen(pgq, **options)


@contextmanager
def _statement_cursor(connection) -> Iterator[Any]:
    """Django's cursor (its error wrapping, query logging and execute wrappers), binding on the server where
    the connection prepares statements (PostgreSQL with a ``prepare_threshold``)."""
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql" and connection.connection.prepare_threshold is not None:
            cursor.cursor.close()
            cursor.cursor = _ServerBindingCursor(connection.connection)
        yield cursor


class PreparationError(RuntimeError):
    """The queryset cannot be prepared: one of its parameters does not reach the SQL as a plain value."""


@dataclass(frozen=True)
class _Reading:
    """What Django's ModelIterable works out for every execution of a query, worked out once."""

    converters: dict
    model_fields: slice
    init_list: list[str]


@dataclass(frozen=True)
class _Compiled:
    sql: str
    # For each parameter of the SQL: (the caller's value, its index in a list value, or None), or None for a
    # constant of the queryset.
    slots: tuple[tuple[str, int | None] | None, ...]
    constants: tuple[Any, ...]
    compiler: SQLCompiler
    reading: _Reading | None = None  # how a query's rows become instances

    def parameters(self, values: dict[str, Any]) -> tuple[Any, ...]:
        out = []
        for slot, constant in zip(self.slots, self.constants):
            if slot is None:
                out.append(constant)
            else:
                name, index = slot
                out.append(values[name] if index is None else values[name][index])
        return tuple(out)


class _Prepared:
    _kinds = (int, str, datetime, list)

    def __init__(self, build: Callable[..., Any], **parameters: type) -> None:
        unknown = {name: kind for name, kind in parameters.items() if kind not in self._kinds}
        if unknown:
            raise PreparationError(f"parameters of unsupported types: {unknown}")
        self._build = build
        self._parameters = parameters
        self._compiled: dict[tuple, _Compiled] = {}
        self._model_class: type[Model] | None = None

    def _checked(self, values: dict[str, Any]) -> None:
        if values.keys() != self._parameters.keys():
            raise TypeError(f"expected the values {sorted(self._parameters)}, got {sorted(values)}")

    def _prepared_for(self, values: dict[str, Any]) -> tuple[_Compiled, str, dict[str, Any]]:
        """The compiled statement for these values' database and list lengths, and the values as the driver
        takes them."""
        self._checked(values)
        if self._model_class is None:
            self._model_class = self._queryset(self._stand_ins({})).model
        alias = router.db_for_write(self._model_class) if self._writes else router.db_for_read(self._model_class)
        connection = connections[alias]
        lengths = tuple(len(values[name]) for name, kind in self._parameters.items() if kind is list)
        key = (alias, connection.vendor, connection.settings_dict.get("ENGINE", ""), lengths)
        compiled = self._compiled.get(key)
        if compiled is None:
            compiled = self._compiled[key] = self._compile(alias, values)
        adapted = {name: _as_parameter(kind, values[name], connection) for name, kind in self._parameters.items()}
        return compiled, alias, adapted

    def _stand_ins(self, values: dict[str, Any]) -> dict[str, Any]:
        return {
            name: [_stand_in(int) for _ in values.get(name, ())] if kind is list else _stand_in(kind)
            for name, kind in self._parameters.items()
        }

    def _compile(self, alias: str, values: dict[str, Any]) -> _Compiled:
        stand_ins = self._stand_ins(values)
        compiler = self._compiler(stand_ins, alias)
        sql, constants = compiler.as_sql()
        connection = connections[alias]
        by_value: dict[Any, tuple[str, int | None]] = {}
        for name, kind in self._parameters.items():
            if kind is list:
                by_value.update({value: (name, index) for index, value in enumerate(stand_ins[name])})
            else:
                by_value[_as_parameter(kind, stand_ins[name], connection)] = (name, None)
        slots = tuple(by_value.get(value) if isinstance(value, (int, str, datetime)) else None for value in constants)
        missing = set(by_value.values()) - set(slots)
        if missing:
            raise PreparationError(f"the values {sorted({name for name, _ in missing})} do not reach the SQL as parameters")
        if any(str(value) in sql for value in by_value):
            raise PreparationError("a value is written into the SQL text, not passed as a parameter")
        return _Compiled(sql=sql, slots=slots, constants=tuple(constants), compiler=compiler)


class PreparedQuery(_Prepared, Generic[M]):
    """``build(**values)`` returns the queryset; ``parameters`` names each value's type.

    ``run(**values)`` returns what ``list(build(**values))`` would, without building or compiling anything
    after the first call in the process for each database. ``build`` must pass every value to the ORM as a
    plain lookup value (``pk=...``, ``slug=...``): a value the ORM transforms (``__icontains``) or writes
    into the SQL text is refused when the query is prepared.
    """

    _writes = False

    def run(self, **values: Any) -> list[M]:
        compiled, alias, adapted = self._prepared_for(values)
        with _statement_cursor(connections[alias]) as cursor:
            cursor.execute(compiled.sql, compiled.parameters(adapted))
            rows = cursor.fetchall()
        return self._instances(compiled, rows, alias)

    def _queryset(self, values: dict[str, Any]) -> QuerySet:
        return self._build(**values)

    def _compiler(self, stand_ins: dict[str, Any], alias: str) -> SQLCompiler:
        queryset = self._queryset(stand_ins)
        if queryset._known_related_objects or queryset._prefetch_related_lookups:
            raise PreparationError("prefetches and known related objects are not supported")
        return queryset.query.get_compiler(using=alias)

    def _compile(self, alias: str, values: dict[str, Any]) -> _Compiled:
        compiled = super()._compile(alias, values)
        compiler = compiled.compiler
        fields = [column[0] for column in compiler.select[0 : compiler.col_count]]
        if compiler.has_composite_fields(fields):
            raise PreparationError("composite primary keys are not supported")
        select_fields = compiler.klass_info["select_fields"]
        model_fields = slice(select_fields[0], select_fields[-1] + 1)
        reading = _Reading(
            converters=compiler.get_converters(fields),
            model_fields=model_fields,
            init_list=[column[0].target.attname for column in compiler.select[model_fields]],
        )
        return replace(compiled, reading=reading)

    @staticmethod
    def _instances(compiled: _Compiled, rows: list[tuple], alias: str) -> list:
        """The rows as Django's ModelIterable turns them into instances."""
        compiler, reading = compiled.compiler, compiled.reading
        if compiler.has_extra_select:
            rows = [row[: compiler.col_count] for row in rows]
        if reading.converters:
            rows = compiler.apply_converters(rows, reading.converters)
        model_cls = compiler.klass_info["model"]
        populators = get_related_populators(compiler.klass_info, compiler.select, alias)
        annotations = compiler.annotation_col_map
        instances = []
        for row in rows:
            instance = model_cls.from_db(alias, reading.init_list, row[reading.model_fields])
            for populator in populators:
                populator.populate(row, instance)
            for name, position in annotations.items():
                setattr(instance, name, row[position])
            instances.append(instance)
        return instances


class PreparedUpdate(_Prepared):
    """``build(**values)`` returns ``(queryset, changes)``; ``run(**values)`` does ``queryset.update(**changes)``
    with the SQL compiled once per process and database, and returns the number of rows updated."""

    _writes = True

    def run(self, **values: Any) -> int:
        compiled, alias, adapted = self._prepared_for(values)
        with transaction.mark_for_rollback_on_error(using=alias), _statement_cursor(connections[alias]) as cursor:
            cursor.execute(compiled.sql, compiled.parameters(adapted))
            return cursor.rowcount

    def _queryset(self, values: dict[str, Any]) -> QuerySet:
        return self._build(**values)[0]

    def _compiler(self, stand_ins: dict[str, Any], alias: str) -> SQLCompiler:
        # What QuerySet.update builds (Django 5.2), for a queryset without annotations in its ordering.
        queryset, changes = self._build(**stand_ins)
        if queryset.query.is_sliced or queryset.query.order_by:
            raise PreparationError("a sliced or ordered queryset cannot be prepared as an update")
        query = queryset.query.chain(UpdateQuery)
        query.add_update_values(changes)
        if query.related_updates:
            raise PreparationError("updates of a parent model's fields are not supported")
        query.clear_select_clause()
        return query.get_compiler(using=alias)
