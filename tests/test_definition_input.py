"""Bad input in a study definition is refused with its path, never stored (issue 30, item 7).

A NUL character cannot be stored in a PostgreSQL text column nor in jsonb (SQLite took it), and an
integer beyond its column's range failed in the database: both were 500s from ``POST /api/studies/load/``
and tracebacks from ``load_study``. Every text of the schema is ``definition_parts.Text`` (or built the same
way), so these tests walk the schema and every string of every fixture rather than a list of fields.
"""

from __future__ import annotations

import copy
import json
import types
import typing
from collections.abc import Iterator
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from pydantic import BaseModel
from rest_framework.test import APIClient

from surveys.definition import DefinitionError, StudyDefinition, parse_definition
from surveys.definition_parts import NO_NUL, NUL_MESSAGE
from surveys.models import Study
from tests.support.paths import FIXTURES

FIXTURE_FILES = sorted(path.name for path in FIXTURES.glob("*.json"))
INT32_MAX = 2**31 - 1  # PostgreSQL's integer, the column of a PositiveIntegerField


def _definition(name: str) -> dict:
    return json.loads((FIXTURES / name).read_text())


# --------------------------------------------------------------------------- every text refuses a NUL


def _unguarded(annotation: Any, metadata: list[Any], where: str) -> Iterator[str]:
    """The places under ``annotation`` where a ``str`` is taken without the NUL guard."""
    if typing.get_origin(annotation) is typing.Annotated:
        inner, *extra = typing.get_args(annotation)
        yield from _unguarded(inner, [*metadata, *extra], where)
    elif annotation is str:
        if NO_NUL not in metadata:
            yield where
    elif isinstance(annotation, type) and issubclass(annotation, BaseModel):
        for name, field in annotation.model_fields.items():
            yield from _unguarded(field.annotation, list(field.metadata), f"{annotation.__name__}.{name}")
    elif typing.get_origin(annotation) in (list, dict, typing.Union, types.UnionType):
        for k, arg in enumerate(typing.get_args(annotation)):
            yield from _unguarded(arg, [], f"{where}<{k}>")


def test_every_text_of_the_schema_refuses_a_nul():
    assert list(_unguarded(StudyDefinition, [], "StudyDefinition")) == []


def test_the_schema_walk_sees_an_unguarded_text():
    class Loose(BaseModel):
        names: list[str]
        notes: dict[str, typing.Annotated[str, NO_NUL]] | None = None

    assert list(_unguarded(Loose, [], "Loose")) == ["Loose.names<0>", "Loose.notes<0><0>"]


def _texts(data: Any, path: str = "") -> Iterator[tuple[str, Any, Any, bool]]:
    """(path, container, key, is_dict_key) of every string value and every dict key in ``data``."""
    if isinstance(data, dict):
        for key, value in data.items():
            at = f"{path}.{key}" if path else key
            yield at, data, key, True
            if isinstance(value, str):
                yield at, data, key, False
            else:
                yield from _texts(value, at)
    elif isinstance(data, list):
        for i, value in enumerate(data):
            if isinstance(value, str):
                yield f"{path}[{i}]", data, i, False
            else:
                yield from _texts(value, f"{path}[{i}]")


def _with_nul(definition: dict, index: int) -> tuple[dict, str, bool]:
    """A copy of ``definition`` with a NUL inside its ``index``-th text; the path of that text."""
    broken = copy.deepcopy(definition)
    path, container, key, is_key = list(_texts(broken))[index]
    if is_key:
        value = container.pop(key)
        container[key[:1] + "\0" + key[1:]] = value
    else:
        container[key] = container[key][:1] + "\0" + container[key][1:]
    return broken, path, is_key


@pytest.mark.parametrize("fixture", FIXTURE_FILES)
def test_a_nul_in_any_text_of_a_fixture_is_refused_with_its_path(fixture):
    definition = _definition(fixture)
    checked_values = 0
    for index in range(len(list(_texts(definition)))):
        broken, path, is_key = _with_nul(definition, index)
        with pytest.raises(DefinitionError) as caught:
            parse_definition(broken)
        problems = caught.value.problems
        if is_key:
            # A field name with a NUL is an unknown field; a key of a map is a text of the study.
            parent = path.rpartition(".")[0]
            assert any(p.startswith(parent) for p in problems), (path, problems)
            assert all("\0" not in p for p in problems), problems
            continue
        checked_values += 1
        # regions.map is either a built-in map's name or the study's own map: its problems name the form too.
        untagged = [p.replace(".built-in map", "").replace(".own map", "") for p in problems]
        assert any(p.startswith(f"{path}: ") and (NUL_MESSAGE in p or "pattern" in p or "Input should be" in p) for p in untagged), (path, problems)
    assert checked_values > 20


