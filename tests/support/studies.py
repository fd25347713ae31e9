"""The study definitions of fixtures/, loaded the way ``load_study`` loads them."""

from __future__ import annotations

from surveys.definition import parse_definition, read_definition_file
from surveys.loader import study_load
from tests.support.paths import FIXTURES


def load_fixture(name: str, *, recruitment: dict | None = None):
    """The fixture as ``load_study`` loads it; ``recruitment`` replaces its recruitment section."""
    definition = read_definition_file(FIXTURES / name)
    if recruitment is not None:
        definition["recruitment"] = recruitment
    return study_load(definition=parse_definition(definition)).study


def load_short_tide(blocks_per_participant: int = 2):
    """TIDE (slug "tide") with each participant given ``blocks_per_participant`` of its 24 blocks (allocation,
    one judgement per block, no target): the same pages, for tests that need a participant's whole journey
    but not all 24 blocks of it."""
    definition = read_definition_file(FIXTURES / "tide.json")
    definition["allocation"] = {"blocks_per_participant": blocks_per_participant, "judgements_per_block": 1}
    definition["recruitment"] = {k: v for k, v in definition["recruitment"].items() if k != "target_completions"}
    return study_load(definition=parse_definition(definition)).study


def load_reasons_per_block():
    """The most-least study asking its "why" question on every block (a per-block free-text question)."""
    definition = read_definition_file(FIXTURES / "most_least.json")
    definition.update(slug="reasons-per-block", free_text=[{**definition["free_text"][0], "per_block": True}])
    return study_load(definition=parse_definition(definition)).study


def set_answers(participants, **answers: str) -> None:
    """Overwrite some demographic answers of every participant in a queryset (kept in one JSON column)."""
    for participant in participants:
        participant.demographics = {**participant.demographics, **answers}
        participant.save(update_fields=["demographics"])
