"""The question types a block can ask, each one unit (``base.QuestionType``), in page order.

Adding a type: write its unit (a module here, its partial under
templates/surveys/questions/), add it to ``QUESTION_TYPES``, and test it. A type
registered later (``question_type_register``: a plug-in, or a test) is announced
by ``question_types_changed``, on which the study definition's model and the
answer exports are rebuilt.

Each type says where its answers are stored: a model declared in its module
(rating's ``Rating``, free text's questions and answers), columns on the rows a
page writes anyway (``AnswerColumns``: ranking, best-worst, pairwise), or
``TypedAnswer`` rows. ``surveys.models`` imports this package when the app loads,
which makes the types' models the app's, and installs the built-in types'
columns (``answer_storage_install``); ``makemigrations`` writes the migrations of
both.
"""

from __future__ import annotations

from django.dispatch import Signal

from .base import AnswerColumns, AnswerFile, Part, QuestionType
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
    "QUESTION_TYPES", "AnswerColumns", "AnswerFile", "Part", "QuestionType", "answer_exports",
    "answer_storage_install", "declared_types", "definition_problems", "question_type", "question_type_register",
    "question_type_remove", "question_types_changed",
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
    if kind.answer_columns:
        # The models are loaded by now: a column added to them here would be in no table and no migration.
        raise ValueError(f'question type "{kind.key}": a type registered after start-up keeps its answers in '
                         "TypedAnswer rows or in a model of its own, not in answer_columns")
    QUESTION_TYPES.append(kind)
    question_types_changed.send(sender=QuestionType, kind=kind)


def question_type_remove(key: str) -> None:
    """Take a registered type out again (a test's clean-up)."""
    QUESTION_TYPES[:] = [kind for kind in QUESTION_TYPES if kind.key != key]
    question_types_changed.send(sender=QuestionType, kind=None)


_installed = False


def answer_storage_install() -> None:
    """Put the built-in types' answer columns (``QuestionType.answer_columns``) on their models, once; called by
    ``surveys.models`` while the app loads, before anything reads the models' fields."""
    global _installed
    if not _installed:
        _installed = True
        for kind in QUESTION_TYPES:
            for columns in kind.answer_columns:
                columns.install()


def definition_problems(definition) -> list[str]:
    """Every type's checks across the definition (``surveys.definition.cross_reference_problems``)."""
    problems = [problem for kind in QUESTION_TYPES for problem in kind.definition_problems(definition)]
    judging = [kind for kind in QUESTION_TYPES if kind.judges_responses]
    if not any(kind.declared(definition) for kind in judging):
        fields = [field for kind in judging for field in kind.definition_fields]
        problems.append(f"{fields[0]}: a study needs at least one of {', '.join(fields[:-1])} or {fields[-1]}")
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
