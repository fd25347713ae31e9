"""Definition texts longer than their database column are refused at load, with their path.

PostgreSQL enforces ``varchar(n)`` (SQLite does not), so before the schema knew
the column lengths an over-long title or condition name was a 500 from
``POST /api/studies/load/`` in production. The lengths live in one place,
``surveys.limits``, read by the schema and by the model columns.
"""

from __future__ import annotations

import copy
import json

import pytest
from django.core.management import CommandError, call_command
from rest_framework.test import APIClient

from surveys import limits
from surveys.definition import StudyDefinition
from surveys.models import (
    AttentionCheck, Block, Condition, DemographicQuestion, Dimension, FreeTextQuestion, Item, Participant, Scenario,
    Study, System,
)
from tests.support.researcher import make_user


def _rename(definition: dict, field: str, old: str, new: str) -> None:
    """Rename a system or condition everywhere the file names it."""
    names = definition[f"{field}s"]
    names[names.index(old)] = new
    if field == "condition" and old in definition.get("reference_conditions", []):
        definition["reference_conditions"] = [new if c == old else c for c in definition["reference_conditions"]]
    if field == "condition" and definition.get("comparison"):
        definition["comparison"] = {side: new if c == old else c for side, c in definition["comparison"].items()}
    for block in definition["blocks"]:
        for response in block["responses"]:
            if response[field] == old:
                response[field] = new


def _demographics(definition: dict) -> list[dict]:
    return definition["demographics"]  # the TIDE fixture's: age (number), sex, gender, race (choices) ...


def _padded_url(length: int) -> str:
    head = "https://app.prolific.com/submissions/complete?cc={code}&pad="
    return head + "a" * (length - len(head))


def _padded_pattern(length: int) -> str:
    return "^" + "a" * (length - 2) + "$"


# (name, path in the file, column length, mutate(definition, length) writing a text of that length)
FIELDS = [
    ("title", "title", limits.TITLE, lambda d, n: d.update(title="T" * n)),
    ("condition", "conditions[0]", limits.CONDITION_NAME, lambda d, n: _rename(d, "condition", "zero-shot", "c" * n)),
    ("system", "systems[0]", limits.SYSTEM_NAME, lambda d, n: _rename(d, "system", d["systems"][0], "s" * n)),
    ("scenario label", "scenarios[0].label", limits.SCENARIO_LABEL, lambda d, n: d["scenarios"][0].update(label="L" * n)),
    ("dimension label", "dimensions[0].label", limits.DIMENSION_LABEL, lambda d, n: d["dimensions"][0].update(label="D" * n)),
    ("demographic prompt", "demographics[0].prompt", limits.DEMOGRAPHIC_PROMPT,
     lambda d, n: _demographics(d)[0].update(prompt="P" * n)),
    ("completion url", "recruitment.completion_url", limits.COMPLETION_URL,
     lambda d, n: d["recruitment"].update(completion_url=_padded_url(n))),
    ("id pattern", "recruitment.id_pattern", limits.ID_PATTERN, lambda d, n: d["recruitment"].update(id_pattern=_padded_pattern(n))),
    ("id parameter", "recruitment.id_param", limits.PANEL_PARAM, lambda d, n: d["recruitment"].update(id_param="p" * n)),
    ("response id", "blocks[0].responses[0].id", limits.ITEM_KEY, lambda d, n: d["blocks"][0]["responses"][0].update(id="r" * n)),
    ("block id", "blocks[0].id", limits.KEY, lambda d, n: d["blocks"][0].update(id="b" * n)),
    ("source label", "blocks[0].responses[0].label", limits.SOURCE_LABEL,
     lambda d, n: d["blocks"][0]["responses"][0].update(label="A" * n)),
    ("sex choice", "demographics[1].choices[2]", limits.DEMOGRAPHIC_CHOICE,
     lambda d, n: _demographics(d)[1]["choices"].__setitem__(2, "9" * n)),
    ("hispanic choice", "demographics[4].choices[0]", limits.DEMOGRAPHIC_CHOICE,
     lambda d, n: _demographics(d)[4]["choices"].__setitem__(0, "W" * n)),
]
IDS = [f[0] for f in FIELDS]


@pytest.fixture
def api(db) -> APIClient:
    client = APIClient()
    client.force_authenticate(make_user("loader"))
    return client


def _with(definition: dict, mutate, length: int) -> dict:
    changed = copy.deepcopy(definition)
    mutate(changed, length)
    return changed


def _nothing_written() -> bool:
    return not any(model.objects.exists() for model in (Study, System, Condition, Scenario, Dimension, Block, Item))


@pytest.mark.parametrize("name,path,length,mutate", FIELDS, ids=IDS)
def test_the_api_refuses_a_text_longer_than_its_column_with_its_path(api, tide_definition, name, path, length, mutate):
    response = api.post("/api/studies/load/", {"definition": _with(tide_definition, mutate, length + 1)}, format="json")
    assert response.status_code == 400, response.content
    assert response["Content-Type"].startswith("application/json")
    problems = response.json()["definition"]
    assert any(p.startswith(f"{path}: ") and str(length) in p for p in problems), problems
    assert _nothing_written()


