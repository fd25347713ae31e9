"""The prompt a judge is given for one block, and the parsing of its reply (pure: no database).

The prompt shows what a participant's page shows, in the study's own words (its language): the
instructions, the conversation, the responses under blinded labels (A, B, ... by display position,
never a system or condition name), and the questions with their scale labels. The platform's own
words (the speakers' names and how to answer) come translated in ``Page.words``
(``judges.services.prompt_words``); without them, in English. The reply must be one JSON object;
anything else is recorded as unparsed, never guessed.
"""

from __future__ import annotations

import json
import re
import string
from dataclasses import dataclass, field
from typing import Any

# Marks the platform's wording for the translation catalogues; judges.services translates it into the
# study's language when it builds a block's Page (this module stays free of the active language).
from django.utils.translation import gettext_noop

DEFAULT_TEMPLATE = """$instructions

$conversation

$responses

$questions

$answer_format"""

RATING_FORMAT = gettext_noop('Answer with one JSON object only, mapping each response label to its scores, e.g. '
                             '{"A": {$example}, "B": {$example}}.')
RANKING_FORMAT = gettext_noop(' Also give "ranking": every label once, best first, e.g. "ranking": [$labels].')
BEST_WORST_FORMAT = gettext_noop('Answer with one JSON object only, naming the most and the least $construct '
                                 'response, e.g. {"most": "A", "least": "B"}.')
PAIRWISE_FORMAT = gettext_noop('Answer with one JSON object only: {"preference": "A"}, {"preference": "B"}, '
                               '{"preference": "tie"} or {"preference": "both_bad"}.')
# The speakers as the participant's page names them (templates/surveys/_turn.html).
SPEAKERS = {"user": gettext_noop("Person:"), "assistant": gettext_noop("Assistant:")}
#: The platform's words of a prompt, by key: what ``Page.words`` translates.
WORDS = {"rating_format": RATING_FORMAT, "ranking_format": RANKING_FORMAT, "best_worst_format": BEST_WORST_FORMAT,
         "pairwise_format": PAIRWISE_FORMAT, **SPEAKERS}


@dataclass(frozen=True)
class Scale:
    key: str
    label: str
    low: int
    high: int
    point_labels: dict[str, str]


@dataclass(frozen=True)
class Page:
    """What the judge is shown: the block's conversation and its responses in display order."""

    instructions: str
    question_text: str
    context: list[dict[str, str]]
    user_input: str
    responses: list[str]
    scales: list[Scale]
    pairwise: bool
    ranking: bool = False
    best_worst: bool = False
    construct: str = ""
    # WORDS's keys -> the study's language; a key left out is said in English.
    words: dict[str, str] = field(default_factory=dict)


def label(position: int) -> str:
    """A, B, ... Z, AA ...: the blinded label of the response at display ``position`` (1-based)."""
    letters = ""
    while position:
        position, rest = divmod(position - 1, 26)
        letters = string.ascii_uppercase[rest] + letters
    return letters


def render(page: Page, template: str = "") -> list[dict[str, str]]:
    """The chat messages of one block (one user message)."""
    words = {**WORDS, **page.words}
    conversation = "\n".join(f"{words.get(turn['role'], turn['role'])} {turn['text']}" for turn in page.context)
    conversation = (conversation + "\n" if conversation else "") + f"{words['user']} {page.user_input}"
    responses = "\n\n".join(f"[{label(k)}]\n{text}" for k, text in enumerate(page.responses, start=1))
    if page.pairwise:
        questions, answer_format = page.question_text, words["pairwise_format"]
    else:
        questions = "\n".join(
            f"{scale.key}: {scale.label} ({scale.low}-{scale.high}"
            + "".join(f"; {point} = {words_}" for point, words_ in sorted(scale.point_labels.items(),
                                                                          key=lambda kv: int(kv[0])))
            + ")" for scale in page.scales)
        if page.question_text:
            questions = page.question_text + "\n" + questions
        example = ", ".join(f'"{scale.key}": {scale.low}' for scale in page.scales)
        answer_format = string.Template(words["rating_format"]).safe_substitute(example=example) if page.scales else ""
        if page.best_worst:
            answer_format = string.Template(words["best_worst_format"]).safe_substitute(construct=page.construct)
        if page.ranking:
            labels = ", ".join(f'"{label(k)}"' for k in range(1, len(page.responses) + 1))
            answer_format += string.Template(words["ranking_format"]).safe_substitute(labels=labels)
    text = string.Template(template or DEFAULT_TEMPLATE).safe_substitute(
        instructions=page.instructions, conversation=conversation, responses=responses, questions=questions,
        answer_format=answer_format)
    return [{"role": "user", "content": text}]


def _json_object(reply: str) -> Any:
    """The one JSON object of the reply (a fenced ```json block is accepted); None if there is not exactly one."""
    text = reply.strip()
    fenced = re.fullmatch(r"```(?:json)?\s*(.*?)\s*```", text, flags=re.S)
    if fenced:
        text = fenced.group(1)
    try:
        return json.loads(text)
    except ValueError:
        return None


@dataclass(frozen=True)
class Reply:
    """A parsed reply: scores by display position, ranks by display position, the most and least positions."""

    scores: dict[int, dict[str, int]]
    ranks: dict[int, int]
    most: int | None
    least: int | None


def parse_reply(reply: str, page: Page) -> Reply | None:
    """Everything the block asks (ratings, ranking, most/least), or None if anything is missing or off."""
    data = _json_object(reply)
    labels = [label(k) for k in range(1, len(page.responses) + 1)]
    expected = (set(labels) if page.scales else set()) | ({"ranking"} if page.ranking else set()) \
        | ({"most", "least"} if page.best_worst else set())
    if not isinstance(data, dict) or set(data) != expected:
        return None
    scores = parse_ratings(json.dumps({k: data[k] for k in labels}), page) if page.scales else {}
    if scores is None:
        return None
    ranks: dict[int, int] = {}
    if page.ranking:
        order = data["ranking"]
        if not isinstance(order, list) or sorted(map(str, order)) != sorted(labels) or len(order) != len(labels):
            return None
        ranks = {labels.index(name) + 1: rank for rank, name in enumerate(order, start=1)}
    most = least = None
    if page.best_worst:
        if data["most"] not in labels or data["least"] not in labels or data["most"] == data["least"]:
            return None
        most, least = labels.index(data["most"]) + 1, labels.index(data["least"]) + 1
    return Reply(scores=scores, ranks=ranks, most=most, least=least)


def parse_ratings(reply: str, page: Page) -> dict[int, dict[str, int]] | None:
    """{display position: {dimension key: score}} for every response and scale, or None if anything is off."""
    data = _json_object(reply)
    if not isinstance(data, dict) or set(data) != {label(k) for k in range(1, len(page.responses) + 1)}:
        return None
    parsed = {}
    for position in range(1, len(page.responses) + 1):
        scores = data[label(position)]
        if not isinstance(scores, dict) or set(scores) != {scale.key for scale in page.scales}:
            return None
        for scale in page.scales:
            value = scores[scale.key]
            if isinstance(value, bool) or not isinstance(value, int) or not scale.low <= value <= scale.high:
                return None
        parsed[position] = dict(scores)
    return parsed


def parse_preference(reply: str) -> str | None:
    """left, right, tie or both_bad; None if the reply is not exactly one of the allowed objects."""
    data = _json_object(reply)
    if not isinstance(data, dict) or set(data) != {"preference"}:
        return None
    return {"A": "left", "B": "right", "tie": "tie", "both_bad": "both_bad"}.get(data["preference"])
