"""Pairwise preference, as Chatbot Arena and ACUTE-Eval ask it: two responses side by side, which is better.

The answer is one of four (``BlockVisit.Preference``): the left response (display
position 1), the right one (position 2), a tie, or both bad. A reason is a
per-block free-text question of the study (``free_text`` with ``per_block``).
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.utils.translation import gettext as _

from ..models import BlockVisit
from .base import QuestionType
from .controls import Control, entered_value, field_error, radio_options, response_name

FIELD = "preference"
Preference = BlockVisit.Preference


class PairwiseType(QuestionType):
    key = "pairwise"
    template = "surveys/questions/pairwise.html"
    exports = ("pairwise",)

    def declared(self, definition) -> bool:
        return definition.pairwise

    def definition_problems(self, definition) -> list[str]:
        if not definition.pairwise:
            return []
        problems = [f"blocks[{i}].responses: a pairwise block shows exactly two responses, not {len(b.responses)}"
                    for i, b in enumerate(definition.blocks) if len(b.responses) != 2]
        return problems + [f"{mode}: a pairwise study already asks which of the two responses is better; {mode} "
                           "would ask it again" for mode in ("ranking", "best_worst") if getattr(definition, mode)]

    def asked(self, page) -> bool:
        return page.study.pairwise_enabled and not page.is_check

    def _choices(self, form) -> list[tuple[str, str]]:
        left, right = (response_name(p.position) for p in form.page.placements)
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
        answers.preference = cleaned[FIELD]

    def controls(self, form) -> list[Control]:
        return [Control(
            name=FIELD,
            label=_("Which response is more %(construct)s?") % {"construct": form.construct},
            options=radio_options(FIELD, self._choices(form), entered_value(form, FIELD)),
            error=field_error(form, FIELD),
        )]

    def answered(self, answers) -> bool:
        return bool(answers.preference)

    def check(self, page, answers) -> str | None:
        if len(page.placements) != 2:
            return "a pairwise block shows exactly two responses"
        if answers.preference not in Preference.values:
            return "the preference is not one of left, right, tie or both bad"
        return None

    def save(self, page, participant, answers) -> None:
        # The submit marks the visit submitted first: the database allows a preference only on a submitted block.
        BlockVisit.objects.filter(pk=page.visit.pk).update(preference=answers.preference)

    def read_spec(self, spec, *, radios, selects) -> None:
        if FIELD in radios:
            spec.pairwise = True

    def spec_asks(self, spec) -> bool:
        return spec.pairwise

    def bot_fields(self, persona, spec, quality, score, rng) -> dict[str, str]:
        left, right = spec.placements
        return {FIELD: persona.preference(score[left], score[right], rng)}
