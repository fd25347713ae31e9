"""The rules of a study's demographic questions: what each offers, accepts and stores.

One place for the participant's form, the service that saves the answers, the
import of a participants.csv and the scripted participants. A question is a
``DemographicQuestion`` row (written from the definition by the loader); an
answer is stored as a string under the question's key in
``Participant.demographics``. "Prefer not to answer" is accepted by every
question; a blank answer means the question was skipped. Stored answers are
always the study's words (and the English fixed answers), whatever language the
page is shown in, so that exports stay stable; only the shown labels are translated.
"""

from __future__ import annotations

import math
import re

from django.utils.translation import gettext as _

from .definition import OUTSIDE_US, PREFER_NOT, US_STATES
from .models import DemographicQuestion

US_STATE_NAMES = {
    "AL": "Alabama", "AK": "Alaska", "AZ": "Arizona", "AR": "Arkansas", "CA": "California", "CO": "Colorado",
    "CT": "Connecticut", "DE": "Delaware", "DC": "District of Columbia", "FL": "Florida", "GA": "Georgia",
    "HI": "Hawaii", "ID": "Idaho", "IL": "Illinois", "IN": "Indiana", "IA": "Iowa", "KS": "Kansas",
    "KY": "Kentucky", "LA": "Louisiana", "ME": "Maine", "MD": "Maryland", "MA": "Massachusetts", "MI": "Michigan",
    "MN": "Minnesota", "MS": "Mississippi", "MO": "Missouri", "MT": "Montana", "NE": "Nebraska", "NV": "Nevada",
    "NH": "New Hampshire", "NJ": "New Jersey", "NM": "New Mexico", "NY": "New York", "NC": "North Carolina",
    "ND": "North Dakota", "OH": "Ohio", "OK": "Oklahoma", "OR": "Oregon", "PA": "Pennsylvania",
    "RI": "Rhode Island", "SC": "South Carolina", "SD": "South Dakota", "TN": "Tennessee", "TX": "Texas",
    "UT": "Utah", "VT": "Vermont", "VA": "Virginia", "WA": "Washington", "WV": "West Virginia",
    "WI": "Wisconsin", "WY": "Wyoming",
}
_NUMBER = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)$")

Kind = DemographicQuestion.Kind


def offers_list(question: DemographicQuestion) -> bool:
    """Choice and US-state questions are answered from a list; number and text questions are typed."""
    return question.kind in (Kind.CHOICE, Kind.US_STATE)


def offered_answers(question: DemographicQuestion) -> list[tuple[str, str]]:
    """(stored value, shown label) of a listed question, "Prefer not to answer" last; [] for typed questions."""
    if question.kind == Kind.US_STATE:
        values = [(code, US_STATE_NAMES[code]) for code in US_STATES] + [(OUTSIDE_US, _("Outside the US"))]
    elif question.kind == Kind.CHOICE:
        values = [(choice, choice) for choice in question.choices if choice != PREFER_NOT]
    else:
        return []
    return values + [(PREFER_NOT, _("Prefer not to answer"))]


def answer_problem(question: DemographicQuestion, value: str) -> str | None:
    """Why ``value`` is not an answer to ``question`` (a sentence for the participant), or None."""
    if value == "" or value == PREFER_NOT:
        return None
    if offers_list(question):
        if value not in {stored for stored, _label in offered_answers(question)}:
            return _("Please choose one of the listed answers.")
        return None
    if question.kind == Kind.NUMBER:
        return _number_problem(question, value)
    if len(value) > question.max_length:
        return _("Please keep your answer to %(limit_value)d characters (it has %(show_value)d).") % {
            "limit_value": question.max_length, "show_value": len(value),
        }
    return None


def _number_problem(question: DemographicQuestion, value: str) -> str | None:
    low, high = _shown(question.min_value), _shown(question.max_value)
    out_of_range = _("Please enter a number from %(low)s to %(high)s.") % {"low": low, "high": high}
    if not _NUMBER.match(value.strip()):
        return out_of_range
    number = float(value)
    if question.integer and not number.is_integer():
        return _("Please enter a whole number from %(low)s to %(high)s.") % {"low": low, "high": high}
    if not (question.min_value <= number <= question.max_value):
        return out_of_range
    return None


def _shown(number: float) -> str:
    return str(int(number)) if math.isfinite(number) and number.is_integer() else f"{number:g}"


def stored_answer(question: DemographicQuestion, value: str) -> str:
    """The form of an accepted answer that is stored: numbers without padding ("063" -> "63")."""
    value = value.strip()
    if question.kind == Kind.NUMBER and value and value != PREFER_NOT:
        number = float(value)
        return str(int(number)) if number.is_integer() else f"{number:g}"
    return value


def imported_answer(question: DemographicQuestion, raw: str) -> str:
    """An answer from an imported participants.csv in the study's own words; raises ValueError if it is none.

    The study's words match ignoring case and surrounding space, as do the
    synonyms its definition declares; "Prefer not to answer" is always known.
    """
    text = raw.strip()
    if text == "":
        return ""
    folded = text.casefold()
    if offers_list(question):
        words = {stored.casefold(): stored for stored, _label in offered_answers(question)}
        if question.kind == Kind.US_STATE:
            words.update({name.casefold(): code for code, name in US_STATE_NAMES.items()})
        words.update({word.strip().casefold(): answer for word, answer in question.synonyms.items()})
        if folded in words:
            return words[folded]
        listed = ", ".join(f'"{stored}"' for stored, _label in offered_answers(question))
        raise ValueError(f'"{text}" is not an answer of {question.key}; the study\'s answers are {listed}')
    synonyms = {word.strip().casefold(): answer for word, answer in question.synonyms.items()}
    text = synonyms.get(folded, PREFER_NOT if folded == PREFER_NOT.casefold() else text)
    problem = answer_problem(question, text)
    if problem:
        raise ValueError(f'"{text}" is not an answer of {question.key}: {problem}')
    return stored_answer(question, text)
