"""How a simulated participant reads and answers each question type: one ``QuestionBot`` per type key.

The question types (``surveys.questions``) know nothing of bots; this module follows their registry. A new
type adds its bot here (``tests/test_question_bots.py`` checks that every registered type has one).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Protocol

from surveys.models import Study
from surveys.questions import QUESTION_TYPES, best_worst, free_text, pairwise, ranking, rating
from surveys.selectors import VisitPage

from .page_spec import PageSpec

Quality = Callable[[int], "float | None"]  # placement id -> expected rating (None = unknown)


class Persona(Protocol):
    """The answers a persona (``bots.personas``) gives, as the question types' bots ask for them."""

    def rating(self, quality: float | None, points: list[int], rng: random.Random) -> int: ...

    def ranks(self, placements: list[int], score: dict[int, float], rng: random.Random) -> dict[str, str]: ...

    def best_worst(self, placements: list[int], score: dict[int, float], rng: random.Random) -> tuple[int, int]: ...

    def preference(self, left: float, right: float, rng: random.Random) -> str: ...

    def reason(self, rng: random.Random) -> str: ...


class QuestionBot(Protocol):
    """What the bots need of one question type."""

    def read_spec(self, spec: PageSpec, *, radios: dict[str, list[str]], selects: dict[str, list[str]]) -> None:
        """Note in ``spec`` what a page's HTML asks of this type (the HTTP bots read pages as a browser does);
        a select the type owns is taken out of ``selects`` (those left are demographic questions)."""

    def read_page(self, spec: PageSpec, *, page: VisitPage, study: Study) -> None:
        """The same, straight from the selectors' block page (the services driver)."""

    def asks(self, spec: PageSpec) -> bool:
        """The page asks this type's questions."""

    def fields(self, persona: Persona, spec: PageSpec, quality: Quality, score: dict[int, float],
               rng: random.Random) -> dict[str, str]:
        """The persona's answers, as posted fields (called only when ``asks``; rating is always called
        first, as it fills ``score``: the persona's liking of each placement)."""


class RatingBot:
    def read_spec(self, spec: PageSpec, *, radios: dict[str, list[str]], selects: dict[str, list[str]]) -> None:
        for name, values in radios.items():
            match = rating.FIELD_PATTERN.match(name)
            if match:
                spec.dimensions[match.group(2)] = [int(v) for v in values]

    def read_page(self, spec: PageSpec, *, page: VisitPage, study: Study) -> None:
        spec.dimensions = {dimension.key: dimension.points for dimension in page.dimensions}

    def asks(self, spec: PageSpec) -> bool:
        return True  # always: even a page that rates nothing needs the score the other types follow

    def fields(self, persona: Persona, spec: PageSpec, quality: Quality, score: dict[int, float],
               rng: random.Random) -> dict[str, str]:
        """Ratings follow the persona; every placement's ``score`` (which later types order by) is its mean
        rating, or its quality where the page rates nothing, plus a tiny jitter that breaks ties."""
        fields = {}
        for pid in spec.placements:
            values = []
            for key, points in spec.dimensions.items():
                value = persona.rating(quality(pid), points, rng)
                fields[rating.field_name(pid, key)] = str(value)
                values.append(value)
            q = quality(pid)
            score[pid] = (sum(values) / len(values) if values else (q or 3)) + rng.uniform(0, 0.01)
        return fields


class RankingBot:
    def read_spec(self, spec: PageSpec, *, radios: dict[str, list[str]], selects: dict[str, list[str]]) -> None:
        for name in [name for name in selects if ranking.FIELD_PATTERN.match(name)]:
            spec.ranking = True
            del selects[name]

    def read_page(self, spec: PageSpec, *, page: VisitPage, study: Study) -> None:
        spec.ranking = study.ranking_enabled

    def asks(self, spec: PageSpec) -> bool:
        return spec.ranking

    def fields(self, persona: Persona, spec: PageSpec, quality: Quality, score: dict[int, float],
               rng: random.Random) -> dict[str, str]:
        return persona.ranks(spec.placements, score, rng)


class BestWorstBot:
    def read_spec(self, spec: PageSpec, *, radios: dict[str, list[str]], selects: dict[str, list[str]]) -> None:
        spec.best_worst = best_worst.FIELDS[0] in radios

    def read_page(self, spec: PageSpec, *, page: VisitPage, study: Study) -> None:
        spec.best_worst = study.best_worst_enabled

    def asks(self, spec: PageSpec) -> bool:
        return spec.best_worst

    def fields(self, persona: Persona, spec: PageSpec, quality: Quality, score: dict[int, float],
               rng: random.Random) -> dict[str, str]:
        best, worst = persona.best_worst(spec.placements, score, rng)
        return dict(zip(best_worst.FIELDS, (str(best), str(worst))))


class PairwiseBot:
    def read_spec(self, spec: PageSpec, *, radios: dict[str, list[str]], selects: dict[str, list[str]]) -> None:
        if pairwise.FIELD in radios:
            spec.pairwise = True

    def read_page(self, spec: PageSpec, *, page: VisitPage, study: Study) -> None:
        spec.pairwise = study.pairwise_enabled

    def asks(self, spec: PageSpec) -> bool:
        return spec.pairwise

    def fields(self, persona: Persona, spec: PageSpec, quality: Quality, score: dict[int, float],
               rng: random.Random) -> dict[str, str]:
        left, right = spec.placements
        return {pairwise.FIELD: persona.preference(score[left], score[right], rng)}


class FreeTextBot:
    def read_spec(self, spec: PageSpec, *, radios: dict[str, list[str]], selects: dict[str, list[str]]) -> None:
        """The page's text boxes are read with the rest of its controls (``bots.pages``)."""

    def read_page(self, spec: PageSpec, *, page: VisitPage, study: Study) -> None:
        spec.texts = {free_text.field_name(q.key): q.max_length for q in page.free_text_questions}
        spec.required = {free_text.field_name(q.key) for q in page.free_text_questions if q.required}

    def asks(self, spec: PageSpec) -> bool:
        return any(free_text.FIELD_PATTERN.match(name) for name in spec.texts)

    def fields(self, persona: Persona, spec: PageSpec, quality: Quality, score: dict[int, float],
               rng: random.Random) -> dict[str, str]:
        return {name: persona.reason(rng)[:max_length] for name, max_length in spec.texts.items()}


#: The bot of each question type, by the type's key.
BOTS: dict[str, QuestionBot] = {
    "rating": RatingBot(), "ranking": RankingBot(), "best_worst": BestWorstBot(), "pairwise": PairwiseBot(),
    "free_text": FreeTextBot(),
}


def question_bots() -> list[QuestionBot]:
    """The bots of the registered question types, in the registry's order (rating first: it sets the score
    the others follow). A type without a bot is a programming error, named here."""
    missing = [kind.key for kind in QUESTION_TYPES if kind.key not in BOTS]
    if missing:
        raise LookupError(f"no bot for the question type(s) {', '.join(missing)}: add one to bots.question_bots")
    return [BOTS[kind.key] for kind in QUESTION_TYPES]
