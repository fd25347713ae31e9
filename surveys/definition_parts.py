"""The building blocks of the study definition's schema, shared by ``surveys.definition`` and the question
types (``surveys.questions``), which declare their own parts of the definition."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from . import limits

KEY_PATTERN = r"^[A-Za-z0-9_.\-]+$"
Key = Annotated[str, Field(min_length=1, max_length=limits.KEY, pattern=KEY_PATTERN)]
NonEmpty = Annotated[str, Field(min_length=1)]
DimensionLabel = Annotated[str, Field(min_length=1, max_length=limits.DIMENSION_LABEL)]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)
