"""Personas: what an honest, hurried, careless or leaving participant answers on each page."""

from __future__ import annotations

import math
import random
import re

from surveys.definition import OUTSIDE_US, PREFER_NOT

from .page_spec import PageSpec
from .question_bots import Quality, question_bots

REASONS = [
    "It acknowledged the feelings before giving advice.",
    "Some replies jumped straight to solutions.",
    "The warmer wording felt more supportive.",
    "I preferred replies that asked a gentle question.",
]


def expected_check_value(statement: str, points: list[int]) -> int | None:
    """The answer an attention check's statement asks for ("... select 4 ..."), if it is one of ``points``."""
    match = re.search(r"select (\d+)", statement)
    return int(match.group(1)) if match and int(match.group(1)) in points else None


def _clip(value: float, points: list[int]) -> int:
    return int(min(max(round(value), points[0]), points[-1]))


class Persona:
    """An honest participant: ratings follow item quality plus noise, ranks follow ratings."""

    name = "honest"
    rating_noise = 0.7

    def block_seconds(self, rng: random.Random) -> float:
        return rng.uniform(20, 120)

    def check_seconds(self, rng: random.Random) -> float:
        return rng.uniform(6, 20)

    def exit_at(self, n_pages: int, rng: random.Random) -> int | None:
        """The page number (1-based) at which this persona leaves, or None."""
        return None

    def rating(self, quality: float | None, points: list[int], rng: random.Random) -> int:
        centre = quality if quality is not None else (points[0] + points[-1]) / 2
        return _clip(rng.gauss(centre, self.rating_noise), points)

    def answer_block(self, spec: PageSpec, quality: Quality, rng: random.Random) -> dict[str, str]:
        """Every question type of the page answers in this persona's way (``surveys.questions``)."""
        fields: dict[str, str] = {}
        score: dict[int, float] = {}
        for bot in question_bots():
            if bot.asks(spec):
                fields.update(bot.fields(self, spec, quality, score, rng))
        return fields

    def ranks(self, placements: list[int], score: dict[int, float], rng: random.Random) -> dict[str, str]:
        ordered = sorted(placements, key=lambda pid: -score[pid])
        return {f"rank-{pid}": str(i) for i, pid in enumerate(ordered, start=1)}

    def best_worst(self, placements: list[int], score: dict[int, float], rng: random.Random) -> tuple[int, int]:
        ordered = sorted(placements, key=lambda pid: -score[pid])
        return ordered[0], ordered[-1]

    def preference(self, left: float, right: float, rng: random.Random) -> str:
        """Which of two responses is better, from their scores: a near-equal pair is a tie, and a weak
        pair is often "both bad"."""
        difference = left - right + rng.gauss(0, 0.4)
        if abs(difference) < 0.15:
            return "tie"
        if max(left, right) < 2.7 and rng.random() < 0.5:
            return "both_bad"
        return "left" if difference > 0 else "right"

    def reason(self, rng: random.Random) -> str:
        return rng.choice(REASONS)

    def answer_check(self, spec: PageSpec, rng: random.Random) -> dict[str, str]:
        expected = expected_check_value(spec.statement, spec.check_points)
        return {"attention": str(expected if expected is not None else rng.choice(spec.check_points))}

    def answer_demographics(self, spec: PageSpec, rng: random.Random) -> dict[str, str]:
        fields = {}
        for name, choices in spec.selects.items():
            fields[name] = _demographic_pick(choices, rng)
        for name, (low, high, whole) in spec.numbers.items():
            fields[name] = "" if rng.random() < 0.03 else _number_pick(low, high, whole, rng)
        for name, max_length in spec.texts.items():
            # An optional question is skipped half the time; a required one is answered, as people must.
            answer = rng.choice(["", self.reason(rng)])
            if name in spec.required and not answer:
                answer = self.reason(rng)
            fields[name] = answer[:max_length]
        return fields


