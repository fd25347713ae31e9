"""Entering a study: the panel link, consent, resuming, refusals, exit, completion (the preview: test_preview_launch)."""

import re
from datetime import timedelta

import pytest
from django.test import Client

from surveys.models import BlockVisit, ConsentDecline, ItemPlacement, Participant, TurnAway

PID = "a" * 24


def _without_csrf(response) -> str:
    return re.sub(r'name="csrfmiddlewaretoken" value="[^"]*"', "", response.content.decode())


def test_it_moves_the_panel_ids_into_the_session_and_redirects_to_a_clean_url(client, tide, steps):
    response = client.get(steps.link(tide, PID))
    assert response.status_code == 303
    assert response["Location"] == "/s/tide/consent/"
    assert PID not in response["Location"]
    entry = client.session["survey:tide"]
    assert (entry["external_id"], entry["panel_study_id"], entry["panel_session_id"]) == (PID, "st1", "se1")


@pytest.mark.parametrize("query", ["", "?PROLIFIC_PID=", "?PROLIFIC_PID=not-a-prolific-id", "?PROLIFIC_PID=" + "a" * 25,
                                   "?OTHER=" + "a" * 24])
def test_it_refuses_a_missing_or_malformed_id_and_creates_nothing(client, tide, query):
    response = client.get(f"/s/tide/{query}")
    assert response.status_code == 400
    assert "This link is incomplete" in response.content.decode()
    assert "survey:tide" not in client.session
    assert Participant.objects.count() == 0


def test_it_uses_the_study_s_own_parameter_names(client, tide):
    tide.id_param, tide.id_pattern = "workerId", r"^W[0-9]{3}$"
    tide.save()
    assert client.get("/s/tide/?workerId=W123")["Location"] == "/s/tide/consent/"
    assert client.get("/s/tide/?workerId=X123").status_code == 400


def test_it_saves_nothing_before_consent(client, tide, steps):
    client.get(steps.link(tide, PID))
    response = client.get("/s/tide/consent/")
    assert response.status_code == 200
    assert tide.consent_text.splitlines()[0][:40] in response.content.decode()
    assert (Participant.objects.count(), BlockVisit.objects.count(), ConsentDecline.objects.count()) == (0, 0, 0)


def test_it_counts_a_decline_for_today_and_records_nothing_else(client, tide, steps):
    client.get(steps.link(tide, PID))
    response = client.post("/s/tide/consent/", {"decision": "decline"}, follow=True)
    assert "nothing about you has been recorded" in response.content.decode()
    assert Participant.objects.count() == 0
    decline = ConsentDecline.objects.get()
    assert decline.count == 1
    assert "survey:tide" not in client.session
    Client().get(steps.link(tide, "b" * 24))
    other = Client()
    other.get(steps.link(tide, "c" * 24))
    other.post("/s/tide/consent/", {"decision": "decline"})
    assert ConsentDecline.objects.get().count == 2


def test_it_draws_the_whole_sequence_once_on_consent(client, tide, steps):
    client.get(steps.link(tide, PID))
    response = client.post("/s/tide/consent/", {"decision": "accept"})
    assert response["Location"] == "/s/tide/instructions/"
    participant = Participant.objects.get()
    assert participant.pseudonym.startswith("p_") and PID not in participant.pseudonym
    assert participant.blocks_assigned == 24 and participant.consented_at is not None
    visits = list(participant.visits.order_by("sequence"))
    assert [v.sequence for v in visits] == list(range(1, 27))
    assert sorted(v.block.key for v in visits if v.block) == sorted(f"Q{i}" for i in range(1, 25))
    checks = [v for v in visits if v.attention_check_id]
    assert len(checks) == 2 and all(1 < v.sequence < 26 for v in checks)
    assert ItemPlacement.objects.filter(visit__participant=participant).count() == 120
    for visit in visits:
        if visit.block:
            assert sorted(visit.placements.values_list("position", flat=True)) == [1, 2, 3, 4, 5]
    # A second consent POST (another tab) keeps the sequence drawn first.
    client.post("/s/tide/consent/", {"decision": "accept"})
    assert BlockVisit.objects.count() == 26


def test_it_keeps_the_order_and_first_shown_time_on_refresh(client, tide, steps):
    steps.start(client, tide, PID)
    first, spec = steps.page(client, tide)
    visit = BlockVisit.objects.get(pk=spec.visit_id)
    again, spec_again = steps.page(client, tide)
    assert spec_again.placements == spec.placements
    assert _without_csrf(first) == _without_csrf(again)
    assert BlockVisit.objects.get(pk=spec.visit_id).shown_at == visit.shown_at is not None


def test_it_resumes_at_the_same_place_with_the_same_orders_in_another_browser(client, tide, steps):
    steps.start(client, tide, PID)
    for _ in range(3):
        steps.submit_current(client, tide)
    _, spec = steps.page(client, tide)
    other = Client()
    response = other.get(steps.link(tide, PID))
    assert response.status_code == 303 and response["Location"] == "/s/tide/page/"
    _, other_spec = steps.page(other, tide)
    assert (other_spec.visit_id, other_spec.placements) == (spec.visit_id, spec.placements)
    assert Participant.objects.count() == 1


