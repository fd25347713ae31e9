"""A study starts as a draft; its researchers see the sequence a new participant would get, click through it as
a participant with nothing recorded, then launch it (issue 25, item 7)."""

from __future__ import annotations

import re

import pytest
from django.core.management import call_command
from django.test import Client

from bots.pages import page_spec_from_html
from surveys import services
from surveys.definition import parse_definition
from surveys.launch import study_launch
from surveys.loader import StudyLocked, study_load
from surveys.models import (
    BlockVisit, ConsentDecline, Draft, FreeTextAnswer, ItemPlacement, Participant, Rating, Study, TurnAway,
)
from surveys.preview import allocation_preview
from tests.support.paths import FIXTURES
from tests.support.survey_steps import SurveySteps

PID = "d" * 24
RECORDS = (Participant, BlockVisit, ItemPlacement, Rating, FreeTextAnswer, Draft, ConsentDecline, TurnAway)


def record_counts() -> dict[str, int]:
    return {model.__name__: model.objects.count() for model in RECORDS}


def load_command(*args: str) -> Study:
    call_command("load_study", *args, str(FIXTURES / "tide.json"), stdout=open("/dev/null", "w"))
    return Study.objects.get(slug="tide")


@pytest.fixture
def draft(db, owner) -> Study:
    study = load_command()
    study.owners.add(owner)
    return study


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def click_through(client: Client, slug: str, *, seed: int) -> tuple[list[int], str]:
    """Walk the whole preview with valid answers; returns the page numbers of the blocks shown and the last page."""
    response = client.get(f"/s/{slug}/preview/?seed={seed}")
    assert response.status_code == 303 and response["Location"] == f"/s/{slug}/preview/consent/"
    client.post(f"/s/{slug}/preview/consent/", {"decision": "accept"})
    client.post(f"/s/{slug}/preview/instructions/")
    shown = []
    while True:
        response = client.get(f"/s/{slug}/preview/page/", follow=True)
        html = response.content.decode()
        spec = page_spec_from_html(html)
        if spec.kind not in {"block", "check"}:
            break
        assert "data-draft-url" not in html  # the page's script keeps no draft either
        if spec.kind == "block":
            shown.append(spec.visit_id)
        posted = client.post(f"/s/{slug}/preview/page/", SurveySteps().answers(spec))
        assert posted.status_code == 303, posted.content.decode()[:500]
    assert response.request["PATH_INFO"] == f"/s/{slug}/preview/about-you/"
    done = client.post(f"/s/{slug}/preview/about-you/", {}, follow=True)
    return shown, done.content.decode()


# --- drafts ---------------------------------------------------------------------------------


def test_load_study_creates_a_draft_that_participants_are_told_is_not_open_yet(draft):
    assert draft.is_draft and not draft.is_open
    response = Client().get(f"/s/tide/?PROLIFIC_PID={PID}&STUDY_ID=s&SESSION_ID=t")
    assert (response.status_code, response["Location"]) == (303, "/s/tide/notice/not-yet/")
    page = Client().get("/s/tide/notice/not-yet/")
    assert page.status_code == 200 and "This study is not open yet" in page.content.decode()
    assert not Participant.objects.exists()


def test_load_study_open_launches_the_study_and_reloading_keeps_its_state(db):
    study = load_command("--open")
    assert study.is_open and study.launched_at is not None
    launched_at = study.launched_at
    reloaded = load_command()  # a plain reload does not make a launched study a draft again
    assert reloaded.is_open and reloaded.launched_at == launched_at


def test_the_enrolment_service_refuses_a_draft(draft):
    with pytest.raises(services.StudyClosed):
        services.participant_enroll(study=draft, external_id=PID)
    assert not Participant.objects.exists()


def test_the_fixtures_of_the_test_suite_are_launched(tide):
    assert tide.is_open and not tide.is_draft


# --- what a new participant would get ---------------------------------------------------------------


