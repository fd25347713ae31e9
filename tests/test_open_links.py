"""Open links ("recruitment": {"mode": "open"}): anyone with /s/<slug>/ takes part under an id
the server draws; one participant per browser (a signed cookie), new starts limited per
address, and a completion page without any panel code or link."""

from __future__ import annotations

import pytest
from django.test import Client, override_settings

from surveys.definition import DefinitionError, parse_definition
from surveys.loader import StudyLocked, study_load
from surveys.models import Participant, TurnAway
from tests.support.studies import load_fixture

pytestmark = pytest.mark.usefixtures("fresh_cache")  # the start counters live in the cache

URL = "/s/most-least/"


@pytest.fixture
def open_study(db):
    return load_fixture("most_least.json", recruitment={"mode": "open", "target_completions": 40})


def _start(client: Client, **headers) -> Participant:
    assert client.get(URL, **headers)["Location"] == f"{URL}consent/"
    client.post(f"{URL}consent/", {"decision": "accept"})
    client.post(f"{URL}instructions/")
    return Participant.objects.get(external_id=client.session["survey:most-least"]["external_id"])


def test_the_link_starts_an_anonymous_participant_with_an_id_drawn_by_the_server(open_study):
    client = Client()
    response = client.get(URL + "?PROLIFIC_PID=" + "a" * 24 + "&id=ann%40example.org")  # whatever a visitor adds
    assert response.status_code == 303 and response["Location"] == f"{URL}consent/"
    cookie = response.cookies["hev_open_most-least"]
    assert cookie["path"] == URL and cookie["httponly"] and cookie["samesite"] == "Lax"
    participant = _start(client)
    assert participant.external_id.startswith("open-") and len(participant.external_id) == 5 + 32
    assert "a" * 24 not in participant.external_id and participant.panel_study_id == ""


def test_the_completion_page_shows_no_panel_code_or_link(open_study, steps):
    client = Client()
    _start(client)
    page = steps.finish(client, open_study).content.decode()
    assert "you have finished the study" in page
    assert "completion code" not in page.lower() and "Prolific" not in page and "<meta http-equiv" not in page
    participant = Participant.objects.get()
    assert (participant.status, participant.completion_code) == ("completed", "")


def test_one_browser_is_one_participant_resumed_after_its_session_ended(open_study, steps):
    browser = Client()
    first = _start(browser)
    steps.submit_current(browser, open_study)
    browser.cookies.pop("sessionid")  # the session ended; the study's cookie stays
    assert browser.get(URL)["Location"] == f"{URL}page/"
    assert browser.session["survey:most-least"]["external_id"] == first.external_id
    steps.finish(browser, open_study)
    browser.cookies.pop("sessionid")
    assert browser.get(URL)["Location"] == f"{URL}done/"  # a finisher does not start over
    assert Participant.objects.count() == 1
    other = _start(Client())
    assert other.external_id != first.external_id and Participant.objects.count() == 2


def test_a_forged_cookie_is_ignored(open_study):
    browser = Client()
    browser.cookies["hev_open_most-least"] = "open-" + "0" * 32
    browser.get(URL)
    assert browser.session["survey:most-least"]["external_id"] != "open-" + "0" * 32


@override_settings(OPEN_LINK_STARTS_PER_HOUR=3)
def test_new_starts_are_limited_per_address_but_returning_browsers_are_not(open_study):
    here = {"REMOTE_ADDR": "198.51.100.7"}
    returning = Client()
    _start(returning, **here)
    for _ in range(2):
        assert Client().get(URL, **here).status_code == 303
    refused = Client().get(URL, **here)
    assert refused.status_code == 429 and "Please try again later" in refused.content.decode()
    assert "hev_open_most-least" not in refused.cookies
    assert Client().get(URL, REMOTE_ADDR="203.0.113.5").status_code == 303  # another address
    returning.cookies.pop("sessionid")
    assert returning.get(URL, **here)["Location"] == f"{URL}page/"


def test_a_full_open_study_turns_newcomers_away_without_mentioning_a_panel(db):
    load_fixture("most_least.json", recruitment={"mode": "open", "target_completions": 1})
    _start(Client())
    page = Client().get(URL, follow=True).content.decode()
    assert "this study is full" in page and "Prolific" not in page
    assert TurnAway.objects.get().count == 1


# ---------------------------------------------------------------- the definition


def _definition(tide_definition: dict, **recruitment) -> dict:
    return {**tide_definition, "recruitment": recruitment}


def test_an_open_study_needs_no_panel_settings(tide_definition):
    recruitment = parse_definition(_definition(tide_definition, mode="open")).recruitment
    assert (recruitment.id_param, recruitment.id_pattern, recruitment.completion_url, recruitment.completion_code) == (
        None, None, None, None)


def test_an_open_study_refuses_panel_settings_with_their_paths(tide_definition):
    with pytest.raises(DefinitionError) as error:
        parse_definition(_definition(tide_definition, mode="open", id_param="workerId", completion_code="X1",
                                     completion_url="https://example.org/?c={code}"))
    assert [p.split(":")[0] for p in error.value.problems] == [
        "recruitment.completion_code", "recruitment.completion_url", "recruitment.id_param"]
    assert "an open study has no panel" in error.value.problems[0]


def test_a_panel_study_still_needs_its_completion_code_and_gets_prolific_s_defaults(tide_definition):
    with pytest.raises(DefinitionError) as error:
        parse_definition(_definition(tide_definition))
    assert error.value.problems == [
        "recruitment.completion_code: Value error, a panel study needs the code its finishers are paid on"]
    recruitment = parse_definition(_definition(tide_definition, completion_code="C1")).recruitment
    assert (recruitment.mode, recruitment.id_param, recruitment.id_pattern) == ("panel", "PROLIFIC_PID", "^[0-9a-f]{24}$")


def test_the_mode_cannot_change_once_people_took_part(tide, tide_definition, steps):
    steps.start(Client(), tide)
    with pytest.raises(StudyLocked, match="recruitment.mode cannot change from panel to open"):
        study_load(definition=parse_definition(_definition(tide_definition, mode="open")))
    tide.refresh_from_db()
    assert tide.recruitment_mode == "panel" and tide.id_param == "PROLIFIC_PID"
