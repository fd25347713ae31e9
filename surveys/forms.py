"""Validation of the participant pages, and the view-model their templates render.

Field names carry placement ids (never item ids: those follow the order of the
definition file and would hint at which response is the reference):
``rate-<placement>-<dimension key>``, ``rank-<placement>``, ``most``/``least``
(value: a placement id), ``text-<question key>``, ``attention``.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field

from django import forms
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from . import demographics
from .models import DemographicQuestion, Dimension, FreeTextQuestion
from .selectors import VisitPage
from .services import PageAnswers

TAMPER_MESSAGE = gettext_lazy("Some answers do not belong to this page. Please reload the page and answer again.")
_PER_RESPONSE_FIELD = re.compile(r"^(rate|rank)-(\d+)(?:-(.+))?$")

@dataclass
class Option:
    value: str
    label: str
    input_id: str = ""
    selected: bool = False


@dataclass
class Control:
    """One question on the page: a radio group (fieldset) or a select/textarea."""

    name: str
    label: str
    options: list[Option] = field(default_factory=list)
    error: str = ""
    value: str = ""
    max_length: int | None = None
    required: bool = False
    kind: str = ""  # demographic questions: choice, number, us_state or text
    minimum: float | None = None
    maximum: float | None = None
    whole_numbers: bool = True

    @property
    def step(self) -> str:
        return "1" if self.whole_numbers else "any"

    @property
    def input_mode(self) -> str:
        return "numeric" if self.whole_numbers else "decimal"

    @property
    def input_id(self) -> str:
        return f"id-{self.name}"

    @property
    def anchor(self) -> str:
        """Where the error summary links to: the first input of the group."""
        return self.options[0].input_id if self.options and self.options[0].input_id else self.input_id

    @property
    def error_id(self) -> str:
        return f"err-{self.name}"


@dataclass
class ResponseCard:
    number: int
    placement_id: int
    text: str
    source_label: str
    ratings: list[Control]
    rank: Control | None


def scale_label(dimension: Dimension, point: int) -> str:
    words = dimension.point_labels.get(str(point), "")
    return f"{point} ({words})" if words else str(point)


def entered_value(form: forms.Form, name: str) -> str:
    """What a control shows: the posted value of a bound form; otherwise the ``initial`` one, which
    is the participant's draft of the page (``surveys.drafts``), if any."""
    return str((form.data if form.is_bound else form.initial).get(name, ""))


def _radio_options(name: str, values: list[tuple[str, str]], chosen: str) -> list[Option]:
    return [Option(value=v, label=label, input_id=f"id-{name}-{v}", selected=v == chosen) for v, label in values]