def test_the_allocation_shown_is_the_one_a_participant_drawn_with_that_seed_gets(draft, owner):
    html = signed_in(owner).get("/studies/tide/launch/?seed=1234").content.decode()
    table = html[html.index("data-allocation"):]
    shown = re.findall(r'<tr><th scope="row">(\d+)</th>(?:<td>([^<]*)</td>|<td colspan="3">attention check ([^<]*)</td>)',
                       table)
    study_launch(study=draft)
    participant = services.participant_enroll(study=draft, external_id=PID, seed=1234)
    visits = BlockVisit.objects.filter(participant=participant).order_by("sequence")
    expected = [(str(v.sequence), v.block.key if v.block else "", v.attention_check.key if v.attention_check else "")
                for v in visits]
    assert shown == expected and len(expected) == 24 + 2  # TIDE: 24 blocks, 2 attention checks
    # Each block's responses in the order the participant is shown them.
    first = visits.filter(block__isnull=False).first()
    keys = list(ItemPlacement.objects.filter(visit=first).order_by("position").values_list("item__key", flat=True))
    row = table[table.index(f"<td>{first.block.key}</td>"):]
    assert re.findall(r"<li>(\S+) \(", row)[:len(keys)] == keys


def test_a_different_seed_draws_a_different_sequence(draft):
    orders = {tuple(page.block.key if page.block else page.attention_check.key
                    for page in allocation_preview(study=draft, seed=seed)) for seed in range(5)}
    assert len(orders) == 5


# --- the click-through ---------------------------------------------------------------------------------


def test_the_preview_clicks_through_every_page_and_records_nothing(draft, owner):
    before = record_counts()
    client = signed_in(owner)
    shown, done = click_through(client, "tide", seed=77)
    assert len(shown) == 24
    assert "C1TIDE7Q" in done and 'http-equiv="refresh"' not in done  # the code, never a trip to the panel
    assert "Nothing you enter in this preview is recorded." in done
    assert record_counts() == before
    draft.refresh_from_db()
    assert draft.is_draft  # previewing launches nothing


def test_the_preview_follows_the_sequence_of_its_seed(draft, owner):
    client = signed_in(owner)
    client.get("/s/tide/preview/?seed=5")
    client.post("/s/tide/preview/consent/", {"decision": "accept"})
    client.post("/s/tide/preview/instructions/")
    html = client.get("/s/tide/preview/page/").content.decode()
    first = allocation_preview(study=draft, seed=5)[0]
    assert first.block.scenario.user_input.split("\n")[0][:40] in html.replace("<br>", "\n")


def test_a_preview_page_refuses_incomplete_answers_as_a_participant_page_does(draft, owner):
    client = signed_in(owner)
    client.get("/s/tide/preview/?seed=3")
    client.post("/s/tide/preview/consent/", {"decision": "accept"})
    client.post("/s/tide/preview/instructions/")
    refused = client.post("/s/tide/preview/page/", {"visit": "1"})
    assert refused.status_code == 400 and "error-summary" in refused.content.decode()
    assert client.get("/s/tide/preview/page/").status_code == 200  # still on the first page
    assert client.get("/s/tide/preview/about-you/")["Location"] == "/s/tide/preview/page/"


def test_declining_in_the_preview_counts_no_decline(draft, owner):
    client = signed_in(owner)
    client.get("/s/tide/preview/")
    response = client.post("/s/tide/preview/consent/", {"decision": "decline"})
    assert response.status_code == 200 and not ConsentDecline.objects.exists()


def test_only_the_studys_researchers_preview_it(draft, other):
    assert Client().get("/s/tide/preview/")["Location"].startswith("/accounts/login/")
    assert signed_in(other).get("/s/tide/preview/").status_code == 404
    assert signed_in(other).get("/s/tide/preview/consent/").status_code == 404


