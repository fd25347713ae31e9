"""Rating: every response on every dimension of the study, on the dimension's scale (radio buttons in its card)."""

from __future__ import annotations

import re
from typing import Any

from django import forms
from django.db import models
from django.db.models import Q
from django.utils.translation import gettext as _
from pydantic import Field, model_validator

from ..core_models import Dimension, ItemPlacement
from ..definition_parts import DimensionLabel, Key, Strict, Text, facing
from .base import AnswerFile, QuestionType
from .controls import Control, entered_value, field_error, radio_options, scale_label

FIELD_PATTERN = re.compile(r"^rate-(\d+)-(.+)$")

RATINGS_FILE = "ratings.csv"
#: ratings.csv's columns: those of the analyses' ratings frame, in its row order; a study rating more than one
#: dimension gets a trailing ``dimension`` column (``RatingType.answer_file_columns``).
RATINGS_COLUMNS = [
    "participant_id", "block_id", "scenario", "response_id", "model", "condition", "position", "rating", "rank",
    "block_order", "seconds_on_block", "rank_changed",
]
_CODEBOOK = {
    "block_order": ("the block's place in the participant's sequence (attention checks not counted)", "integer",
                    ">= 1"),
    "seconds_on_block": ("seconds from first showing the block to its submission", "number",
                         ">= 0; blank when the block was never submitted"),
    "dimension": ("rating dimension (key of the rating scale); present only when the study rates more than one "
                  "dimension", "text", "the study's dimension keys"),
}


class Rating(models.Model):
    """A response's rating on one of the study's dimensions (the rating type's answers: its own model)."""

    # The unique constraints below lead with this column, so their index serves
    # lookups and cascades; a separate one would only slow every insert.
    placement = models.ForeignKey(ItemPlacement, on_delete=models.CASCADE, related_name="ratings", db_index=False)
    dimension = models.ForeignKey(Dimension, on_delete=models.PROTECT, related_name="ratings")
    value = models.SmallIntegerField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["placement", "dimension"], name="rating_unique_per_dimension"),
            # The exact range is per dimension and checked by the services;
            # no scale in this product goes outside 0..100.
            models.CheckConstraint(condition=Q(value__gte=0) & Q(value__lte=100), name="rating_value_sane"),
        ]


class DimensionDef(Strict):
    key: Key
    label: DimensionLabel
    min: int = Field(ge=0, le=100)
    max: int = Field(ge=1, le=100)
    labels: dict[Text, Text] = Field(default_factory=dict, description="scale point -> label; at least min and max")

    @model_validator(mode="after")
    def _scale(self) -> "DimensionDef":
        if self.max <= self.min:
            raise ValueError(f"max ({self.max}) must be greater than min ({self.min})")
        points = {str(p) for p in range(self.min, self.max + 1)}
        stray = sorted(set(self.labels) - points)
        if stray:
            raise ValueError(f"labels for points outside the scale: {', '.join(stray)}")
        return self


def field_name(placement_id: int, dimension_key: str) -> str:
    return f"rate-{placement_id}-{dimension_key}"


class RatingType(QuestionType):
    key = "rating"
    exports = ("ratings",)
    # The rows of the analyses' ratings frame, so block_order, seconds_on_block and rank_changed are the
    # analyses' (``analysis.derived``). The frame holds ratings and ranks as floats, to carry NaN.
    answer_files = (AnswerFile("ratings", RATINGS_FILE, "cleaned ratings of retained participants", frame="ratings",
                               whole_numbers=frozenset({"position", "rating", "rank", "block_order"}),
                               every_study=True),)
    definition_fields = {"dimensions": (list[DimensionDef], facing(default_factory=list))}
    export_columns = {RATINGS_FILE: RATINGS_COLUMNS}
    codebook = {RATINGS_FILE: _CODEBOOK}

    def declared(self, definition) -> bool:
        return bool(definition.dimensions)

    def in_study(self, study) -> bool:
        return study.dimensions.exists()

    def asked(self, page) -> bool:
        return bool(page.dimensions) and not page.is_check

    def add_fields(self, form) -> None:
        for placement in form.page.placements:
            number = placement.position
            for dimension in form.page.dimensions:
                form.fields[field_name(placement.pk, dimension.key)] = forms.TypedChoiceField(
                    choices=[(str(p), str(p)) for p in dimension.points],
                    coerce=int,
                    error_messages={
                        "required": _("Please rate Response %(number)s for %(dimension)s.")
                        % {"number": number, "dimension": dimension.label.lower()},
                        "invalid_choice": _("Please rate Response %(number)s from %(min)s to %(max)s.")
                        % {"number": number, "min": dimension.scale_min, "max": dimension.scale_max},
                    },
                )

    def foreign(self, form, name: str) -> bool:
        match = FIELD_PATTERN.match(name)
        if not match:
            return False
        keys = {d.key for d in form.page.dimensions} if self.asked(form.page) else set()
        return int(match.group(1)) not in form.numbers or match.group(2) not in keys

    def collect(self, form, cleaned: dict[str, Any], answers) -> None:
        answers.by_type[self.key] = {
            (p.pk, d.pk): cleaned[field_name(p.pk, d.key)] for p in form.page.placements for d in form.page.dimensions
        }

    def card_controls(self, form, placement) -> list[Control]:
        controls = []
        for dimension in form.page.dimensions:
            name = field_name(placement.pk, dimension.key)
            values = [(str(p), scale_label(dimension, p)) for p in dimension.points]
            controls.append(Control(
                name=name,
                label=_("Response %(number)s: %(dimension)s") % {"number": placement.position,
                                                                  "dimension": dimension.label},
                options=radio_options(name, values, entered_value(form, name)),
                error=field_error(form, name),
            ))
        return controls

    def answered(self, answers) -> bool:
        return bool(self.answer(answers, {}))

    def check(self, page, answers) -> str | None:
        expected = {(p.pk, d.pk) for p in page.placements for d in page.dimensions}
        ratings = self.answer(answers, {})
        if set(ratings) != expected:
            return "the ratings do not match the responses on this page"
        scales = {d.pk: d for d in page.dimensions}
        for (_pid, did), value in ratings.items():
            if not scales[did].scale_min <= value <= scales[did].scale_max:
                return f"rating {value} is outside the scale"
        return None

    def answer_file_columns(self, name: str, *, study) -> list[str]:
        # With one dimension the column would only repeat it.
        return RATINGS_COLUMNS + (["dimension"] if study.dimensions.count() > 1 else [])

    def save(self, page, participant, answers) -> None:
        Rating.objects.bulk_create(
            Rating(placement_id=pid, dimension_id=did, value=value) for (pid, did), value in self.answer(answers, {}).items()
        )
