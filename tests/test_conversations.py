"""A scenario's conversation so far (``context``): checked with its path, stored, frozen once answered, shown
as a transcript above the responses (an ordered list of turns naming their speakers, earlier turns folded)."""

from __future__ import annotations

import copy
import json
from html.parser import HTMLParser

import pytest

from surveys.conversation import RECENT_TURNS
from surveys.definition import DefinitionError, parse_definition
from surveys.loader import StudyLocked, study_load
from surveys.models import Scenario, Study
from tests.support.paths import FIXTURES

PID = "c" * 24


def turns(n: int) -> list[dict[str, str]]:
    """``n`` turns, the person first, then taking turns; each text names its number."""
    return [{"role": "user" if i % 2 else "assistant", "text": f"turn {i} <b>of</b> {n}"} for i in range(1, n + 1)]


def with_context(definition: dict, context: list, slug: str | None = None) -> dict:
    changed = copy.deepcopy(definition)
    for scenario in changed["scenarios"]:
        scenario["context"] = context
    if slug:
        changed["slug"] = slug
    return changed


class _Transcript(HTMLParser):
    """The conversation section of a page: its lists (folded or not, with their start) and their items' text."""

    def __init__(self) -> None:
        super().__init__()
        self.lists: list[dict] = []
        self.in_section = self.in_details = False
        self.item: list[str] | None = None
        self.speaker = False
        self.speakers: list[str] = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "section" and "data-conversation" in attrs:
            self.in_section = True
        if not self.in_section:
            return
        if tag == "details":
            self.in_details = True
        elif tag == "ol":
            self.lists.append({"folded": self.in_details, "start": int(attrs.get("start", 1)),
                               "role": attrs.get("role"), "items": []})
        elif tag == "li":
            self.item = []
        elif tag == "span" and attrs.get("class") == "speaker":
            self.speaker = True

    def handle_endtag(self, tag):
        if tag == "section":
            self.in_section = False
        elif tag == "details":
            self.in_details = False
        elif tag == "li" and self.item is not None:
            self.lists[-1]["items"].append(" ".join("".join(self.item).split()))
            self.item = None
        elif tag == "span":
            self.speaker = False

    def handle_data(self, data):
        if self.item is not None:
            self.item.append(data)
            if self.speaker:
                self.speakers.append(data.strip())


def transcript(html: str) -> _Transcript:
    parser = _Transcript()
    parser.feed(html)
    return parser


def first_block_html(client, study) -> str:
    """The participant's first page (always a block: no check comes before the first block)."""
    client.get(f"/s/{study.slug}/?{study.id_param}={PID}&STUDY_ID=s&SESSION_ID=t")
    client.post(f"/s/{study.slug}/consent/", {"decision": "accept"})
    client.post(f"/s/{study.slug}/instructions/")
    return client.get(f"/s/{study.slug}/page/").content.decode()


# --- the definition --------------------------------------------------------------------------------


@pytest.mark.parametrize("context, problem", [
    ("I am sad", "scenarios[0].context: Input should be a valid list"),
    (["I am sad"], "scenarios[0].context[0]: Input should be a valid dictionary or instance of TurnDef"),
    ([{"role": "system", "text": "be kind"}], "scenarios[0].context[0].role: Input should be 'user' or 'assistant'"),
    ([{"role": "user"}], "scenarios[0].context[0].text: Field required"),
    ([{"role": "user", "text": "  "}], "scenarios[0].context[0].text: String should have at least 1 character"),
    ([{"role": "user", "text": "hi", "time": "9:00"}], "scenarios[0].context[0].time: Extra inputs are not permitted"),
])
def test_a_context_that_is_not_a_list_of_turns_is_refused_with_its_path_and_nothing_is_written(
    db, tide_definition, context, problem
):
    broken = copy.deepcopy(tide_definition)
    broken["scenarios"][0]["context"] = context
    with pytest.raises(DefinitionError) as caught:
        study_load(definition=parse_definition(broken))
    assert caught.value.problems == [problem]
    assert not Study.objects.exists()


def test_a_scenario_without_a_context_has_an_empty_one(tide):
    contexts = list(Scenario.objects.filter(study=tide).values_list("context", flat=True))
    assert len(contexts) == 6 and all(context == [] for context in contexts)


def test_the_context_is_stored_turn_by_turn(db, tide_definition):
    study = study_load(definition=parse_definition(with_context(tide_definition, turns(3)))).study
    assert Scenario.objects.get(study=study, key="S1").context == turns(3)


