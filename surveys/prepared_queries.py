"""Querysets compiled to SQL once per process, then run with new values.

Every participant page runs the same few queries with different ids. Building their SQL in the ORM cost
as much CPU as running them on PostgreSQL (issue 31: about 4 ms of the 11 ms ``participant_flow_get`` took,
on a machine where a block request cost 34 ms of CPU). A ``PreparedQuery`` builds its queryset once per
process and database, with stand-in values for its parameters, keeps the compiled SQL and the layout of its
columns, and afterwards only executes that SQL and turns the rows into model instances as Django's
``ModelIterable`` does (fields, ``select_related`` objects and annotations, with the backend's converters).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from django.db import connections, router
from django.db.models import Model, QuerySet
from django.db.models.query import get_related_populators
from django.db.models.sql.compiler import SQLCompiler

M = TypeVar("M", bound=Model)

# Stand-in values no real id or text takes, one per parameter, so that each one's places in the compiled
# parameters can be found; a counter keeps them distinct across every prepared query of the process.
_stand_in_numbers = itertools.count(start=-9_000_000_000_000_000_001, step=-1)
_STAND_IN_MAKERS: dict[type, Callable[[], Any]] = {
    int: lambda: next(_stand_in_numbers),
    str: lambda: f"\x1fstand-in {next(_stand_in_numbers)}\x1f",
}


class PreparationError(RuntimeError):
    """The queryset cannot be prepared: one of its parameters does not reach the SQL as a plain value."""


@dataclass(frozen=True)
class _Compiled:
    sql: str
    # For each parameter of the SQL: the name of the caller's value, or None for a constant of the queryset.
    slots: tuple[str | None, ...]
    constants: tuple[Any, ...]
    compiler: SQLCompiler
    init_list: tuple[str, ...]
    model_fields: slice

    def parameters(self, values: dict[str, Any]) -> tuple[Any, ...]:
        return tuple(values[slot] if slot else constant for slot, constant in zip(self.slots, self.constants))


class PreparedQuery(Generic[M]):
    """``build(**values)`` returns the queryset; ``parameters`` names each value's type (int or str).

    ``run(**values)`` returns what ``list(build(**values))`` would, without building or compiling anything
    after the first call in the process for each database. ``build`` must pass every value to the ORM as a
    plain lookup value (``pk=...``, ``slug=...``): a value the ORM transforms (``__icontains``) or writes
    into the SQL text is refused when the query is prepared.
    """

    def __init__(self, build: Callable[..., QuerySet[M]], **parameters: type) -> None:
        unknown = {name: kind for name, kind in parameters.items() if kind not in _STAND_IN_MAKERS}
        if unknown:
            raise PreparationError(f"parameters of unsupported types: {unknown}")
        self._build = build
        self._parameters = parameters
        self._compiled: dict[tuple[str, str, str], _Compiled] = {}

    def run(self, **values: Any) -> list[M]:
        if values.keys() != self._parameters.keys():
            raise TypeError(f"expected the values {sorted(self._parameters)}, got {sorted(values)}")
        compiled, alias = self._compiled_for_database()
        connection = connections[alias]
        with connection.cursor() as cursor:
            cursor.execute(compiled.sql, compiled.parameters(values))
            rows = cursor.fetchall()
        return self._instances(compiled, rows, alias)

    def _compiled_for_database(self) -> tuple[_Compiled, str]:
        # The model's database; a prepared query is compiled once per database (and per backend, should a
        # test point the alias elsewhere).
        model = self._model()
        alias = router.db_for_read(model)
        connection = connections[alias]
        key = (alias, connection.vendor, connection.settings_dict.get("ENGINE", ""))
        compiled = self._compiled.get(key)
        if compiled is None:
            compiled = self._compiled[key] = self._compile(alias)
        return compiled, alias

    def _model(self) -> type[Model]:
        model = getattr(self, "_model_class", None)
        if model is None:
            model = self._model_class = self._build(**self._stand_ins()).model
        return model

    def _stand_ins(self) -> dict[str, Any]:
        return {name: _STAND_IN_MAKERS[kind]() for name, kind in self._parameters.items()}

    def _compile(self, alias: str) -> _Compiled:
        stand_ins = self._stand_ins()
        queryset = self._build(**stand_ins)
        if queryset._known_related_objects or queryset._prefetch_related_lookups:
            raise PreparationError("prefetches and known related objects are not supported")
        compiler = queryset.query.get_compiler(using=alias)
        sql, constants = compiler.as_sql()
        by_value = {value: name for name, value in stand_ins.items()}
        slots = tuple(by_value.get(value) if isinstance(value, (int, str)) else None for value in constants)
        missing = set(stand_ins) - set(slots)
        if missing:
            raise PreparationError(f"the values {sorted(missing)} do not reach the SQL as parameters")
        if any(str(value) in sql for value in stand_ins.values()):
            raise PreparationError("a value is written into the SQL text, not passed as a parameter")
        select_fields = compiler.klass_info["select_fields"]
        model_fields = slice(select_fields[0], select_fields[-1] + 1)
        init_list = tuple(column[0].target.attname for column in compiler.select[model_fields])
        return _Compiled(sql=sql, slots=slots, constants=tuple(constants), compiler=compiler,
                         init_list=init_list, model_fields=model_fields)

    @staticmethod
    def _instances(compiled: _Compiled, rows: list[tuple], alias: str) -> list[M]:
        """The rows as Django's ModelIterable turns them into instances."""
        compiler = compiled.compiler
        if compiler.has_extra_select:
            rows = [row[: compiler.col_count] for row in rows]
        model_cls = compiler.klass_info["model"]
        populators = get_related_populators(compiler.klass_info, compiler.select, alias)
        annotations = compiler.annotation_col_map
        instances = []
        for row in compiler.results_iter([rows]):
            instance = model_cls.from_db(alias, list(compiled.init_list), row[compiled.model_fields])
            for populator in populators:
                populator.populate(row, instance)
            for name, position in annotations.items():
                setattr(instance, name, row[position])
            instances.append(instance)
        return instances
