"""Held places: people in progress keep a place for a time limit, newcomers are turned away
when completions plus live holds reach the target, lapsed holds free their place, and
concurrent newcomers never over-fill a study (threads on the real database)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from surveys import places, services
from surveys.definition import DefinitionError, parse_definition
from surveys.models import Participant, TurnAway
from tests.support.researcher import field
from tests.support.threads import in_threads
from web import clock
from web.clock import clock_set_to

A, B, C = "a" * 24, "b" * 24, "c" * 24


def _later(minutes: float):
    moment = timezone.now() + timedelta(minutes=minutes)
    return clock_set_to(lambda: moment)


def _limit(tide, *, target=2, estimated=None, hold=None):
    tide.target_completions, tide.estimated_minutes, tide.hold_minutes = target, estimated, hold
    tide.save()


def _turned_away() -> int:
    return sum(TurnAway.objects.values_list("count", flat=True))


# ---------------------------------------------------------------- the limit


def test_the_hold_limit_is_the_explicit_one_else_twice_the_estimate_else_the_longest_duration(tide):
    assert places.hold_limit(tide) == timedelta(minutes=75)  # quality.duration_max_minutes of TIDE
    _limit(tide, estimated=30)
    assert places.hold_limit(tide) == timedelta(minutes=60)
    _limit(tide, estimated=30, hold=45)
    assert places.hold_limit(tide) == timedelta(minutes=45)


def test_a_definition_declares_the_estimate_and_the_hold_and_refuses_nonsense(tide_definition):
    tide_definition["recruitment"].update(estimated_minutes=30, hold_minutes=90)
    recruitment = parse_definition(tide_definition).recruitment
    assert (recruitment.estimated_minutes, recruitment.hold_minutes) == (30, 90)
    tide_definition["recruitment"].update(estimated_minutes=0, hold_minutes=31 * 24 * 60)
    with pytest.raises(DefinitionError) as error:
        parse_definition(tide_definition)
    assert [p.split(":")[0] for p in error.value.problems] == [
        "recruitment.estimated_minutes", "recruitment.hold_minutes"]


def test_enrolling_sets_the_hold_from_the_start_and_previews_hold_nothing(tide):
    _limit(tide, estimated=20)
    participant = services.participant_enroll(study=tide, external_id=A)
    assert participant.hold_expires_at - participant.started_at == timedelta(minutes=40)
    preview = services.participant_enroll(study=tide, external_id="preview-1", is_preview=True)
    assert preview.hold_expires_at is None
    assert places.places_taken(study=tide) == 1


# ---------------------------------------------------------------- the flow


def test_newcomers_are_turned_away_while_people_in_progress_hold_every_place(tide, steps):
    _limit(tide, target=2)
    steps.start(Client(), tide, A)
    steps.start(Client(), tide, B)
    response = Client().get(steps.link(tide, C), follow=True)
    assert "this study is full" in response.content.decode()
    assert _turned_away() == 1
    assert Participant.objects.count() == 2


def test_someone_who_left_early_frees_their_place(tide, steps):
    _limit(tide, target=1)
    leaver = Client()
    steps.start(leaver, tide, A)
    leaver.post("/s/tide/exit/")
    assert Client().get(steps.link(tide, B))["Location"] == "/s/tide/consent/"


def test_a_lapsed_hold_frees_its_place_and_its_owner_sees_why_they_cannot_go_on(tide, steps):
    _limit(tide, target=1, estimated=10)  # a 20-minute hold
    slow = Client()
    steps.start(slow, tide, A)
    steps.submit_current(slow, tide)
    _, spec = steps.page(slow, tide)
    with _later(21):
        newcomer = Client()
        assert newcomer.get(steps.link(tide, B))["Location"] == "/s/tide/consent/"
        newcomer.post("/s/tide/consent/", {"decision": "accept"})
        response = slow.get("/s/tide/page/")
        assert response.status_code == 303 and response["Location"] == "/s/tide/notice/time-up/"
        page = slow.get(response["Location"]).content.decode()
        assert "your time ran out" in page and "answers you already gave are kept" in page
        # Posting an answer is refused the same way, and nothing is saved.
        response = slow.post("/s/tide/page/", steps.answers(spec))
        assert response["Location"] == "/s/tide/notice/time-up/"
    slow_participant = Participant.objects.get(external_id=A)
    assert slow_participant.status == "in_progress"
    assert slow_participant.visits.filter(submitted_at__isnull=False).count() == 1


def test_someone_back_after_their_time_continues_while_a_place_is_free(tide, steps):
    _limit(tide, target=2, estimated=10)
    slow = Client()
    steps.start(slow, tide, A)
    with _later(25):
        response, _spec = steps.submit_current(slow, tide)
        assert response.status_code == 303 and response["Location"] == "/s/tide/page/"
        participant = Participant.objects.get(external_id=A)
        # Their time is up: they take a place again only for the page in hand.
        assert clock.now() < participant.hold_expires_at <= clock.now() + places.HOLD_GRACE
        # So a newcomer takes the last place, and the one after that is turned away.
        steps.start(Client(), tide, B)
        assert "this study is full" in Client().get(steps.link(tide, C), follow=True).content.decode()
    assert participant.visits.filter(submitted_at__isnull=False).count() == 1


def test_a_hold_about_to_lapse_is_renewed_even_when_the_study_is_full(tide, steps):
    _limit(tide, target=1, estimated=10)
    participant_client = Client()
    steps.start(participant_client, tide, A)
    with _later(19):  # one minute left, inside the grace period
        response, _ = steps.submit_current(participant_client, tide)
        assert response["Location"] == "/s/tide/page/"
        hold = Participant.objects.get().hold_expires_at
        assert hold >= clock.now() + places.HOLD_GRACE - timedelta(seconds=1)
        assert "this study is full" in Client().get(steps.link(tide, B), follow=True).content.decode()


def test_finishing_after_the_time_ran_out_counts_once_and_never_over_fills(tide, steps):
    _limit(tide, target=1, estimated=10)
    slow = Client()
    steps.start(slow, tide, A)
    with _later(30):
        steps.finish(slow, tide)  # nobody else came: a place was free at every page
        assert Participant.objects.get().status == "completed"
        assert "this study is full" in Client().get(steps.link(tide, B), follow=True).content.decode()


def test_studies_without_a_target_never_turn_anyone_away(tide, steps):
    _limit(tide, target=None, estimated=10)
    slow = Client()
    steps.start(slow, tide, A)
    with _later(60):
        assert steps.submit_current(slow, tide)[0]["Location"] == "/s/tide/page/"
        assert Client().get(steps.link(tide, B))["Location"] == "/s/tide/consent/"


# ---------------------------------------------------------------- the dashboard


def test_the_dashboard_shows_live_holds_lapsed_ones_and_places_left(owner_client, study, steps):
    _limit(study, target=5, estimated=10)
    steps.start(Client(), study, A)
    done = Client()
    steps.start(done, study, B)
    steps.finish(done, study)
    with _later(5):
        steps.start(Client(), study, C)
    with _later(22):  # A's hold (20 minutes) has lapsed, C's has not
        page = owner_client.get(f"/studies/{study.slug}/").content.decode()
        data = owner_client.get(f"/studies/{study.slug}/dashboard.json").json()["funnel"]
    assert "Holding a place" in page and "Places left" in page
    assert (field(page, "funnel.holding"), field(page, "funnel.time_up"), field(page, "funnel.places_left")) == ("1", "1", "3")
    assert (data["holding"], data["time_up"], data["completed"], data["places_left"]) == (1, 1, 1, 3)


# ---------------------------------------------------------------- concurrency


def _enter_and_consent(study, steps, external_id: str) -> str:
    client = Client()
    entered = client.get(steps.link(study, external_id))
    if entered["Location"] != f"/s/{study.slug}/consent/":
        return entered["Location"]
    return client.post(f"/s/{study.slug}/consent/", {"decision": "accept"})["Location"]


@pytest.mark.slow(reason="many concurrent newcomers on a transactional database")
def test_fifty_newcomers_at_once_for_ten_places_admit_exactly_ten(transactional_db, tide, steps):
    _limit(tide, target=10)
    outcomes = in_threads(50, lambda i: _enter_and_consent(tide, steps, f"{i:024x}"))
    assert outcomes.count("/s/tide/instructions/") == 10
    assert outcomes.count("/s/tide/notice/full/") == 40
    assert Participant.objects.filter(study=tide).count() == 10
    assert places.places_taken(study=tide) == 10
    assert _turned_away() == 40
    # Every admitted participant has their whole sequence; the refused ones left no rows behind.
    assert set(Participant.objects.values_list("blocks_assigned", flat=True)) == {24}


@pytest.mark.slow(reason="many concurrent newcomers on a transactional database")
def test_a_returning_latecomer_and_newcomers_racing_for_the_last_place_fill_it_once(transactional_db, tide, steps):
    _limit(tide, target=2, estimated=10)  # 20-minute holds
    late = Client()
    steps.start(late, tide, A)
    with _later(15):
        steps.start(Client(), tide, B)
    with _later(25):  # A's hold has lapsed, B's has not: one place is free
        def work(i):
            if i == 0:
                response = late.get("/s/tide/page/")
                return "page" if response.status_code == 200 else response["Location"]
            return _enter_and_consent(tide, steps, f"{i + 100:024x}")

        outcomes = in_threads(20, work)
        assert places.places_taken(study=tide) == 2
    admitted = outcomes[1:].count("/s/tide/instructions/") + (outcomes[0] == "page")
    assert admitted == 1, outcomes
    assert outcomes[0] in ("page", "/s/tide/notice/time-up/")
