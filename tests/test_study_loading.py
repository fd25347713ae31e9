"""Study definition files: validation with paths, loading, and re-loading rules."""

import copy
import json

import pytest
from django.core.management import CommandError, call_command

from surveys.definition import DefinitionError, parse_definition
from surveys.loader import StudyLocked, study_load
from surveys.models import AttentionCheck, Block, Dimension, Item, Participant, Study
from tests.support.paths import FIXTURES


def test_it_loads_the_tide_study_as_in_the_paper(tide):
    assert tide.blocks.count() == 24
    assert tide.items.count() == 120
    assert list(tide.blocks.values_list("key", flat=True)[:3]) == ["Q1", "Q2", "Q3"]
    assert set(tide.scenarios.values_list("key", flat=True)) == {"S1", "S2", "S3", "S4", "S5", "S6"}
    q2r4 = Item.objects.get(study=tide, key="Q2-R4")
    assert (q2r4.system.name, q2r4.condition.name) == ("Qwen2.5-1.5B", "fine-tuned")
    q4r3 = Item.objects.get(study=tide, key="Q4-R3")
    assert (q4r3.system.name, q4r3.condition.name) == ("Llama-3.2-1B", "zero-shot")
    empathy = Dimension.objects.get(study=tide)
    assert (empathy.scale_min, empathy.scale_max) == (1, 5)
    assert empathy.point_labels["1"] == "Not at all empathetic"
    assert empathy.point_labels["5"] == "Extremely empathetic"
    assert tide.ranking_enabled and not tide.best_worst_enabled
    assert AttentionCheck.objects.filter(study=tide).count() == 2
    assert list(tide.demographic_questions.values_list("key", flat=True)) == [
        "age", "sex", "gender", "race", "hispanic", "education", "employment", "state"
    ]
    assert tide.duration_min_minutes == 10 and tide.duration_max_minutes == 75


def test_the_reference_response_is_the_same_across_a_scenarios_blocks(tide):
    texts = set(Item.objects.filter(study=tide, block__scenario__key="S1", condition__name="reference").values_list("text", flat=True))
    assert len(texts) == 1


def test_it_loads_the_counselor_study_with_three_dimensions(counselor):
    assert list(counselor.dimensions.values_list("key", flat=True)) == ["resonance", "coherence", "advice"]
    assert counselor.is_demo_content
    assert "DEMO" in counselor.description


def test_it_loads_the_most_least_study(most_least):
    assert most_least.best_worst_enabled
    assert most_least.dimensions.count() == 0
    # No fixed letter per source: the page letters responses by their (random) display position.
    labels = list(Item.objects.filter(block__key="M1", study=most_least).values_list("source_label", flat=True))
    assert most_least.letter_labels and labels == [""] * 5
    assert Item.objects.filter(block__key="M1", study=most_least).count() == 5
    question = most_least.free_text_questions.get()
    assert question.prompt.startswith("What made certain responses seem more empathetic") and not question.per_block


def test_the_command_loads_all_three_fixtures(db, capsys):
    call_command("load_study", str(FIXTURES / "tide.json"), str(FIXTURES / "counselor.json"), str(FIXTURES / "most_least.json"))
    assert set(Study.objects.values_list("slug", flat=True)) == {"tide", "counselor", "most-least"}
    assert 'study "tide" created' in capsys.readouterr().out


def _break(definition: dict, mutate) -> dict:
    broken = copy.deepcopy(definition)
    mutate(broken)
    return broken