def test_a_nul_in_a_free_text_prompt_or_a_rating_label_names_its_path(tide_definition):
    definition = _definition("most_least.json")
    definition["free_text"][0]["prompt"] = "Why\0?"
    tide_definition["dimensions"][0]["labels"]["1\0"] = tide_definition["dimensions"][0]["labels"].pop("1")
    tide_definition["title"] = "TIDE\0"
    with pytest.raises(DefinitionError) as caught:
        parse_definition(definition)
    assert caught.value.problems == [f"free_text[0].prompt: Value error, {NUL_MESSAGE}"]
    with pytest.raises(DefinitionError) as caught:
        parse_definition(tide_definition)
    assert sorted(caught.value.problems) == [f"dimensions[0].labels.1\\0.[key]: Value error, {NUL_MESSAGE}",
                                             f"title: Value error, {NUL_MESSAGE}"]


@pytest.mark.parametrize("field", ["title", "consent"])
def test_the_load_command_refuses_a_nul_with_its_path_and_writes_nothing(db, tide_definition, tmp_path, field):
    tide_definition[field] = "Before\0after"
    path = tmp_path / "study.json"
    path.write_text(json.dumps(tide_definition))
    with pytest.raises(CommandError, match=rf"{field}: Value error, holds a NUL"):
        call_command("load_study", str(path))
    assert not Study.objects.exists()


@pytest.fixture
def api(owner, owner_token) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {owner_token}")
    return client


@pytest.mark.parametrize(("mutate", "path"), [
    (lambda d: d.update(title="TIDE\0"), "title"),
    (lambda d: d.update(consent="I agree\0"), "consent"),
    (lambda d: d["blocks"][2]["responses"][1].update(text="A\0B"), "blocks[2].responses[1].text"),
    (lambda d: d["dimensions"][0].update(label="Empathy\0"), "dimensions[0].label"),
    (lambda d: d["demographics"][1].update(prompt="Sex\0"), "demographics[1].prompt"),
    (lambda d: d["scenarios"][0].update(user_input="Hello\0"), "scenarios[0].user_input"),
], ids=["title", "consent", "a response", "a label", "a prompt", "a scenario"])
def test_the_api_answers_400_naming_the_text_with_a_nul(api, tide_definition, mutate, path):
    mutate(tide_definition)
    response = api.post("/api/studies/load/", {"definition": tide_definition}, format="json")
    assert response.status_code == 400
    assert response.json() == {"definition": [f"{path}: Value error, {NUL_MESSAGE}"]}
    assert not Study.objects.exists()


# --------------------------------------------------------------------------- integers within their columns


@pytest.mark.parametrize(("section", "field"), [
    ("recruitment", "target_completions"), ("quality", "attention_failures_allowed"),
])
def test_a_count_beyond_its_integer_column_is_refused_and_the_largest_one_is_stored(db, api, tide_definition,
                                                                                      section, field):
    tide_definition.setdefault(section, {})[field] = INT32_MAX + 1
    response = api.post("/api/studies/load/", {"definition": tide_definition}, format="json")
    assert response.status_code == 400
    assert response.json() == {"definition": [
        f"{section}.{field}: Input should be less than or equal to {INT32_MAX}"]}
    assert not Study.objects.exists()

    tide_definition[section][field] = INT32_MAX
    response = api.post("/api/studies/load/", {"definition": tide_definition}, format="json")
    assert response.status_code == 201, response.json()
    assert getattr(Study.objects.get(slug=tide_definition["slug"]), field) == INT32_MAX


@pytest.mark.parametrize(("mutate", "expected"), [
    (lambda d: d["blocks"][0].update(set=-1), "blocks[0].set: Input should be greater than or equal to 0"),
    (lambda d: d["blocks"][0].update(set=32768), "blocks[0].set: Input should be less than or equal to 32767"),
    (lambda d: d["attention_checks"][0].update(expected=2**40),
     "attention_checks[0].expected: Input should be less than or equal to 32767"),
    (lambda d: d["quality"].update(duration_max_minutes=float("inf")),
     "quality.duration_max_minutes: Input should be a finite number"),
    (lambda d: d["demographics"][0].update(max=float("nan")), "demographics[0].max: Input should be a finite number"),
])
def test_numbers_beyond_their_columns_or_not_finite_are_refused_with_their_path(tide_definition, mutate, expected):
    mutate(tide_definition)
    with pytest.raises(DefinitionError) as caught:
        parse_definition(tide_definition)
    assert caught.value.problems == [expected]
