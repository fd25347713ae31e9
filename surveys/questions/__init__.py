"""The question types a block can ask, each one unit (``base.QuestionType``), in page order.

Adding a type: write its unit (a module here, its partial under
templates/surveys/questions/), add it to ``QUESTION_TYPES``, and test it. A type
registered later (``question_type_register``: a plug-in, or a test) is announced
by ``question_types_changed``, on which the study definition's model and the
answer exports are rebuilt.
"""

from __future__ import annotations

from django.dispatch import Signal

from .base import AnswerFile, Part, QuestionType
from .best_worst import BestWorstType
from .free_text import FreeTextType
from .pairwise import PairwiseType
from .ranking import RankingType
from .rating import RatingType

# Page order: ratings sit in the response cards; the others follow the cards in this order.
# Rating comes first also for the bots: its answers set the score the others follow.
# One list, changed in place by the registration below, so that every module's reference sees the change.
QUESTION_TYPES: list[QuestionType] = [
    RatingType(), RankingType(), BestWorstType(), PairwiseType(), FreeTextType(),
]

#: Sent after a type is registered or removed; receivers rebuild what they derive from the registry.
question_types_changed = Signal()

__all__ = [
    "QUESTION_TYPES", "AnswerFile", "Part", "QuestionType", "answer_exports", "definition_problems", "declared_types",
    "question_type", "question_type_register", "question_type_remove", "question_types_changed",
]


def question_type(key: str) -> QuestionType:
    """The registered type of this key (a ``LookupError`` names an unknown one)."""
    for kind in QUESTION_TYPES:
        if kind.key == key:
            return kind
    raise LookupError(f'no question type "{key}" is registered')


def question_type_register(kind: QuestionType) -> None:
    """Add a type after the built-in ones (its page order is last); its key must be new."""
    if not kind.key or any(existing.key == kind.key for existing in QUESTION_TYPES):
        raise ValueError(f'a question type needs a key of its own; "{kind.key}" is empty or taken')
    QUESTION_TYPES.append(kind)
    question_types_changed.send(sender=QuestionType, kind=kind)


def question_type_remove(key: str) -> None:
    """Take a registered type out again (a test's clean-up)."""
    QUESTION_TYPES[:] = [kind for kind in QUESTION_TYPES if kind.key != key]
    question_types_changed.send(sender=QuestionType, kind=None)


def definition_problems(definition) -> list[str]:
    """Every type's checks across the definition (``surveys.definition.cross_reference_problems``)."""
    problems = [problem for kind in QUESTION_TYPES for problem in kind.definition_problems(definition)]
    if not any(kind.declared(definition) for kind in QUESTION_TYPES if kind.key != "free_text"):
        problems.append("dimensions: a study needs at least one rating dimension, ranking, best_worst or pairwise")
    return problems


def answer_exports(study) -> list[str]:
    """The answer exports (``analysis.exporting.exports.EXPORTS`` names) of a stored study, each once: the files
    every study gets (``AnswerFile.every_study``: ratings.csv), then those of the types the study asks, in
    registration order."""
    every = [file.name for kind in QUESTION_TYPES for file in kind.answer_files if file.every_study]
    asked = [name for kind in QUESTION_TYPES if kind.in_study(study) for name in kind.exports]
    return list(dict.fromkeys([*every, *asked]))


def declared_types(definition) -> list[str]:
    return [kind.key for kind in QUESTION_TYPES if kind.declared(definition)]