MALFORMED = [
    ("unknown condition", lambda d: d["blocks"][3]["responses"][4].update(condition="fine_tuned"),
     'blocks[3].responses[4]: unknown condition "fine_tuned"'),
    ("unknown system", lambda d: d["blocks"][0]["responses"][1].update(system="GPT-5"),
     'blocks[0].responses[1].system: unknown system "GPT-5"'),
    ("unknown scenario", lambda d: d["blocks"][5].update(scenario="S9"), 'blocks[5].scenario: unknown scenario "S9"'),
    ("duplicate block id", lambda d: d["blocks"][7].update(id="Q1"), 'blocks[7].id: "Q1" is used twice'),
    ("duplicate response id", lambda d: d["blocks"][2]["responses"][0].update(id="Q1-R1"),
     'blocks[2].responses[0].id: "Q1-R1" is used by another response'),
    ("empty text", lambda d: d["blocks"][1]["responses"][2].update(text=""), "blocks[1].responses[2].text: String should have at least 1 character"),
    ("missing consent", lambda d: d.pop("consent"), "consent: Field required"),
    ("scale upside down", lambda d: d["dimensions"][0].update(min=5, max=1), "dimensions[0]: Value error, max (1) must be greater than min (5)"),
    ("label off the scale", lambda d: d["dimensions"][0]["labels"].update({"7": "x"}), "dimensions[0]: Value error, labels for points outside the scale: 7"),
    ("attention answer off the scale", lambda d: d["attention_checks"][1].update(expected=9),
     "attention_checks[1].expected: 9 is outside the empathy scale 1-5"),
    ("unknown field", lambda d: d["blocks"][0].update(colour="red"), "blocks[0].colour: Extra inputs are not permitted"),
    ("bad slug", lambda d: d.update(slug="TIDE study"), "slug: String should match pattern"),
    ("bad id pattern", lambda d: d["recruitment"].update(id_pattern="[0-9"), "recruitment.id_pattern: Value error, not a valid regular expression"),
    ("completion url without code", lambda d: d["recruitment"].update(completion_url="https://x.example/done"),
     "recruitment.completion_url: Value error, must be an http(s) URL containing {code}"),
    ("duration window inverted", lambda d: d["quality"].update(duration_min_minutes=80),
     "quality: Value error, duration_max_minutes must be greater than duration_min_minutes"),
    ("fast share above one", lambda d: d["quality"].update(fast_share_max=1.5), "quality.fast_share_max: Input should be less than or equal to 1"),
    ("ranking with uneven blocks", lambda d: d["blocks"][0]["responses"].pop(), "blocks: ranking needs every block to show the same number of responses"),
    ("comparison with an unknown condition", lambda d: d["comparison"].update(treatment="fine_tuned"),
     'comparison.treatment: unknown condition "fine_tuned"'),
    ("comparison with a reference", lambda d: d["comparison"].update(baseline="reference"),
     'comparison.baseline: "reference" is a reference condition'),
    ("subgroup of an unknown demographic", lambda d: d["subgroups"][2].update(demographic="income"),
     'subgroups[2].demographic: unknown demographic "income"'),
    ("subgroup with an unknown answer", lambda d: d["subgroups"][1]["group_a"].update(answers=["PhD"]),
     'subgroups[1].group_a.answers[0]: "PhD" is not an answer of education'),
    ("number range on a choice question", lambda d: d["subgroups"][2]["group_a"].update(answers=[], at_least=3),
     "subgroups[2].group_a: at_least/below need a number question; gender is a choice question"),
    ("region map with an unknown answer", lambda d: d.update(regions={"demographic": "gender", "map": {"Womxn": "A"}}),
     'regions.map.Womxn: "Womxn" is not an answer of gender'),
    ("unknown built-in region map", lambda d: d["regions"].update(map="eu_nuts"),
     'regions.map: unknown built-in map "eu_nuts"'),
    ("demographic of an unknown type", lambda d: d["demographics"][0].update(type="slider"),
     'demographics[0]: Value error, unknown type "slider"'),
    ("number question without a range", lambda d: d["demographics"][0].pop("max"),
     "demographics[0]: Value error, a number question needs min and max"),
    ("demographic key taken by a column", lambda d: d["demographics"][0].update(key="region"),
     'demographics[0].key: "region" is a column of participants.csv already'),
    ("synonym of no answer", lambda d: d["demographics"][2]["synonyms"].update(W="Womxn"),
     'demographics[2].synonyms.W: "Womxn" is not an answer of gender'),
]


@pytest.mark.parametrize("name,mutate,expected", MALFORMED, ids=[m[0] for m in MALFORMED])
def test_a_malformed_file_reports_the_path_and_writes_nothing(db, tide_definition, tmp_path, name, mutate, expected):
    path = tmp_path / "study.json"
    path.write_text(json.dumps(_break(tide_definition, mutate)))
    with pytest.raises(CommandError) as caught:
        call_command("load_study", str(path))
    assert expected in str(caught.value)
    assert "nothing was written" in str(caught.value)
    assert Study.objects.count() == 0 and Item.objects.count() == 0


