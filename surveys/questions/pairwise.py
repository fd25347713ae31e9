"""Pairwise preference, as Chatbot Arena and ACUTE-Eval ask it: two responses side by side, which is better.

The answer is one of four (``Preference``, stored on the page's visit): the left response (display
position 1), the right one (position 2), a tie, or both bad. A reason is a
per-block free-text question of the study (``free_text`` with ``per_block``).
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.db import models
from django.db.models import Q
from django.utils.translation import gettext as _

from ..core_models import BlockVisit
from ..definition_parts import facing
from .base import AnswerColumns, AnswerFile, QuestionType
from .controls import Control, entered_value, field_error, radio_options, response_title

FIELD = "preference"


class Preference(models.TextChoices):
    LEFT = "left"
    RIGHT = "right"
    TIE = "tie"
    BOTH_BAD = "both_bad"


#: A pairwise page's answer, on its visit; the placement at position 1 is the left response, at 2 the right one.
PREFERENCE_COLUMN = AnswerColumns(
    BlockVisit,
    {"preference": models.CharField(max_length=8, choices=Preference.choices, default="", db_default="",
                                    blank=True)},
    constraints=(
        models.CheckConstraint(condition=Q(preference__in=["", *Preference.values]),
                               name="visit_preference_known"),
        # Only a block is answered with a preference, and only once it is submitted.
        models.CheckConstraint(
            condition=Q(preference="") | (Q(block__isnull=False) & Q(submitted_at__isnull=False)),
            name="visit_preference_on_submitted_block",
        ),
    ),
)

PAIRWISE_FILE = "pairwise.csv"
PAIRWISE_COLUMNS = [
    "participant_id", "block_id", "scenario", "left_response_id", "right_response_id", "left_model", "right_model",
    "left_condition", "right_condition", "preference", "seconds_on_block",
]
_SIDES = {"left": "left (display position 1)", "right": "right (display position 2)"}
_CODEBOOK = {
    **{f"{side}_response_id": (f"response shown on the {words}", "text", "the study's response ids (e.g. Q1-R1 in TIDE)")
       for side, words in _SIDES.items()},
    **{f"{side}_model": (f"system that wrote the {side} response", "text",
                         "the study's systems (the reference's author counts as a system)") for side in _SIDES},
    **{f"{side}_condition": (f"condition of the {side} response", "text",
                             "the study's conditions (e.g. zero-shot, fine-tuned, reference in TIDE)") for side in _SIDES},
    "preference": ("the participant's verdict: the left response is better, the right one is better, they are "
                   "equally good, or both are bad", "text", "left, right, tie, both_bad"),
    "seconds_on_block": ("seconds from first showing the block to its submission", "number",
                         ">= 0; blank when the block was never submitted"),
}


class PairwiseType(QuestionType):
    key = "pairwise"
    template = "surveys/questions/pairwise.html"
    exports = ("pairwise",)
    answer_columns = (PREFERENCE_COLUMN,)
    side_by_side = True
    # The rows of the analyses' pairwise frame, so seconds_on_block is the analyses' (as in ratings.csv).
    answer_files = (AnswerFile("pairwise", PAIRWISE_FILE, "pairwise preferences (left, right, tie, both bad) of "
                               "retained participants (pairwise studies)", frame="pairwise"),)
    definition_fields = {"pairwise": (bool, facing(
        False, description="pairwise preference: each block shows two responses side by side and asks "
        "which is better: the left, the right, a tie, or both bad (as Chatbot Arena and ACUTE-Eval run it); "
        "a block of three or more responses shows two of them to each participant, drawn among its least-shown "
        "pairs. A per-block free_text question serves as the reason",
    ))}
    export_columns = {PAIRWISE_FILE: PAIRWISE_COLUMNS}
    codebook = {PAIRWISE_FILE: _CODEBOOK}

    def declared(self, definition) -> bool:
        return definition.pairwise

    def definition_problems(self, definition) -> list[str]:
        if not definition.pairwise:
            return []
        # A block of three or more responses (systems) shows two of them at a time: the pair is drawn for each
        # participant among the block's least-shown pairs (surveys.allocation).
        return [f"{mode}: a pairwise study already asks which of the two responses is better; {mode} "
                           "would ask it again" for mode in ("ranking", "best_worst") if getattr(definition, mode)]

    def in_study(self, study) -> bool:
        return study.pairwise_enabled

    def asked(self, page) -> bool:
        return page.study.pairwise_enabled and not page.is_check

    def _choices(self, form) -> list[tuple[str, str]]:
        left, right = (response_title(form, p) for p in form.page.placements)
        return [
            (Preference.LEFT, _("%(response)s is better") % {"response": left}),
            (Preference.RIGHT, _("%(response)s is better") % {"response": right}),
            (Preference.TIE, _("Tie: both are about as good")),
            (Preference.BOTH_BAD, _("Both are bad")),
        ]

    def add_fields(self, form) -> None:
        form.fields[FIELD] = forms.ChoiceField(
            choices=self._choices(form),
            error_messages={
                "required": _("Please say which response is more %(construct)s, or choose Tie or Both are bad.")
                % {"construct": form.construct},
                "invalid_choice": _("Please choose one of the answers offered."),
            },
        )

    def foreign(self, form, name: str) -> bool:
        return name == FIELD and not self.asked(form.page)

    def collect(self, form, cleaned: dict[str, Any], answers) -> None:
        answers.by_type[self.key] = cleaned[FIELD]

    def controls(self, form) -> list[Control]:
        return [Control(
            name=FIELD,
            label=_("Which response is more %(construct)s?") % {"construct": form.construct},
            options=radio_options(FIELD, self._choices(form), entered_value(form, FIELD)),
            error=field_error(form, FIELD),
        )]

    def answered(self, answers) -> bool:
        return bool(self.answer(answers, ""))

    def check(self, page, answers) -> str | None:
        if len(page.placements) != 2:
            return "a pairwise block shows exactly two responses"
        if self.answer(answers, "") not in Preference.values:
            return "the preference is not one of left, right, tie or both bad"
        return None

    def save(self, page, participant, answers) -> None:
        # The submit marks the visit submitted first: the database allows a preference only on a submitted block.
        BlockVisit.objects.filter(pk=page.visit.pk).update(preference=self.answer(answers))
