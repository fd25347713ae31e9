"""Best-worst definitions that cannot be asked or analysed are refused with their path (issue 26, item 7)."""

from __future__ import annotations

import json

import pytest

from surveys.definition import DefinitionError, parse_definition
from surveys.models import Study
from tests.support.paths import FIXTURES


@pytest.fixture
def most_least_definition() -> dict:
    definition = json.loads((FIXTURES / "most_least.json").read_text())
    assert definition["best_worst"] and definition["letter_labels"] and not definition["ranking"]
    return definition


def problems_of(definition: dict) -> list[str]:
    with pytest.raises(DefinitionError) as caught:
        parse_definition(definition)
    return caught.value.problems


def test_the_fixture_itself_is_accepted(most_least_definition):
    assert parse_definition(most_least_definition).best_worst


def test_two_responses_of_a_block_with_the_same_label_are_refused(most_least_definition):
    most_least_definition["letter_labels"] = False
    responses = most_least_definition["blocks"][1]["responses"]
    for response, label in zip(responses, ["A", "B", "A", "C", "D", "E", "F", "G", "H", "I"]):
        response["label"] = label
    assert problems_of(most_least_definition) == [
        'blocks[1].responses[0].label: "A" is the label of another response of the block',
        'blocks[1].responses[2].label: "A" is the label of another response of the block',
    ]
    # Distinct labels within each block are fine (the same label may recur in another block).
    responses[2]["label"] = "Z"
    most_least_definition["blocks"][0]["responses"][0]["label"] = "A"
    assert parse_definition(most_least_definition).blocks[1].responses[2].label == "Z"


def test_fixed_labels_with_letter_labels_are_refused(most_least_definition):
    most_least_definition["blocks"][0]["responses"][1]["label"] = "Human"
    assert problems_of(most_least_definition) == [
        'blocks[0].responses[1].label: "Human" is a fixed label, but letter_labels shows letters by position; '
        "use one or the other"]


def test_best_worst_with_ranking_is_refused(most_least_definition):
    most_least_definition["ranking"] = True
    assert problems_of(most_least_definition) == [
        "best_worst: cannot be combined with ranking (both order the same responses); ask one of them"]


def test_the_same_labels_without_best_worst_are_not_this_checks_business(most_least_definition):
    most_least_definition.update(best_worst=False, ranking=True)
    most_least_definition["blocks"][0]["responses"][1]["label"] = "Human"
    assert parse_definition(most_least_definition).ranking


@pytest.mark.django_db
def test_the_api_answers_400_with_the_path_and_stores_nothing(most_least_definition, client, django_user_model):
    from rest_framework.test import APIClient

    most_least_definition["ranking"] = True
    user = django_user_model.objects.create_user("loader", password="pw-loader-123")
    api = APIClient()
    api.force_authenticate(user)
    before = Study.objects.count()
    response = api.post("/api/studies/load/", {"definition": most_least_definition}, format="json")
    assert response.status_code == 400
    assert "best_worst: cannot be combined with ranking" in json.dumps(response.json())
    assert Study.objects.count() == before


def test_a_study_that_asks_no_judgement_of_the_responses_is_refused(most_least_definition):
    """Free text alone only comments: a study needs a type whose answers judge the responses (each type says
    whether its own do, ``QuestionType.judges_responses``), and the problem names the fields that would ask one."""
    definition = {**most_least_definition, "best_worst": False, "dimensions": [],
                  "free_text": [{"key": "why", "prompt": "Why?", "per_block": True}]}
    assert problems_of(definition) == [
        "dimensions: a study needs at least one of dimensions, ranking, best_worst or pairwise"]
