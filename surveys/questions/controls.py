"""The view-model of the participant pages' controls, shared by every question type and the forms."""

from __future__ import annotations

from dataclasses import dataclass, field

from django import forms
from django.utils.translation import gettext as _

from ..core_models import Dimension


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


def scale_label(dimension: Dimension, point: int) -> str:
    words = dimension.point_labels.get(str(point), "")
    return f"{point} ({words})" if words else str(point)


def entered_value(form: forms.Form, name: str) -> str:
    """What a control shows: the posted value of a bound form; otherwise the ``initial`` one, which
    is the participant's draft of the page (``surveys.drafts``), if any."""
    return str((form.data if form.is_bound else form.initial).get(name, ""))


def field_error(form: forms.Form, name: str) -> str:
    return " ".join(form.errors.get(name, [])) if form.is_bound else ""


def radio_options(name: str, values: list[tuple[str, str]], chosen: str) -> list[Option]:
    return [Option(value=v, label=label, input_id=f"id-{name}-{v}", selected=v == chosen) for v, label in values]


def response_name(number: int) -> str:
    """How the page names a response: "Response 3" (by its display position)."""
    return _("Response %(number)s") % {"number": number}


def response_title(form: forms.Form, placement) -> str:
    """What the page calls a response wherever it names it (its card's heading, the ranking's rows, the
    most/least and pairwise options): "Response 4", with the label the study shows, "Response 4 (D)"."""
    label = letter_label(placement.position) if form.letter_labels else placement.item.source_label
    name = response_name(placement.position)
    return f"{name} ({label})" if label else name


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