def _demographic_pick(choices: list[str], rng: random.Random) -> str:
    """Spread over every group, with a few skipped or declined answers."""
    roll = rng.random()
    if roll < 0.03:
        return ""
    if roll < 0.06 and PREFER_NOT in choices:
        return PREFER_NOT
    if roll < 0.09 and OUTSIDE_US in choices:
        return OUTSIDE_US
    real = [c for c in choices if c not in (PREFER_NOT, OUTSIDE_US)]
    return rng.choice(real or choices)


def _number_pick(low: float, high: float, whole: bool, rng: random.Random) -> str:
    if whole:
        return str(rng.randint(math.ceil(low), math.floor(high)))
    return f"{rng.uniform(low, high):.1f}"


class Speeder(Persona):
    name = "speeder"
    rating_noise = 1.2

    def block_seconds(self, rng: random.Random) -> float:
        return rng.uniform(3, 8)

    def check_seconds(self, rng: random.Random) -> float:
        return rng.uniform(2, 4)


class StraightLiner(Persona):
    name = "straight_liner"

    def block_seconds(self, rng: random.Random) -> float:
        return rng.uniform(15, 40)

    def rating(self, quality, points, rng) -> int:
        middle = (points[0] + points[-1]) // 2
        return 3 if 3 in points else middle

    def ranks(self, placements, score, rng) -> dict[str, str]:
        return {f"rank-{pid}": str(i) for i, pid in enumerate(placements, start=1)}

    def preference(self, left, right, rng) -> str:
        return "left"  # the first response shown, whatever it says


class AttentionFailer(Persona):
    name = "attention_failer"

    def answer_check(self, spec: PageSpec, rng: random.Random) -> dict[str, str]:
        expected = expected_check_value(spec.statement, spec.check_points)
        wrong = [p for p in spec.check_points if p != expected]
        return {"attention": str(rng.choice(wrong))}


class EarlyExit(Persona):
    name = "early_exit"

    def exit_at(self, n_pages: int, rng: random.Random) -> int | None:
        return max(2, n_pages // 2)


class RandomClicker(Persona):
    name = "random"

    def block_seconds(self, rng: random.Random) -> float:
        return rng.uniform(8, 60)

    def rating(self, quality, points, rng) -> int:
        return rng.choice(points)

    def ranks(self, placements, score, rng) -> dict[str, str]:
        shuffled = list(placements)
        rng.shuffle(shuffled)
        return {f"rank-{pid}": str(i) for i, pid in enumerate(shuffled, start=1)}

    def best_worst(self, placements, score, rng) -> tuple[int, int]:
        best, worst = rng.sample(placements, 2)
        return best, worst

    def preference(self, left, right, rng) -> str:
        return rng.choice(["left", "right", "tie", "both_bad"])

    def answer_check(self, spec: PageSpec, rng: random.Random) -> dict[str, str]:
        return {"attention": str(rng.choice(spec.check_points))}


PERSONAS: dict[str, type[Persona]] = {
    cls.name: cls for cls in (Persona, Speeder, StraightLiner, AttentionFailer, EarlyExit, RandomClicker)
}

# The demo mix: mostly honest, some of every other kind.
DEFAULT_MIX = {"honest": 0.70, "speeder": 0.06, "straight_liner": 0.06, "attention_failer": 0.06,
               "early_exit": 0.06, "random": 0.06}


def persona_named(name: str) -> Persona:
    return PERSONAS[name]()


def persona_mix(n: int, rng: random.Random, mix: dict[str, float] = DEFAULT_MIX) -> list[Persona]:
    """n personas in the given proportions (at least one of each named kind when n allows)."""
    counts = {name: max(1, round(share * n)) if n >= len(mix) else 0 for name, share in mix.items()}
    counts["honest"] += n - sum(counts.values())
    names = [name for name, count in counts.items() for _ in range(count)]
    names += ["honest"] * (n - len(names))
    rng.shuffle(names)
    return [persona_named(name) for name in names[:n]]
