"""The building blocks of the study definition's schema, shared by ``surveys.definition`` and the question
types (``surveys.questions``), which declare their own parts of the definition.

Every text of the definition is a ``Text`` (or a type built on it), which refuses a NUL character: no
text column (nor PostgreSQL's jsonb) can store one. Every field of ``StudyDefinition`` says, where it is
declared, whether participants see or answer on it (``facing`` / ``not_facing``): those that they do
may not change once anyone took part (``surveys.loader``).
"""

from __future__ import annotations

from typing import Annotated, Any

from django.db import models
from django.db.backends.base.operations import BaseDatabaseOperations
from pydantic import AfterValidator, BaseModel, ConfigDict, Field
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from . import limits

NUL_MESSAGE = "holds a NUL character (\\0), which no text can contain; remove it"


def refuse_nul(value: str) -> str:
    if "\0" in value:
        raise ValueError(NUL_MESSAGE)
    return value


#: Every ``str`` of the schema carries this, last: ``Annotated[str, Field(<constraints>), NO_NUL]`` (after the
#: constraints, so that those keep their own messages: "String should have at least 1 character").
NO_NUL = AfterValidator(refuse_nul)
#: Any text of the definition without constraints of its own.
Text = Annotated[str, NO_NUL]
KEY_PATTERN = r"^[A-Za-z0-9_.\-]+$"
Key = Annotated[str, Field(min_length=1, max_length=limits.KEY, pattern=KEY_PATTERN), NO_NUL]
NonEmpty = Annotated[str, Field(min_length=1), NO_NUL]
DimensionLabel = Annotated[str, Field(min_length=1, max_length=limits.DIMENSION_LABEL), NO_NUL]


def column_max(model: type[models.Model], field_name: str) -> int:
    """The largest value the integer column ``model.field_name`` holds on every supported database
    (a PositiveIntegerField: 2147483647), so that a larger one is refused at load with its path."""
    internal_type = model._meta.get_field(field_name).get_internal_type()
    return BaseDatabaseOperations.integer_field_ranges[internal_type][1]


def column_min(model: type[models.Model], field_name: str) -> int:
    internal_type = model._meta.get_field(field_name).get_internal_type()
    return BaseDatabaseOperations.integer_field_ranges[internal_type][0]


# --- participant-facing or not ------------------------------------------------------------

PARTICIPANT_FACING_KEY = "participant_facing"


def facing(default: Any = PydanticUndefined, **kwargs: Any) -> Any:
    """A ``Field`` that participants see or answer on: once anyone took part, reloading may not change it."""
    return Field(default, json_schema_extra={PARTICIPANT_FACING_KEY: True}, **kwargs)


def not_facing(default: Any = PydanticUndefined, **kwargs: Any) -> Any:
    """A ``Field`` that only researchers see (titles, thresholds, recruitment, analyses): it may change."""
    return Field(default, json_schema_extra={PARTICIPANT_FACING_KEY: False}, **kwargs)


def facing_mark(field: FieldInfo) -> bool | None:
    """True/False as the field was declared with ``facing``/``not_facing``; None when it was not."""
    extra = field.json_schema_extra
    return extra.get(PARTICIPANT_FACING_KEY) if isinstance(extra, dict) else None


class Strict(BaseModel):
    # allow_inf_nan: a JSON/YAML "Infinity" or "NaN" is no threshold or bound (and no JSON column stores it).
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True, allow_inf_nan=False)
