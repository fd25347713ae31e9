"""The question types a block can ask, each one unit (``base.QuestionType``), in page order.

Adding a type: write its unit (a module here, its partial under
templates/surveys/questions/), add it to ``QUESTION_TYPES``, and test it.
"""

from __future__ import annotations

from .base import Part, QuestionType
from .best_worst import BestWorstType
from .free_text import FreeTextType
from .pairwise import PairwiseType
from .ranking import RankingType
from .rating import RatingType

# Page order: ratings sit in the response cards; the others follow the cards in this order.
# Rating comes first also for the bots: its answers set the score the others follow.
QUESTION_TYPES: tuple[QuestionType, ...] = (
    RatingType(), RankingType(), BestWorstType(), PairwiseType(), FreeTextType(),
)

__all__ = ["QUESTION_TYPES", "Part", "QuestionType", "definition_problems", "declared_types"]


def definition_problems(definition) -> list[str]:
    """Every type's checks across the definition (``surveys.definition.cross_reference_problems``)."""
    problems = [problem for kind in QUESTION_TYPES for problem in kind.definition_problems(definition)]
    if not any(kind.declared(definition) for kind in QUESTION_TYPES if kind.key != "free_text"):
        problems.append("dimensions: a study needs at least one rating dimension, ranking, best_worst or pairwise")
    return problems


def declared_types(definition) -> list[str]:
    return [kind.key for kind in QUESTION_TYPES if kind.declared(definition)]