class PageForm(forms.Form):
    """The answers of one block or attention-check page."""

    def __init__(
        self, data=None, *, page: VisitPage, ranking: bool, best_worst: bool, construct: str = "preferred",
        letter_labels: bool = False, initial: dict[str, str] | None = None,
    ):
        super().__init__(data, initial=initial)
        self.page = page
        self.letter_labels = letter_labels
        self.construct = construct  # the study's word for what is judged: "the most <construct> response"
        self.ranking = ranking and not page.is_check
        self.best_worst = best_worst and not page.is_check
        self.numbers = {p.pk: p.position for p in page.placements}
        if page.is_check:
            self._add_attention_field()
        else:
            self._add_block_fields()

    # --- fields ---------------------------------------------------------------

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

    def _add_block_fields(self) -> None:
        n = len(self.page.placements)
        for placement in self.page.placements:
            number = placement.position
            for dimension in self.page.dimensions:
                self.fields[f"rate-{placement.pk}-{dimension.key}"] = forms.TypedChoiceField(
                    choices=[(str(p), str(p)) for p in dimension.points],
                    coerce=int,
                    error_messages={
                        "required": _("Please rate Response %(number)s for %(dimension)s.")
                        % {"number": number, "dimension": dimension.label.lower()},
                        "invalid_choice": _("Please rate Response %(number)s from %(min)s to %(max)s.")
                        % {"number": number, "min": dimension.scale_min, "max": dimension.scale_max},
                    },
                )
            if self.ranking:
                self.fields[f"rank-{placement.pk}"] = forms.TypedChoiceField(
                    choices=[(str(r), str(r)) for r in range(1, n + 1)],
                    coerce=int,
                    error_messages={
                        "required": _("Please give Response %(number)s a rank.") % {"number": number},
                        "invalid_choice": _("Please give Response %(number)s a rank from 1 to %(last)s.")
                        % {"number": number, "last": n},
                    },
                )
        if self.best_worst:
            choices = [(str(p.pk), response_name(p.position)) for p in self.page.placements]
            messages = {
                "most": (_("Please choose the most %(construct)s response."),
                         _("Please choose the most %(construct)s response from this page.")),
                "least": (_("Please choose the least %(construct)s response."),
                          _("Please choose the least %(construct)s response from this page.")),
            }
            for name, (required, invalid) in messages.items():
                self.fields[name] = forms.TypedChoiceField(
                    choices=choices,
                    coerce=int,
                    error_messages={
                        "required": required % {"construct": self.construct},
                        "invalid_choice": invalid % {"construct": self.construct},
                    },
                )
        for question in self.page.free_text_questions:
            self.fields[f"text-{question.key}"] = forms.CharField(
                max_length=question.max_length,
                required=question.required,
                error_messages=free_text_messages(),
            )

    # --- cross-field rules -------------------------------------------------------

    def clean(self):
        cleaned = super().clean()
        if self._has_foreign_fields():
            raise forms.ValidationError(TAMPER_MESSAGE, code="tampered")
        if self.ranking:
            self._check_ranks_distinct(cleaned)
        if self.best_worst and cleaned.get("most") is not None and cleaned.get("most") == cleaned.get("least"):
            self.add_error("least", _("The least %(construct)s response must differ from the most %(construct)s one.")
                           % {"construct": self.construct})
        return cleaned

    def _has_foreign_fields(self) -> bool:
        own = set(self.numbers)
        keys = {d.key for d in self.page.dimensions}
        for name in self.data:
            match = _PER_RESPONSE_FIELD.match(name)
            if not match:
                continue
            kind, pid, dimension = match.group(1), int(match.group(2)), match.group(3)
            if pid not in own or (kind == "rate" and dimension not in keys) or (kind == "rank" and not self.ranking):
                return True
        return False

    def _check_ranks_distinct(self, cleaned) -> None:
        """One message per rank given twice, naming the responses as the page labels them; each of
        their rank fields carries it, and the summary lists it once (``error_summary``)."""
        ranks = {pid: cleaned.get(f"rank-{pid}") for pid in self.numbers}
        used = Counter(r for r in ranks.values() if r is not None)
        for rank in sorted(r for r, n in used.items() if n > 1):
            sharing = sorted((self.numbers[pid], pid) for pid, r in ranks.items() if r == rank)
            names = [response_name(number) for number, _pid in sharing]
            message = _("Rank %(rank)s is given to %(some)s and %(last)s; give each response a different rank.") % {
                "rank": rank, "some": _(", ").join(names[:-1]), "last": names[-1],
            }
            for _number, pid in sharing:
                self.add_error(f"rank-{pid}", message)

    def page_answers(self) -> PageAnswers:
        data = self.cleaned_data
        if self.page.is_check:
            return PageAnswers(attention_value=data["attention"])
        return PageAnswers(
            ratings={
                (p.pk, d.pk): data[f"rate-{p.pk}-{d.key}"]
                for p in self.page.placements
                for d in self.page.dimensions
            },
            ranks={p.pk: data[f"rank-{p.pk}"] for p in self.page.placements} if self.ranking else {},
            best=data.get("most") if self.best_worst else None,
            worst=data.get("least") if self.best_worst else None,
            free_text={q.pk: data.get(f"text-{q.key}", "") for q in self.page.free_text_questions},
        )

    # --- what the template renders ---------------------------------------------------

    def _value(self, name: str) -> str:
        return entered_value(self, name)

    def _error(self, name: str) -> str:
        return " ".join(self.errors.get(name, [])) if self.is_bound else ""

    def cards(self) -> list[ResponseCard]:
        cards = []
        for placement in self.page.placements:
            number = placement.position
            ratings = [self._rating_control(placement.pk, number, d) for d in self.page.dimensions]
            cards.append(
                ResponseCard(
                    number=number,
                    placement_id=placement.pk,
                    text=placement.item.text,
                    source_label=letter_label(placement.position) if self.letter_labels else placement.item.source_label,
                    ratings=ratings,
                    rank=self._rank_control(placement.pk, number) if self.ranking else None,
                )
            )
        return cards

    def _rating_control(self, pid: int, number: int, dimension: Dimension) -> Control:
        name = f"rate-{pid}-{dimension.key}"
        values = [(str(p), scale_label(dimension, p)) for p in dimension.points]
        return Control(
            name=name,
            label=_("Response %(number)s: %(dimension)s") % {"number": number, "dimension": dimension.label},
            options=_radio_options(name, values, self._value(name)),
            error=self._error(name),
        )

    def _rank_control(self, pid: int, number: int) -> Control:
        name = f"rank-{pid}"
        n = len(self.page.placements)
        chosen = self._value(name)
        options = [Option("", _("Choose a rank"), selected=chosen == "")] + [
            Option(str(r), str(r), selected=chosen == str(r)) for r in range(1, n + 1)
        ]
        return Control(name=name, label=_("Rank of Response %(number)s") % {"number": number}, options=options,
                       error=self._error(name))

    def choice_controls(self) -> list[Control]:
        if not self.best_worst:
            return []
        controls = []
        labels = {"most": _("Most %(construct)s response"), "least": _("Least %(construct)s response")}
        for name, label in labels.items():
            values = [(str(p.pk), response_name(p.position)) for p in self.page.placements]
            controls.append(
                Control(
                    name=name,
                    label=label % {"construct": self.construct},
                    options=_radio_options(name, values, self._value(name)),
                    error=self._error(name),
                )
            )
        return controls

    def text_controls(self) -> list[Control]:
        return [
            Control(
                name=f"text-{q.key}",
                label=q.prompt,
                value=self._value(f"text-{q.key}"),
                error=self._error(f"text-{q.key}"),
                max_length=q.max_length,
                required=q.required,
            )
            for q in self.page.free_text_questions
        ]

    def attention_control(self) -> Control:
        dimension = self.page.dimensions[0]
        values = [(str(p), scale_label(dimension, p)) for p in dimension.points]
        return Control(
            name="attention",
            label=self.page.visit.attention_check.text,
            options=_radio_options("attention", values, self._value("attention")),
            error=self._error("attention"),
        )

    def script_texts(self) -> str:
        """The texts survey.js writes on a ranking, in the page's language, as JSON for a data
        attribute (no inline script: the CSP forbids them); %(name)s are filled in there."""
        return json.dumps({
            "response": _("Response %(number)s"),
            "keep": _("Keep this order"),
            "ranked": _("Ranked: the order shown is your ranking. You can still change it."),
            "unranked": _("Not ranked yet. Move the responses into your order, or choose Keep this order if the "
                          "order shown is already your ranking."),
            "moved": _("%(response)s is now ranked %(rank)s of %(total)s."),
            "kept": _("Ranked in the order shown: %(first)s first, %(last)s last."),
            "up": _("Move up"),
            "down": _("Move down"),
        }, ensure_ascii=False)

    def error_summary(self) -> list[tuple[str, str]]:
        """(anchor id, message) pairs, in page order, for the summary at the top."""
        if not self.is_bound or not self.errors:
            return []
        anchors = {}
        if self.page.is_check:
            anchors["attention"] = self.attention_control().anchor
        else:
            cards = self.cards()
            # The ratings sit in the response cards, the ranking below them all: page order.
            for control in [c for card in cards for c in card.ratings] + [card.rank for card in cards if card.rank]:
                anchors[control.name] = control.anchor
            for control in self.choice_controls() + self.text_controls():
                anchors[control.name] = control.anchor
        out = [("page-form", message) for message in self.non_field_errors()]
        for name, anchor in anchors.items():
            out += [(anchor, message) for message in self.errors.get(name, [])]
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
    """Every question is optional, and every question accepts "Prefer not to answer".

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
                    error=" ".join(self.errors.get(question.key, [])) if self.is_bound else "",
                )
            )
        return out

    def text_controls(self) -> list[Control]:
        return [
            Control(
                name=f"text-{q.key}",
                label=q.prompt,
                value=entered_value(self, f"text-{q.key}"),
                error=" ".join(self.errors.get(f"text-{q.key}", [])) if self.is_bound else "",
                max_length=q.max_length,
                required=q.required,
            )
            for q in self.end_questions
        ]

    def error_summary(self) -> list[tuple[str, str]]:
        if not self.is_bound or not self.errors:
            return []
        return [(f"id-{name}", message) for name, messages in self.errors.items() for message in messages]

    def answers(self) -> dict[str, str]:
        return {q.key: self.cleaned_data.get(q.key, "") for q in self.questions}

    def free_text(self) -> dict[int, str]:
        return {q.pk: self.cleaned_data.get(f"text-{q.key}", "") for q in self.end_questions}


def response_name(number: int) -> str:
    """How the page names a response: "Response 3" (by its display position)."""
    return _("Response %(number)s") % {"number": number}


def free_text_messages() -> dict[str, str]:
    """The messages of a free-text answer; Django fills in the limit and the length given."""
    return {
        "required": _("Please answer this question."),
        "max_length": _("Please keep your answer to %(limit_value)d characters (it has %(show_value)d)."),
    }


def letter_label(position: int) -> str:
    """A, B, ..., Z, AA, AB ... for display positions 1, 2, ..."""
    label = ""
    while position > 0:
        position, remainder = divmod(position - 1, 26)
        label = chr(ord("A") + remainder) + label
    return label
