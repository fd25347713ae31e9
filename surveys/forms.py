"""Validation of the participant pages, and the view-model their templates render.

Field names carry placement ids (never item ids: those follow the order of the
definition file and would hint at which response is the reference):
``rate-<placement>-<dimension key>``, ``rank-<placement>``, ``most``/``least``
(value: a placement id), ``preference``, ``text-<question key>``, ``attention``. Each question type
brings its own fields (``surveys.questions``).
"""

from __future__ import annotations

from dataclasses import dataclass

from django import forms
from django.core.exceptions import NON_FIELD_ERRORS
from django.utils.functional import cached_property
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from . import demographics
from .models import DemographicQuestion, FreeTextQuestion
from .questions import QUESTION_TYPES, Part
from .questions.controls import (
    Control,
    Option,
    entered_value,
    field_error,
    free_text_messages,
    radio_options,
    response_title,
    scale_label,
)
from .questions.ranking import script_texts
from .selectors import VisitPage
from .page_answers import PageAnswers

TAMPER_MESSAGE = gettext_lazy("Some answers do not belong to this page. Please reload the page and answer again.")


@dataclass
class ResponseCard:
    number: int
    placement_id: int
    text: str
    title: str  # "Response 4 (D)": the heading, and the name the page's questions use
    ratings: list[Control]


class PageForm(forms.Form):
    """The answers of one block or attention-check page: the fields, rules and controls of every question
    type the page asks (``surveys.questions``), or the attention check's one question."""

    def __init__(self, data=None, *, page: VisitPage, initial: dict[str, str] | None = None):
        super().__init__(data, initial=initial)
        self.page = page
        study = page.study
        self.letter_labels = study.letter_labels
        self.construct = study.construct  # the study's word for what is judged: "the most <construct> response"
        self.types = [kind for kind in QUESTION_TYPES if kind.asked(page)]
        self.numbers = {p.pk: p.position for p in page.placements}
        if page.is_check:
            self._add_attention_field()
        for kind in self.types:
            kind.add_fields(self)

    @property
    def side_by_side(self) -> bool:
        """A pairwise page shows its two responses next to each other (where the screen is wide enough)."""
        return any(kind.side_by_side for kind in self.types)

    def _add_attention_field(self) -> None:
        dimension = self.page.dimensions[0]
        self.fields["attention"] = forms.TypedChoiceField(
            choices=[(str(p), str(p)) for p in dimension.points],
            coerce=int,
            error_messages={
                "required": _("Please choose an answer for this statement."),
                "invalid_choice": _("Please choose a point from %(min)s to %(max)s.")
                % {"min": dimension.scale_min, "max": dimension.scale_max},
            },
        )

    def clean(self):
        cleaned = super().clean()
        if any(kind.foreign(self, name) for name in self.data for kind in QUESTION_TYPES):
            raise forms.ValidationError(TAMPER_MESSAGE, code="tampered")
        for kind in self.types:
            kind.clean(self, cleaned)
        return cleaned

    def page_answers(self) -> PageAnswers:
        if self.page.is_check:
            return PageAnswers(attention_value=self.cleaned_data["attention"])
        answers = PageAnswers()
        for kind in self.types:
            kind.collect(self, self.cleaned_data, answers)
        return answers

    # --- what the template renders ---------------------------------------------------

    @cached_property
    def cards(self) -> list[ResponseCard]:
        """The response cards with their rating controls, built once per form: the page draws them, the
        ranking's rows and the error summary read them again. Read after validation (their errors)."""
        return [
            ResponseCard(
                number=placement.position,
                placement_id=placement.pk,
                text=placement.item.text,
                title=response_title(self, placement),
                ratings=[c for kind in self.types for c in kind.card_controls(self, placement)],
            )
            for placement in self.page.placements
        ]

    def parts(self) -> list[Part]:
        """The questions below the cards, type by type: each type's partial with its controls."""
        return [Part(template=kind.template, controls=kind.controls(self), form=self)
                for kind in self.types if kind.template]

    def script_texts(self) -> str:
        return script_texts()

    def attention_control(self) -> Control:
        dimension = self.page.dimensions[0]
        values = [(str(p), scale_label(dimension, p)) for p in dimension.points]
        return Control(
            name="attention",
            label=self.page.visit.attention_check.text,
            options=radio_options("attention", values, entered_value(self, "attention")),
            error=field_error(self, "attention"),
        )

    def error_summary(self) -> list[tuple[str, str]]:
        """(anchor id, message) pairs, in page order, for the summary at the top."""
        if not self.is_bound or not self.errors:
            return []
        if self.page.is_check:
            controls = [self.attention_control()]
        else:
            # The ratings sit in the response cards, every other type's questions below them: page order.
            controls = [c for card in self.cards for c in card.ratings]
            controls += [c for kind in self.types for c in kind.controls(self)]
        out = [("page-form", message) for message in self.non_field_errors()]
        for control in controls:
            out += [(control.anchor, message) for message in self.errors.get(control.name, [])]
        # A message shared by several fields (a rank given twice) is listed once, at the first.
        listed: dict[str, str] = {}
        for anchor, message in out:
            listed.setdefault(message, anchor)
        return [(anchor, message) for message, anchor in listed.items()]