def test_it_shows_a_completed_participant_the_code_again(client, tide, steps):
    steps.start(client, tide, PID)
    steps.finish(client, tide)
    again = Client().get(steps.link(tide, PID), follow=True)
    assert again.request["PATH_INFO"] == "/s/tide/done/"
    assert "C1TIDE7Q" in again.content.decode()


def test_it_writes_the_code_before_any_page_shows_it(client, tide, steps):
    steps.start(client, tide, PID)
    seen = []
    while True:
        response, spec = steps.page(client, tide)
        seen.append(response.content.decode())
        if spec.kind not in {"block", "check"}:
            break
        client.post("/s/tide/page/", steps.answers(spec))
    assert not any("C1TIDE7Q" in html for html in seen)
    response = client.post("/s/tide/about-you/", {"age": "34", "state": "OH"})
    assert response.status_code == 303 and response["Location"] == "/s/tide/done/"
    participant = Participant.objects.get()
    assert (participant.status, participant.completion_code) == ("completed", "C1TIDE7Q")
    assert participant.finished_at >= participant.started_at
    page = client.get("/s/tide/done/").content.decode()
    assert "C1TIDE7Q" in page
    assert 'href="https://app.prolific.com/submissions/complete?cc=C1TIDE7Q"' in page


def test_it_turns_newcomers_away_politely_when_the_study_is_full(client, tide, steps):
    tide.target_completions = 1
    tide.save()
    steps.start(client, tide, PID)
    steps.finish(client, tide)
    newcomer = Client()
    response = newcomer.get(steps.link(tide, "b" * 24), follow=True)
    assert "this study is full" in response.content.decode()
    assert TurnAway.objects.get().count == 1
    assert Participant.objects.count() == 1
    # The one who completed still sees their code.
    assert "C1TIDE7Q" in Client().get(steps.link(tide, PID), follow=True).content.decode()


def test_it_turns_away_at_consent_when_the_study_filled_meanwhile(client, tide, steps):
    tide.target_completions = 1
    tide.save()
    client.get(steps.link(tide, "b" * 24))
    first = Client()
    steps.start(first, tide, PID)
    steps.finish(first, tide)
    response = client.post("/s/tide/consent/", {"decision": "accept"}, follow=True)
    assert "this study is full" in response.content.decode()
    assert Participant.objects.count() == 1 and TurnAway.objects.get().count == 1


def test_it_refuses_newcomers_to_a_closed_study_but_lets_others_finish(client, tide, steps):
    steps.start(client, tide, PID)
    tide.is_open = False
    tide.save()
    response = Client().get(steps.link(tide, "b" * 24), follow=True)
    assert "this study is closed" in response.content.decode()
    assert steps.submit_current(client, tide)[0].status_code == 303


def test_it_shows_a_session_expired_page_and_resumes_from_the_panel_link(client, tide, steps):
    steps.start(client, tide, PID)
    steps.submit_current(client, tide)
    client.session.flush()
    client.cookies.clear()
    response = client.get("/s/tide/page/")
    assert "Your session has ended" in response.content.decode()
    response = client.post("/s/tide/page/", {"visit": "1"})
    assert "Your session has ended" in response.content.decode()
    assert client.get(steps.link(tide, PID))["Location"] == "/s/tide/page/"
    assert BlockVisit.objects.filter(submitted_at__isnull=False).count() == 1


def test_it_enforces_csrf_on_participant_posts(tide, steps):
    client = Client(enforce_csrf_checks=True)
    client.get(steps.link(tide, PID))
    assert client.post("/s/tide/consent/", {"decision": "accept"}).status_code == 403
    assert Participant.objects.count() == 0
    page = client.get("/s/tide/consent/").content.decode()
    token = page.split('name="csrfmiddlewaretoken" value="')[1].split('"')[0]
    assert client.post("/s/tide/consent/", {"decision": "accept", "csrfmiddlewaretoken": token}).status_code == 303
    assert client.post("/s/tide/instructions/").status_code == 403
    assert client.post("/s/tide/exit/").status_code == 403
    assert Participant.objects.get().instructions_seen is False


def test_it_lets_a_participant_exit_early_without_a_finish_time(client, tide, steps):
    steps.start(client, tide, PID)
    steps.submit_current(client, tide)
    assert "Do you want to leave" in client.get("/s/tide/exit/").content.decode()
    response = client.post("/s/tide/exit/", follow=True)
    assert "You have left the study" in response.content.decode()
    participant = Participant.objects.get()
    assert (participant.status, participant.finished_at, participant.completion_code) == ("exited", None, "")
    assert client.get("/s/tide/page/")["Location"] == "/s/tide/left/"
    assert Client().get(steps.link(tide, PID))["Location"] == "/s/tide/left/"


def test_every_step_url_leads_back_to_the_current_step(client, tide, steps):
    steps.start(client, tide, PID)
    for url in ["/s/tide/consent/", "/s/tide/instructions/", "/s/tide/about-you/", "/s/tide/done/", "/s/tide/"]:
        response = client.get(url)
        assert response.status_code == 303 and response["Location"] == "/s/tide/page/", url


def test_the_session_lasts_at_least_an_hour(settings):
    assert settings.SESSION_COOKIE_AGE >= 60 * 60
    assert timedelta(seconds=settings.SESSION_COOKIE_AGE) >= timedelta(hours=1)