@pytest.mark.parametrize("name,path,length,mutate", FIELDS, ids=IDS)
def test_the_command_refuses_a_text_longer_than_its_column_with_its_path(db, tide_definition, tmp_path, name, path,
                                                                          length, mutate):
    file = tmp_path / "study.json"
    file.write_text(json.dumps(_with(tide_definition, mutate, length + 1)))
    with pytest.raises(CommandError) as caught:
        call_command("load_study", str(file))
    message = str(caught.value)
    assert "nothing was written" in message and f"  {path}: " in message and str(length) in message, message
    assert _nothing_written()


def test_every_text_at_its_column_length_is_stored(api, tide_definition):
    """On PostgreSQL this is what proves the schema's limits are the columns' (SQLite stores anything)."""
    definition = copy.deepcopy(tide_definition)
    for _, _, length, mutate in FIELDS:
        mutate(definition, length)
    definition["recruitment"]["id_pattern"] = _padded_pattern(limits.ID_PATTERN)
    response = api.post("/api/studies/load/", {"definition": definition}, format="json")
    assert response.status_code == 201, response.content
    study = Study.objects.get(slug="tide")
    assert len(study.title) == limits.TITLE
    assert len(study.completion_url) == limits.COMPLETION_URL and len(study.id_pattern) == limits.ID_PATTERN
    assert Condition.objects.filter(study=study, name="c" * limits.CONDITION_NAME).exists()
    assert System.objects.filter(study=study, name="s" * limits.SYSTEM_NAME).exists()
    assert Item.objects.filter(study=study, key="r" * limits.ITEM_KEY, source_label="A" * limits.SOURCE_LABEL).exists()
    age = DemographicQuestion.objects.get(study=study, key="age")
    sex = DemographicQuestion.objects.get(study=study, key="sex")
    assert len(age.prompt) == limits.DEMOGRAPHIC_PROMPT and "9" * limits.DEMOGRAPHIC_CHOICE in sex.choices


def test_an_answer_as_long_as_the_definition_allows_is_stored_without_truncation(db, tide):
    """Answers live in one JSON column: no per-question column can cut a long choice or text short."""
    longest = "x" * limits.DEMOGRAPHIC_TEXT
    participant = Participant.objects.create(study=tide, external_id="a" * limits.EXTERNAL_ID, pseudonym="p1",
                                             demographics={"race": "W" * limits.DEMOGRAPHIC_CHOICE, "note": longest})
    participant.refresh_from_db()
    assert participant.demographics == {"race": "W" * limits.DEMOGRAPHIC_CHOICE, "note": longest}


# The schema's maximum and the column's, for every text a definition writes into a bounded column.
SCHEMA = StudyDefinition.model_json_schema()


def _schema_max(*path: str) -> int:
    node = SCHEMA
    for part in path:
        node = node[part]
        if "$ref" in node:
            node = SCHEMA["$defs"][node["$ref"].split("/")[-1]]
    # An optional text (panel-only recruitment settings) is "a string of at most n, or null".
    lengths = [option["maxLength"] for option in node.get("anyOf", [node]) if "maxLength" in option]
    assert len(lengths) == 1, node
    return lengths[0]


COLUMNS = [
    (("properties", "slug"), Study, "slug"),
    (("properties", "title"), Study, "title"),
    (("properties", "language"), Study, "language"),
    (("properties", "systems", "items"), System, "name"),
    (("properties", "conditions", "items"), Condition, "name"),
    (("properties", "scenarios", "items", "properties", "id"), Scenario, "key"),
    (("properties", "scenarios", "items", "properties", "label"), Scenario, "label"),
    (("properties", "dimensions", "items", "properties", "key"), Dimension, "key"),
    (("properties", "dimensions", "items", "properties", "label"), Dimension, "label"),
    (("properties", "blocks", "items", "properties", "id"), Block, "key"),
    (("$defs", "ResponseDef", "properties", "id"), Item, "key"),
    (("$defs", "ResponseDef", "properties", "label"), Item, "source_label"),
    (("properties", "attention_checks", "items", "properties", "id"), AttentionCheck, "key"),
    (("properties", "free_text", "items", "properties", "key"), FreeTextQuestion, "key"),
    (("$defs", "DemographicDef", "properties", "prompt"), DemographicQuestion, "prompt"),
    (("$defs", "DemographicDef", "properties", "key"), DemographicQuestion, "key"),
    (("$defs", "RecruitmentDef", "properties", "completion_code"), Study, "completion_code"),
    (("$defs", "RecruitmentDef", "properties", "completion_url"), Study, "completion_url"),
    (("$defs", "RecruitmentDef", "properties", "id_pattern"), Study, "id_pattern"),
    (("$defs", "RecruitmentDef", "properties", "id_param"), Study, "id_param"),
    (("$defs", "RecruitmentDef", "properties", "study_param"), Study, "study_param"),
    (("$defs", "RecruitmentDef", "properties", "session_param"), Study, "session_param"),
]


@pytest.mark.parametrize("path,model,column", COLUMNS, ids=[f"{m.__name__}.{c}" for _, m, c in COLUMNS])
def test_the_schema_and_the_column_have_the_same_length(path, model, column):
    assert _schema_max(*path) == model._meta.get_field(column).max_length

