"""Best-worst: the most and the least <construct> response of the page (two radio groups below the cards)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from django import forms
from django.db import models
from django.db.models import Q, QuerySet
from django.utils.translation import gettext as _

from ..core_models import ItemPlacement, Study
from ..definition_parts import facing
from .base import AnswerColumns, AnswerFile, QuestionType
from .controls import Control, entered_value, field_error, letter_label, radio_options, response_title

CHOICES_FILE = "choices.csv"
CHOICE_EXPORT_COLUMNS = [
    "participant_id", "block_id", "scenario", "response_id", "model", "condition", "label", "position", "choice",
]
_CODEBOOK = {
    "label": ("the label the participant saw on the response: the letter of its display position when the "
              "study shows letters, otherwise the response's source label", "text",
              "A, B, C ... (by position), or the study's source labels; blank when the study shows neither"),
    "choice": ("what the participant chose this response as", "text", "most, least"),
}



class Choice(models.TextChoices):
    """What a response was chosen as, stored on its placement (``ItemPlacement.choice``)."""

    NONE = "", "None"
    BEST = "best", "Most"
    WORST = "worst", "Least"


#: The choice of each response shown, on its placement; at most one most and one least per page.
CHOICE_COLUMN = AnswerColumns(
    ItemPlacement,
    {"choice": models.CharField(max_length=5, choices=Choice.choices, default="", blank=True)},
    constraints=(
        models.UniqueConstraint(fields=["visit", "choice"], condition=~Q(choice=""),
                                name="placement_one_best_one_worst"),
        models.CheckConstraint(condition=Q(choice__in=Choice.values), name="placement_choice_known"),
    ),
)

FIELDS = ("most", "least")
# The stored choice of each field.
_STORED = {"most": Choice.BEST, "least": Choice.WORST}
#: The stored best/worst choice as choices.csv names it (the words the participant read).
CHOICE_NAMES = {stored: field for field, stored in _STORED.items()}


def choice_rows(participant_ids: QuerySet) -> QuerySet:
    """The responses these participants chose as best or worst, as tuples (the columns of choices.csv with the
    response's source label for ``label``, and the stored choice): per participant (enrolment order), block by
    block as shown, by display position."""
    return (
        ItemPlacement.objects.filter(visit__participant_id__in=participant_ids,
                                     choice__in=[Choice.BEST, Choice.WORST])
        .order_by("visit__participant_id", "visit__sequence", "position")
        .values_list("visit__participant__pseudonym", "item__block__key", "item__block__scenario__key", "item__key",
                     "item__system__name", "item__condition__name", "item__source_label", "position", "choice")
    )


def choice_records(rows: Iterable[tuple], *, letter_labels: bool) -> Iterator[list[Any]]:
    """Rows of ``choice_rows`` as rows of choices.csv (``CHOICE_EXPORT_COLUMNS``): ``label`` is what the
    participant saw, the letter of the display position when the study shows letters (``letter_labels``),
    otherwise the response's source label."""
    for *ids, source_label, position, choice in rows:
        yield [*ids, letter_label(position) if letter_labels else source_label, position, CHOICE_NAMES[choice]]


class BestWorstType(QuestionType):
    key = "best_worst"
    template = "surveys/questions/choices.html"
    exports = ("choices",)
    answer_files = (AnswerFile("choices", CHOICES_FILE,
                               "most and least choices of retained participants (best-worst studies)"),)
    definition_fields = {"best_worst": (bool, facing(False))}
    answer_columns = (CHOICE_COLUMN,)
    export_columns = {CHOICES_FILE: CHOICE_EXPORT_COLUMNS}
    codebook = {CHOICES_FILE: _CODEBOOK}

    def declared(self, definition) -> bool:
        return definition.best_worst

    def definition_problems(self, definition) -> list[str]:
        if not definition.best_worst:
            return []
        problems = []
        if definition.ranking:
            # Both ask for an order of the same responses; the analyses of one would contradict the other's.
            problems.append("best_worst: cannot be combined with ranking (both order the same responses); "
                            "ask one of them")
        for i, block in enumerate(definition.blocks):
            labels = [response.label for response in block.responses]
            for k, label in enumerate(labels):
                at = f"blocks[{i}].responses[{k}].label"
                if label and definition.letter_labels:
                    problems.append(f'{at}: "{label}" is a fixed label, but letter_labels shows letters by '
                                    "position; use one or the other")
                elif label and labels.count(label) > 1:
                    # A participant could not tell the two apart, and the choices.csv labels would be ambiguous.
                    problems.append(f'{at}: "{label}" is the label of another response of the block')
        return problems

    def in_study(self, study) -> bool:
        return study.best_worst_enabled

    def asked(self, page) -> bool:
        return page.study.best_worst_enabled and not page.is_check

    def _messages(self, form) -> dict[str, tuple[str, str]]:
        construct = {"construct": form.construct}
        return {
            "most": (_("Please choose the most %(construct)s response.") % construct,
                     _("Please choose the most %(construct)s response from this page.") % construct),
            "least": (_("Please choose the least %(construct)s response.") % construct,
                      _("Please choose the least %(construct)s response from this page.") % construct),
        }

    def add_fields(self, form) -> None:
        choices = [(str(p.pk), response_title(form, p)) for p in form.page.placements]
        for name, (required, invalid) in self._messages(form).items():
            form.fields[name] = forms.TypedChoiceField(
                choices=choices, coerce=int, error_messages={"required": required, "invalid_choice": invalid},
            )

    def clean(self, form, cleaned: dict[str, Any]) -> None:
        if cleaned.get("most") is not None and cleaned.get("most") == cleaned.get("least"):
            form.add_error("least", _("The least %(construct)s response must differ from the most %(construct)s "
                                      "one.") % {"construct": form.construct})

    def collect(self, form, cleaned: dict[str, Any], answers) -> None:
        answers.by_type[self.key] = (cleaned.get("most"), cleaned.get("least"))

    def controls(self, form) -> list[Control]:
        labels = {"most": _("Most %(construct)s response"), "least": _("Least %(construct)s response")}
        values = [(str(p.pk), response_title(form, p)) for p in form.page.placements]
        return [
            Control(name=name, label=label % {"construct": form.construct},
                    options=radio_options(name, values, entered_value(form, name)), error=field_error(form, name))
            for name, label in labels.items()
        ]

    def answered(self, answers) -> bool:
        return any(choice is not None for choice in self.answer(answers, (None, None)))

    def check(self, page, answers) -> str | None:
        placements = {p.pk for p in page.placements}
        best, worst = self.answer(answers, (None, None))
        if best not in placements or worst not in placements or best == worst:
            return "most and least must be two different responses on this page"
        return None

    def save(self, page, participant, answers) -> None:
        best, worst = self.answer(answers)
        chosen = {best: _STORED["most"], worst: _STORED["least"]}
        for placement in page.placements:
            placement.choice = chosen.get(placement.pk, "")
        ItemPlacement.objects.bulk_update(page.placements, ["choice"])

    def answer_file_rows(self, name: str, *, study_id: int, participant_ids: QuerySet) -> Iterator[list[Any]]:
        """choices.csv: one row per response a retained participant chose as most or least."""
        letters = Study.objects.filter(pk=study_id).values_list("letter_labels", flat=True).get()
        return choice_records(choice_rows(participant_ids).iterator(chunk_size=2000), letter_labels=letters)
