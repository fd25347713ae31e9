"""How a simulated participant reads and answers each question type: one ``QuestionBot`` per type key.

The question types (``surveys.questions``) know nothing of bots; this module follows their registry. A new
type adds its bot here (``tests/test_question_bots.py`` checks that every registered type has one).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Protocol

from surveys.models import Study
from surveys.questions import QUESTION_TYPES, best_worst, free_text, pairwise, question_type, ranking, rating
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

    key: str  # the type's key (``QuestionType.key``): where the bot notes the page in ``PageSpec.by_type``

    def read_spec(self, spec: PageSpec, *, radios: dict[str, list[str]], selects: dict[str, list[str]],
                  inputs: dict[str, dict[str, str]]) -> None:
        """Note in ``spec.by_type[key]`` what a page's HTML asks of this type (the HTTP bots read pages as a
        browser does): its radio groups (name -> values), selects (name -> values; one the type owns is taken
        out, as those left are demographic questions) and other inputs (name -> attributes: a range, say)."""

    def read_page(self, spec: PageSpec, *, page: VisitPage, study: Study) -> None:
        """The same, straight from the selectors' block page (the services driver)."""

    def asks(self, spec: PageSpec) -> bool:
        """The page asks this type's questions."""

    def fields(self, persona: Persona, spec: PageSpec, quality: Quality, score: dict[int, float],
               rng: random.Random) -> dict[str, str]:
        """The persona's answers, as posted fields (called only when ``asks``; rating is always called
        first, as it fills ``score``: the persona's liking of each placement)."""


class TypeBot:
    """The defaults: from the database, the page asks the type when the type says so (``QuestionType.asked``);
    the page asks it when the bot noted it in ``spec.by_type``."""

    key = ""

    def read_page(self, spec: PageSpec, *, page: VisitPage, study: Study) -> None:
        if question_type(self.key).asked(page):
            spec.by_type[self.key] = True

    def asks(self, spec: PageSpec) -> bool:
        return self.key in spec.by_type


class RatingBot(TypeBot):
    key = "rating"

    def read_spec(self, spec: PageSpec, *, radios: dict[str, list[str]], selects: dict[str, list[str]],
                  inputs: dict[str, dict[str, str]]) -> None:
        for name, values in radios.items():
            match = rating.FIELD_PATTERN.match(name)
            if match:
                spec.by_type.setdefault(self.key, {})[match.group(2)] = [int(v) for v in values]

    def read_page(self, spec: PageSpec, *, page: VisitPage, study: Study) -> None:
        spec.by_type[self.key] = {dimension.key: dimension.points for dimension in page.dimensions}

    def asks(self, spec: PageSpec) -> bool:
        return True  # always: even a page that rates nothing needs the score the other types follow

    def fields(self, persona: Persona, spec: PageSpec, quality: Quality, score: dict[int, float],
               rng: random.Random) -> dict[str, str]:
        """Ratings follow the persona; every placement's ``score`` (which later types order by) is its mean
        rating, or its quality where the page rates nothing, plus a tiny jitter that breaks ties."""
        fields = {}
        for pid in spec.placements:
            values = []
            for key, points in spec.by_type.get(self.key, {}).items():
                value = persona.rating(quality(pid), points, rng)
                fields[rating.field_name(pid, key)] = str(value)
                values.append(value)
            q = quality(pid)
            score[pid] = (sum(values) / len(values) if values else (q or 3)) + rng.uniform(0, 0.01)
        return fields


class RankingBot(TypeBot):
    key = "ranking"

    def read_spec(self, spec: PageSpec, *, radios: dict[str, list[str]], selects: dict[str, list[str]],
                  inputs: dict[str, dict[str, str]]) -> None:
        for name in [name for name in selects if ranking.FIELD_PATTERN.match(name)]:
            spec.by_type[self.key] = True
            del selects[name]

    def fields(self, persona: Persona, spec: PageSpec, quality: Quality, score: dict[int, float],
               rng: random.Random) -> dict[str, str]:
        return persona.ranks(spec.placements, score, rng)


class BestWorstBot(TypeBot):
    key = "best_worst"

    def read_spec(self, spec: PageSpec, *, radios: dict[str, list[str]], selects: dict[str, list[str]],
                  inputs: dict[str, dict[str, str]]) -> None:
        if best_worst.FIELDS[0] in radios:
            spec.by_type[self.key] = True

    def fields(self, persona: Persona, spec: PageSpec, quality: Quality, score: dict[int, float],
               rng: random.Random) -> dict[str, str]:
        best, worst = persona.best_worst(spec.placements, score, rng)
        return dict(zip(best_worst.FIELDS, (str(best), str(worst))))


class PairwiseBot(TypeBot):
    key = "pairwise"

    def read_spec(self, spec: PageSpec, *, radios: dict[str, list[str]], selects: dict[str, list[str]],
                  inputs: dict[str, dict[str, str]]) -> None:
        if pairwise.FIELD in radios:
            spec.by_type[self.key] = True

    def fields(self, persona: Persona, spec: PageSpec, quality: Quality, score: dict[int, float],
               rng: random.Random) -> dict[str, str]:
        left, right = spec.placements
        return {pairwise.FIELD: persona.preference(score[left], score[right], rng)}


class FreeTextBot(TypeBot):
    key = "free_text"

    def read_spec(self, spec: PageSpec, *, radios: dict[str, list[str]], selects: dict[str, list[str]],
                  inputs: dict[str, dict[str, str]]) -> None:
        """The page's text boxes are read with the rest of its controls (``bots.pages``, into ``spec.texts``,
        before the bots): the type's are those its field pattern names."""
        if names := [name for name in spec.texts if free_text.FIELD_PATTERN.match(name)]:
            spec.by_type[self.key] = names

    def read_page(self, spec: PageSpec, *, page: VisitPage, study: Study) -> None:
        spec.texts = {free_text.field_name(q.key): q.max_length for q in page.free_text_questions}
        spec.required = {free_text.field_name(q.key) for q in page.free_text_questions if q.required}
        if spec.texts:
            spec.by_type[self.key] = list(spec.texts)

    def fields(self, persona: Persona, spec: PageSpec, quality: Quality, score: dict[int, float],
               rng: random.Random) -> dict[str, str]:
        return {name: persona.reason(rng)[:spec.texts[name]] for name in spec.by_type[self.key]}


#: The bot of each question type, by the type's key.
BOTS: dict[str, QuestionBot] = {
    bot.key: bot for bot in (RatingBot(), RankingBot(), BestWorstBot(), PairwiseBot(), FreeTextBot())
}


def question_bot_register(bot: QuestionBot) -> None:
    """The bot of a type registered later (``surveys.questions.question_type_register``)."""
    BOTS[bot.key] = bot


def question_bots() -> list[QuestionBot]:
    """The bots of the registered question types, in the registry's order (rating first: it sets the score
    the others follow). A type without a bot is a programming error, named here."""
    missing = [kind.key for kind in QUESTION_TYPES if kind.key not in BOTS]
    if missing:
        raise LookupError(f"no bot for the question type(s) {', '.join(missing)}: add one to bots.question_bots")
    return [BOTS[kind.key] for kind in QUESTION_TYPES]