class DemographicAnswerField(forms.CharField):
    """The answer to one demographic question: checked by the question's rules, cleaned to its stored form."""

    def __init__(self, question: DemographicQuestion):
        super().__init__(required=False, strip=True)
        self.question = question

    def clean(self, value) -> str:
        value = super().clean(value)
        if problem := demographics.answer_problem(self.question, value):
            raise forms.ValidationError(problem, code="invalid")
        return demographics.stored_answer(self.question, value)


class DemographicsForm(forms.Form):
    """Every question about the participant is optional and accepts "Prefer not to answer"; a final written
    question may be required (``asks_required``: the page then says so instead of "every question is optional").

    Listed questions (choice, US state) are selects; number and short-text
    questions are typed. The rules live in ``surveys.demographics``.
    """

    def __init__(
        self, data=None, *, questions: list[DemographicQuestion], end_questions: list[FreeTextQuestion],
        initial: dict[str, str] | None = None,
    ):
        super().__init__(data, initial=initial)
        self.questions = questions
        self.end_questions = end_questions
        for question in questions:
            self.fields[question.key] = DemographicAnswerField(question)
        for question in end_questions:
            self.fields[f"text-{question.key}"] = forms.CharField(
                max_length=question.max_length,
                required=question.required,
                error_messages=free_text_messages(),
            )

    @property
    def asks_required(self) -> bool:
        return any(question.required for question in self.end_questions)

    def controls(self) -> list[Control]:
        out = []
        for question in self.questions:
            chosen = entered_value(self, question.key)
            options = []
            if demographics.offers_list(question):
                options = [Option("", _("Choose an answer"), selected=chosen == "")] + [
                    Option(value, label, selected=chosen == value)
                    for value, label in demographics.offered_answers(question)
                ]
            out.append(
                Control(
                    name=question.key,
                    label=question.prompt,
                    options=options,
                    value=chosen,
                    max_length=question.max_length if question.kind == DemographicQuestion.Kind.TEXT else None,
                    kind=question.kind,
                    minimum=question.min_value,
                    maximum=question.max_value,
                    whole_numbers=question.integer,
                    error=field_error(self, question.key),
                )
            )
        return out

    def text_controls(self) -> list[Control]:
        return [
            Control(
                name=f"text-{q.key}",
                label=q.prompt,
                value=entered_value(self, f"text-{q.key}"),
                error=field_error(self, f"text-{q.key}"),
                max_length=q.max_length,
                required=q.required,
            )
            for q in self.end_questions
        ]

    def add_required_errors(self, question_keys: list[str]) -> None:
        """The service refused the page for these unanswered required questions: each gets its field's error;
        one this page does not ask (a question of a block) goes to the top of the form."""
        for key in question_keys:
            name = f"text-{key}"
            self.add_error(name if name in self.fields else None, free_text_messages()["required"])

    def error_summary(self) -> list[tuple[str, str]]:
        if not self.is_bound or not self.errors:
            return []
        return [("page-form" if name == NON_FIELD_ERRORS else f"id-{name}", message)
                for name, messages in self.errors.items() for message in messages]

    def answers(self) -> dict[str, str]:
        return {q.key: self.cleaned_data.get(q.key, "") for q in self.questions}

    def free_text(self) -> dict[int, str]:
        return {q.pk: self.cleaned_data.get(f"text-{q.key}", "") for q in self.end_questions}
