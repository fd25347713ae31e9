"""Reloading a definition may not change what participants saw once anyone answered (issue 30, item 12).

What counts as participant-facing is declared on each field of the schema (``definition_parts.facing`` /
``not_facing``), not kept in a hand list: these tests walk every field of ``StudyDefinition``, so a field
added later (a question type's, a scenario's) is covered the day it is added.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

import pytest
from django.conf import settings
from pydantic import Field, create_model

from surveys.definition import (
    PARTICIPANT_FACING, DefinitionError, StudyDefinition, parse_definition, participant_facing_fields,
    unclassified_fields,
)
from surveys.definition_parts import facing, facing_mark, not_facing
from surveys.loader import StudyLocked, participant_facing_content, study_load
from surveys.models import Participant, Study
from tests.support.paths import FIXTURES
from tests.support.researcher import fill_with_bots

FIXTURE_FILES = ("tide.json", "counselor.json", "most_least.json", "pairwise.json")


def test_every_field_of_the_definition_says_whether_participants_see_it():
    assert unclassified_fields() == []
    marked = {name: facing_mark(field) for name, field in StudyDefinition.model_fields.items()}
    assert PARTICIPANT_FACING == {name for name, mark in marked.items() if mark}
    assert {"consent", "blocks", "dimensions", "ranking", "free_text"} <= PARTICIPANT_FACING
    assert {"title", "quality", "recruitment", "subgroups"}.isdisjoint(PARTICIPANT_FACING)


def test_a_field_declared_without_its_mark_is_unclassified_and_counts_as_participant_facing():
    model = create_model("WithNewFields", __base__=StudyDefinition, shown=(bool, facing(False)),
                         hidden=(bool, not_facing(False)), forgotten=(bool, Field(default=False)))
    assert unclassified_fields(model) == ["forgotten"]
    assert participant_facing_fields(model) == PARTICIPANT_FACING | {"shown", "forgotten"}


# --------------------------------------------------------------------------- a change to each facing field


def _leaves(value: Any, path: tuple = ()) -> Iterator[tuple[tuple, Any]]:
    if isinstance(value, dict):
        for key, inner in value.items():
            yield from _leaves(inner, (*path, key))
    elif isinstance(value, list):
        for i, inner in enumerate(value):
            yield from _leaves(inner, (*path, i))
    else:
        yield path, value


def _other_values(value: Any) -> list[Any]:
    """Values a leaf could take instead (a text changed, a flag flipped, a number moved, another language)."""
    if isinstance(value, bool):
        return [not value]
    if isinstance(value, int):
        return [value + 1, value - 1]
    if isinstance(value, str):
        languages = [code for code, _ in settings.LANGUAGES if code != value]
        return [f"{value} (changed)" if value else "Changed", *(languages if value in dict(settings.LANGUAGES) else [])]
    return []


#: Values of another shape than the fixtures' (no fixture allocates: "all" becomes k of n blocks; 25 x 24 / 4
#: is TIDE's target of 150).
OTHER_SHAPES: dict[str, list[Any]] = {"allocation": [{"blocks_per_participant": 4, "judgements_per_block": 25}]}


def _set(data: Any, path: tuple, value: Any) -> None:
    for key in path[:-1]:
        data = data[key]
    data[path[-1]] = value


def _changes(definition: dict, name: str) -> Iterator[dict]:
    """Copies of ``definition`` with field ``name`` changed: a leaf at a time, then a list item less or one
    more (a name nothing refers to yet)."""
    default = StudyDefinition.model_fields[name].get_default(call_default_factory=True)
    current = definition.get(name, default if not hasattr(default, "model_dump") else default.model_dump())
    for path, leaf in _leaves(current):
        for other in _other_values(leaf):
            changed = copy.deepcopy(definition)
            if path:
                changed[name] = copy.deepcopy(current)
                _set(changed[name], path, other)
            else:
                changed[name] = other
            yield changed
    for other in OTHER_SHAPES.get(name, []):
        yield {**copy.deepcopy(definition), name: other}
    if isinstance(current, list) and current:
        yield {**copy.deepcopy(definition), name: current[:-1]}
        if isinstance(current[-1], str):
            yield {**copy.deepcopy(definition), name: [*current, f"{current[-1]}-changed"]}


def _a_change(name: str) -> tuple[str, dict] | None:
    """(fixture, a valid definition of it whose participant-facing content differs in ``name`` only)."""
    for fixture in FIXTURE_FILES:
        definition = json.loads((FIXTURES / fixture).read_text())
        before = participant_facing_content(parse_definition(definition))
        for changed in _changes(definition, name):
            try:
                after = participant_facing_content(parse_definition(changed))
            except DefinitionError:
                continue
            if after[name] != before[name] and all(after[k] == before[k] for k in after if k != name):
                return fixture, changed
    return None


def test_each_participant_facing_field_can_be_changed_in_some_fixture():
    # Otherwise the test below could not check it: give a fixture a value of the new field.
    assert [name for name in sorted(PARTICIPANT_FACING) if _a_change(name) is None] == []


def test_changing_any_participant_facing_field_once_someone_answered_is_refused(db):
    changes: dict[str, list[tuple[str, dict]]] = {}
    for name in sorted(PARTICIPANT_FACING):
        if found := _a_change(name):
            changes.setdefault(found[0], []).append((name, found[1]))
    refused = []
    for fixture, fields in changes.items():
        original = json.loads((FIXTURES / fixture).read_text())
        study = study_load(definition=parse_definition(original)).study
        fill_with_bots(study, 1)
        assert Participant.objects.filter(study=study, is_preview=False).exists()
        stored = Study.objects.get(pk=study.pk).definition
        for name, changed in fields:
            with pytest.raises(StudyLocked, match=rf"cannot change \(changed: {name}\b"):
                study_load(definition=parse_definition(changed))
            assert Study.objects.get(pk=study.pk).definition == stored, name
            refused.append(name)
    assert sorted(refused) == sorted(PARTICIPANT_FACING)