def test_a_preview_of_a_study_loaded_again_starts_over(draft, owner, tide_definition):
    client = signed_in(owner)
    client.get("/s/tide/preview/?seed=9")
    client.post("/s/tide/preview/consent/", {"decision": "accept"})
    client.post("/s/tide/preview/instructions/")

    on_screen = allocation_preview(study=draft, seed=9)[0].block.key
    # A draft may still change: the block on screen goes.
    tide_definition["blocks"] = [b for b in tide_definition["blocks"] if b["id"] != on_screen]
    study_load(definition=parse_definition(tide_definition), as_draft=True)
    response = client.get("/s/tide/preview/page/")
    assert response.status_code == 303 and response["Location"] == "/s/tide/preview/?seed=9"


# --- launching -----------------------------------------------------------------------------------------


def test_the_launch_button_opens_the_study_to_participants(draft, owner):
    client = signed_in(owner)
    page = client.get("/studies/tide/launch/").content.decode()
    assert 'data-study-state="draft"' in page and "data-launch" in page
    assert "data-draft-notice" in client.get("/studies/tide/").content.decode()
    response = client.post("/studies/tide/launch/")
    assert (response.status_code, response["Location"]) == (302, "/studies/tide/launch/")
    draft.refresh_from_db()
    assert draft.is_open and draft.launched_at is not None
    page = client.get("/studies/tide/launch/").content.decode()
    assert 'data-study-state="open"' in page and "data-launch" not in page
    entered = Client().get(f"/s/tide/?PROLIFIC_PID={PID}&STUDY_ID=s&SESSION_ID=t")
    assert entered["Location"] == "/s/tide/consent/"


def test_another_researcher_cannot_launch_it(draft, other):
    assert signed_in(other).post("/studies/tide/launch/").status_code == 404
    draft.refresh_from_db()
    assert draft.is_draft


def test_launching_twice_keeps_the_first_launch_and_does_not_reopen_a_closed_study(draft):
    first = study_launch(study=draft).launched_at
    Study.objects.filter(pk=draft.pk).update(is_open=False)
    again = study_launch(study=draft)
    assert again.launched_at == first and not again.is_open


def test_once_a_participant_answered_the_study_is_frozen_as_before(draft, tide_definition):
    study_launch(study=draft)
    client = Client()
    client.get(f"/s/tide/?PROLIFIC_PID={PID}&STUDY_ID=s&SESSION_ID=t")
    client.post("/s/tide/consent/", {"decision": "accept"})
    tide_definition["consent"] += " Changed."
    with pytest.raises(StudyLocked, match="consent"):
        study_load(definition=parse_definition(tide_definition), as_draft=True)


def test_the_study_list_names_drafts(draft, owner):
    html = signed_in(owner).get("/studies/").content.decode()
    assert "<td>draft</td>" in html


def test_an_open_study_cannot_be_a_draft_in_the_database(draft):
    from django.db import IntegrityError, transaction

    with pytest.raises(IntegrityError), transaction.atomic():
        Study.objects.filter(pk=draft.pk).update(is_open=True)


def test_the_admin_refuses_to_open_a_draft_and_says_how(draft, rf):
    from django.contrib import admin
    from django.forms.models import model_to_dict

    from tests.support.researcher import make_user

    request = rf.get("/")
    request.user = make_user("boss", is_staff=True)
    request.user.is_superuser = True
    form_class = admin.site._registry[Study].get_form(request, draft)
    data = {key: value for key, value in model_to_dict(draft).items() if value is not None}
    form = form_class({**data, "is_open": True, "owners": []}, instance=draft)
    assert not form.is_valid()
    assert "launching it" in form.errors["is_open"][0]


def test_the_api_says_whether_a_study_is_launched(draft, owner):
    from rest_framework.test import APIClient

    api = APIClient()
    api.force_authenticate(owner)
    assert api.get("/api/studies/tide/").json()["launched_at"] is None
    study_launch(study=draft)
    body = api.get("/api/studies/tide/").json()
    assert body["launched_at"] is not None and body["is_open"] is True