def test_the_context_cannot_change_once_a_participant_answered(db, tide_definition, client, steps):
    definition = with_context(tide_definition, turns(3))
    study = study_load(definition=parse_definition(definition)).study
    steps.start(client, study, PID)
    steps.submit_current(client, study)
    changed = copy.deepcopy(definition)
    changed["scenarios"][0]["context"][1]["text"] = "something else"
    with pytest.raises(StudyLocked, match=r"scenarios\[0\]\.context\[1\]\.text"):
        study_load(definition=parse_definition(changed))
    assert Scenario.objects.get(study=study, key="S1").context == turns(3)


# --- the block page ----------------------------------------------------------------------------------


def test_a_long_conversation_shows_its_last_turns_and_folds_the_earlier_ones(db, tide_definition, client):
    n = RECENT_TURNS + 3
    study = study_load(definition=parse_definition(with_context(tide_definition, turns(n)))).study
    html = first_block_html(client, study)
    shown = transcript(html)
    folded, recent = shown.lists
    assert folded["folded"] and not recent["folded"]
    assert [len(folded["items"]), len(recent["items"])] == [3, RECENT_TURNS]
    assert recent["start"] == 4  # numbering goes on where the folded list stops
    assert folded["role"] == recent["role"] == "list"  # list semantics kept although the bullets are hidden
    assert folded["items"][0] == "Person: turn 1 <b>of</b> 7"  # the text is escaped, never markup
    assert recent["items"][-1] == "Person: turn 7 <b>of</b> 7"
    assert shown.speakers == ["Person:", "Assistant:"] * 3 + ["Person:"]
    assert "Show the 3 earlier messages" in html
    # Above the responses, after the heading of the block.
    assert html.index("data-conversation") < html.index('id="scenario"') < html.index('class="response"')


def test_a_short_conversation_is_shown_whole(db, tide_definition, client):
    study = study_load(definition=parse_definition(with_context(tide_definition, turns(RECENT_TURNS + 1)))).study
    shown = transcript(first_block_html(client, study))
    assert [(block["folded"], len(block["items"]), block["start"]) for block in shown.lists] == [
        (False, RECENT_TURNS + 1, 1)]


def test_a_scenario_without_a_conversation_shows_none(tide, client):
    html = first_block_html(client, tide)
    assert "data-conversation" not in html and transcript(html).lists == []


def test_a_chinese_study_names_the_speakers_in_chinese(db, client):
    definition = json.loads((FIXTURES / "counselor_zh.json").read_text())
    definition["recruitment"] = {"completion_code": "ZHCTX1"}  # entered by a panel link, as first_block_html does
    study = study_load(definition=parse_definition(with_context(definition, turns(RECENT_TURNS + 2)))).study
    html = first_block_html(client, study)
    shown = transcript(html)
    assert shown.speakers[:2] == ["求助者：", "助手："]
    assert "目前为止的对话" in html and "显示前 2 条消息" in html
    assert "Assistant:" not in html and "The conversation so far" not in html


# --- exports and codebook ------------------------------------------------------------------------------


def test_scenarios_csv_carries_each_conversation_as_json_and_the_codebook_describes_it(db, tide_definition, quick_stats):
    from analysis.exporting import exports
    from tests.support.researcher import finished_run
    from tests.test_codebook import assert_zip_is_described, open_zip, read_csvs

    definition = with_context(tide_definition, turns(3))
    definition["scenarios"][1]["context"] = []
    definition["scenarios"][0]["user_input"] = "=1+1 is what I asked"  # a formula start, escaped as everywhere
    study = study_load(definition=parse_definition(definition)).study
    # scenarios.csv is the study's scenarios, whoever took part: a run with no participants yet has it all
    # (three bots were filled in here before; nothing read their answers).
    run = finished_run(study)
    archive = open_zip(run)
    rows = read_csvs(archive)["scenarios.csv"]
    assert rows[0] == ["scenario", "label", "user_input", "context"]
    by_key = {row[0]: row for row in rows[1:]}
    assert sorted(by_key) == sorted(s["id"] for s in definition["scenarios"])
    assert json.loads(by_key["S1"][3]) == turns(3) and json.loads(by_key["S2"][3]) == []
    assert by_key["S1"][2] == "'=1+1 is what I asked"
    assert_zip_is_described(archive)
    assert "scenarios" in exports.exports_of(run)