def test_it_reports_every_problem_at_once(tide_definition):
    def two_problems(d):
        d["blocks"][0]["responses"][0]["condition"] = "zs"
        d["blocks"][1]["scenario"] = "nope"
    with pytest.raises(DefinitionError) as caught:
        parse_definition(_break(tide_definition, two_problems))
    assert len(caught.value.problems) == 2


def test_a_file_that_is_not_json_is_refused(db, tmp_path):
    path = tmp_path / "study.json"
    path.write_text("{not json")
    with pytest.raises(CommandError, match="not valid JSON"):
        call_command("load_study", str(path))


def test_a_yaml_file_loads_too(db, tide_definition, tmp_path):
    import yaml
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(tide_definition))
    call_command("load_study", str(path))
    assert Study.objects.get(slug="tide").items.count() == 120


def test_loading_twice_updates_in_place_when_nobody_has_started(tide, tide_definition):
    first_ids = set(Item.objects.filter(study=tide).values_list("pk", flat=True))
    changed = _break(tide_definition, lambda d: d["blocks"][0]["responses"][0].update(text="A new wording."))
    changed["blocks"].pop()  # Q24 goes away
    result = study_load(definition=parse_definition(changed))
    assert result.study.pk == tide.pk and not result.created
    assert Item.objects.get(study=tide, key="Q1-R1").text == "A new wording."
    assert not Block.objects.filter(study=tide, key="Q24").exists()
    kept_ids = set(Item.objects.filter(study=tide).values_list("pk", flat=True))
    assert kept_ids < first_ids  # the same rows, updated, minus Q24's five


def test_reordering_options_inside_a_block_does_not_trip_the_unique_option(tide, tide_definition):
    def swap(d):
        first, second = d["blocks"][0]["responses"][0], d["blocks"][0]["responses"][1]
        first["option"], second["option"] = second["option"], first["option"]
    study_load(definition=parse_definition(_break(tide_definition, swap)))
    assert Item.objects.get(study=tide, key="Q1-R1").option == 2


def test_once_participants_exist_content_changes_are_refused(tide, tide_definition):
    Participant.objects.create(study=tide, external_id="a" * 24, pseudonym="p1")
    changed = _break(tide_definition, lambda d: d["blocks"][0]["responses"][0].update(text="Different."))
    with pytest.raises(StudyLocked, match=r"already has participants.*blocks\[0\]\.responses\[0\]\.text"):
        study_load(definition=parse_definition(changed))
    assert Item.objects.get(study=tide, key="Q1-R1").text != "Different."


def test_once_participants_exist_settings_can_still_change(tide, tide_definition):
    Participant.objects.create(study=tide, external_id="a" * 24, pseudonym="p1")
    def settings_only(d):
        d["title"] = "New title"
        d["recruitment"]["target_completions"] = 300
        d["quality"]["duration_min_minutes"] = 12
    study_load(definition=parse_definition(_break(tide_definition, settings_only)))
    tide.refresh_from_db()
    assert (tide.title, tide.target_completions, tide.duration_min_minutes) == ("New title", 300, 12)


def test_the_locked_refusal_is_a_clear_command_error(tide, tide_definition, tmp_path):
    Participant.objects.create(study=tide, external_id="a" * 24, pseudonym="p1")
    path = tmp_path / "tide.json"
    path.write_text(json.dumps(_break(tide_definition, lambda d: d["attention_checks"].pop())))
    with pytest.raises(CommandError, match="what they saw cannot change"):
        call_command("load_study", str(path))


@pytest.mark.parametrize("name", ["tide.json", "counselor.json", "most_least.json"])
def test_attention_checks_speak_of_what_their_page_shows(name):
    """A check's page (templates/surveys/check.html) shows its text as "A statement" above one
    scale, the first dimension's: no question above it, no reply, no other scale."""
    definition = json.loads((FIXTURES / name).read_text())
    for check in definition.get("attention_checks", []):
        text = check["text"]
        assert "this statement" in text
        for absent in ("question above", "reply", "response", "first scale"):
            assert absent not in text.lower(), (check["id"], absent)
        scale = definition["dimensions"][0]
        point = check["expected"]
        assert f"select {point} ({scale['labels'][str(point)]})" in text


def test_the_published_schema_is_the_one_the_loader_checks():
    from surveys.definition import StudyDefinition

    published = json.loads((FIXTURES.parent / "docs" / "study-definition.schema.json").read_text())
    assert published == StudyDefinition.model_json_schema()
