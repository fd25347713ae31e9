"""Withdrawal (issue 27, item 3): a participant, or a researcher on their request, deletes their answers.

Runs on SQLite and on PostgreSQL (the attacks: forged, replayed and foreign POSTs, withdrawing twice).
"""

from __future__ import annotations

from contextlib import contextmanager

import pytest
from django.core.management import CommandError, call_command
from django.test import Client

from analysis.models import ParticipantResult, ResultTable
from surveys import allocation, services, withdrawal
from surveys.models import (
    BlockAssignment, BlockTally, BlockVisit, Draft, FreeTextAnswer, ItemPlacement, Participant, Rating, Study,
    Withdrawal,
)
from tests.support.downloads import csv_rows
from tests.support.researcher import fill_with_bots, finished_run
from tests.support.shared import in_process_tasks, rows_kept_until_exit
from tests.support.studies import load_fixture, load_short_tide
from web.signals import researcher_action

pytestmark = pytest.mark.django_db
PID = "a" * 24
OTHER_PID = "b" * 24


@contextmanager
def announced():
    """The actions announced on web.signals.researcher_action meanwhile (our own signal: the audit
    trail's receiver connects the same way)."""
    heard: list[dict] = []

    def receiver(sender, **kwargs):
        heard.append(kwargs)

    researcher_action.connect(receiver, weak=False)
    try:
        yield heard
    finally:
        researcher_action.disconnect(receiver)


@pytest.fixture
def small_run(study, quick_stats):
    """TIDE (owned by ``owner``) with six scripted participants and a finished quick run: cheaper than
    ``done_run`` (twelve), and enough for exports to hold rows."""
    fill_with_bots(study, 6)
    return finished_run(study)


def _rows_of(participant_id: int) -> dict[str, int]:
    """Everything stored about one participant, table by table."""
    return {
        "participant": Participant.objects.filter(pk=participant_id).count(),
        "visits": BlockVisit.objects.filter(participant_id=participant_id).count(),
        "placements": ItemPlacement.objects.filter(visit__participant_id=participant_id).count(),
        "ratings": Rating.objects.filter(placement__visit__participant_id=participant_id).count(),
        "free_text": FreeTextAnswer.objects.filter(participant_id=participant_id).count(),
        "drafts": Draft.objects.filter(participant_id=participant_id).count(),
        "assignments": BlockAssignment.objects.filter(participant_id=participant_id).count(),
        "results": ParticipantResult.objects.filter(participant_id=participant_id).count(),
    }


def _everything() -> tuple:
    return (
        sorted(Participant.objects.values_list("pk", "status", "demographics")),
        BlockVisit.objects.count(), Rating.objects.count(), FreeTextAnswer.objects.count(), Draft.objects.count(),
        Withdrawal.objects.count(),
    )


def _draft_on_current_page(client, study, steps) -> None:
    response, spec = steps.page(client, study)
    data = steps.answers(spec)
    assert client.post(f"/s/{study.slug}/page/draft/", data).status_code == 204


# --- the participant's pages ----------------------------------------------------------------------------


@pytest.fixture
def short_tide(db):
    """TIDE with two of its blocks per participant: the link is in every participant page's frame, and a
    journey of 24 blocks (tests/test_bots.py, tests/test_flow_pages.py) would only make it slower to reach."""
    return load_short_tide(2)


def test_every_participant_page_links_to_withdrawal(client, short_tide, steps):
    tide = short_tide
    steps.start(client, tide, PID)
    for path in ("instructions/", "page/", "exit/"):
        client.get(f"/s/{tide.slug}/{path}")  # instructions redirect to the page once read
        html = client.get(f"/s/{tide.slug}/{path}", follow=True).content.decode()
        assert 'href="/s/tide/withdraw/"' in html and "Withdraw and delete my answers" in html, path
    steps.finish(client, tide)
    done = client.get(f"/s/{tide.slug}/done/").content.decode()
    assert "Withdraw and delete my answers" in done


def test_the_about_you_page_and_the_page_after_leaving_link_to_withdrawal(client, short_tide, steps):
    tide = short_tide
    steps.start(client, tide, PID)
    while True:
        response, spec = steps.page(client, tide)
        if spec.kind not in {"block", "check"}:
            break
        client.post(f"/s/{tide.slug}/page/", steps.answers(spec))
    assert "Withdraw and delete my answers" in client.get(f"/s/{tide.slug}/about-you/").content.decode()
    client.post(f"/s/{tide.slug}/exit/")
    assert "Withdraw and delete my answers" in client.get(f"/s/{tide.slug}/left/").content.decode()


def test_the_link_and_pages_speak_the_study_language(client, steps):
    study = load_fixture("counselor_zh.json")
    steps.start(client, study)
    page = client.get(f"/s/{study.slug}/page/").content.decode()
    assert "撤回参与并删除我的回答" in page and "Withdraw and delete my answers" not in page
    confirm = client.get(f"/s/{study.slug}/withdraw/")
    assert confirm["Content-Language"] == "zh-hans"
    assert "您要撤回参与并删除您的回答吗？" in confirm.content.decode()
    done = client.post(f"/s/{study.slug}/withdraw/", follow=True).content.decode()
    assert "您的回答已被删除" in done


def test_withdrawing_deletes_answers_drafts_free_text_and_demographics_and_keeps_a_tombstone(client, tide, steps):
    participant = steps.start(client, tide, PID)
    steps.submit_current(client, tide)
    _draft_on_current_page(client, tide, steps)
    services.participant_demographics_submit(participant_id=participant.pk, answers={"age": "30"}, free_text={})
    before = _rows_of(participant.pk)
    assert before["visits"] and before["ratings"] and before["drafts"]
    assert client.get(f"/s/{tide.slug}/withdraw/").status_code == 200
    with announced() as heard:
        response = client.post(f"/s/{tide.slug}/withdraw/")
    assert response.status_code == 303 and response["Location"] == f"/s/{tide.slug}/withdrawn/"
    assert set(_rows_of(participant.pk).values()) == {0}
    tombstone = Withdrawal.objects.get(study=tide)
    assert (tombstone.pseudonym, tombstone.channel, tombstone.status_before) == (
        participant.pseudonym, "participant", "in_progress")
    assert PID not in str(Withdrawal.objects.values_list())  # no panel id kept
    assert [(h["action"], h["actor"], h["study"], h["object"]) for h in heard] == [
        ("participant.withdraw", None, tide, participant.pseudonym)]
    page = client.get(response["Location"]).content.decode()
    assert "Your answers have been deleted" in page and "return your submission on Prolific" in page


def test_free_text_answers_are_deleted(client, most_least):
    fill_with_bots(most_least, 6)
    written = FreeTextAnswer.objects.values_list("participant_id", flat=True).first()
    assert written is not None
    total, theirs = FreeTextAnswer.objects.count(), FreeTextAnswer.objects.filter(participant_id=written).count()
    other = Participant.objects.exclude(pk=written).first()
    FreeTextAnswer.objects.create(participant=other, question=most_least.free_text_questions.first(), text="kept")
    withdrawal.participant_withdraw(participant_id=written, channel="participant")
    assert set(_rows_of(written).values()) == {0}
    assert FreeTextAnswer.objects.count() == total + 1 - theirs  # the others' answers stay


def test_the_same_panel_id_cannot_take_part_again(client, tide, steps):
    steps.start(client, tide, PID)
    client.post(f"/s/{tide.slug}/withdraw/")
    again = Client()
    response = again.get(steps.link(tide, PID))
    assert response.status_code == 303 and response["Location"] == f"/s/{tide.slug}/withdrawn/"
    with pytest.raises(services.StudyClosed):
        services.participant_enroll(study=tide, external_id=PID)
    assert not Participant.objects.filter(study=tide).exists()


# --- attacks (also on PostgreSQL) -----------------------------------------------------------------------


def test_a_forged_post_without_the_csrf_token_is_refused_and_changes_nothing(tide, steps):
    browser = Client(enforce_csrf_checks=True)
    steps.start(Client(), tide, OTHER_PID)
    browser.get(steps.link(tide, PID))
    # The consent and instructions forms carry their token; the test posts it as a page would.
    token = browser.get(f"/s/{tide.slug}/consent/").cookies["csrftoken"].value
    browser.post(f"/s/{tide.slug}/consent/", {"decision": "accept", "csrfmiddlewaretoken": token})
    before = _everything()
    forged = browser.post(f"/s/{tide.slug}/withdraw/")  # a cross-site form has no token
    assert forged.status_code == 403
    assert _everything() == before
    ok = browser.post(f"/s/{tide.slug}/withdraw/", {"csrfmiddlewaretoken": token})
    assert ok.status_code == 303 and Withdrawal.objects.count() == 1


def test_a_post_from_another_session_withdraws_only_that_sessions_participant(tide, steps):
    victim_browser, attacker_browser = Client(), Client()
    victim = steps.start(victim_browser, tide, PID)
    steps.submit_current(victim_browser, tide)
    attacker = steps.start(attacker_browser, tide, OTHER_PID)
    victim_rows = _rows_of(victim.pk)
    # Naming the victim in the form changes nothing: only the session says who withdraws.
    attacker_browser.post(f"/s/{tide.slug}/withdraw/", {"participant": victim.pk, "participant_id": victim.pk,
                                                        "pseudonym": victim.pseudonym})
    assert _rows_of(victim.pk) == victim_rows
    assert list(Withdrawal.objects.values_list("pseudonym", flat=True)) == [attacker.pseudonym]


def test_a_post_without_a_survey_session_changes_nothing(tide, steps):
    steps.start(Client(), tide, PID)
    before = _everything()
    response = Client().post(f"/s/{tide.slug}/withdraw/")
    assert response.status_code == 200 and "session" in response.content.decode().lower()
    assert _everything() == before


def test_withdrawing_twice_or_replaying_the_post_is_harmless(tide, steps):
    browser = Client()
    steps.start(browser, tide, PID)
    others = Client()
    steps.start(others, tide, OTHER_PID)
    with announced() as heard:
        first = browser.post(f"/s/{tide.slug}/withdraw/")
        before = _everything()
        replayed = browser.post(f"/s/{tide.slug}/withdraw/")
    assert first.status_code == replayed.status_code == 303
    assert replayed["Location"] == f"/s/{tide.slug}/withdrawn/"
    assert _everything() == before and Withdrawal.objects.count() == 1
    assert len(heard) == 1
    # The service itself is idempotent too (a double click racing the redirect).
    gone = Participant.objects.filter(study=tide).values_list("pk", flat=True)
    assert withdrawal.participant_withdraw(participant_id=10 ** 9, channel="participant") is None
    assert Participant.objects.filter(study=tide).count() == len(gone) == 1


def test_a_preview_has_nothing_to_withdraw(study, owner_client):
    owner_client.get(f"/s/{study.slug}/preview/", follow=True)
    before = _everything()
    response = owner_client.post(f"/s/{study.slug}/withdraw/")
    assert response.status_code in (200, 303)
    assert _everything() == before


# --- places, allocation, runs and exports ---------------------------------------------------------------


def test_the_blocks_of_a_withdrawn_participant_go_back_to_the_pool():
    from tests.test_allocation import _enrol, _live_counts, _load

    study = _load(n_prompts=6, allocation={"blocks_per_participant": 3, "judgements_per_block": 1})  # target 2
    first, second = _enrol(study, 2)
    first_blocks = set(BlockAssignment.objects.filter(participant=first).values_list("block_id", flat=True))
    assert allocation.allocation_full(study=study)
    withdrawal.participant_withdraw(participant_id=first.pk, channel="participant")
    tallies = dict(BlockTally.objects.filter(study=study).values_list("block_id", "allocated"))
    assert {tallies[b] for b in first_blocks} == {0}
    (third,) = _enrol(study, 1, start=2)
    assert set(BlockAssignment.objects.filter(participant=third).values_list("block_id", flat=True)) == first_blocks
    assert set(_live_counts(study).values()) == {1}


def test_a_finisher_who_withdraws_frees_their_place(tide, steps):
    tide.target_completions = 1
    tide.save()
    browser = Client()
    steps.start(browser, tide, PID)
    steps.finish(browser, tide)
    assert services.study_full(study=tide)
    browser.post(f"/s/{tide.slug}/withdraw/")
    assert not services.study_full(study=tide)
    assert Withdrawal.objects.get().status_before == "completed"


def test_runs_and_exports_leave_out_the_withdrawn_and_the_next_run_says_how_many(small_run, owner_client):
    study = small_run.study
    leaving = list(Participant.objects.filter(study=study, status="completed")[:2])
    for person in leaving:
        withdrawal.participant_withdraw(participant_id=person.pk, channel="participant")
    gone = {p.pseudonym for p in leaving}
    # The earlier run's exports no longer carry them either (their results went with them).
    old = csv_rows(owner_client.get(f"/studies/{study.slug}/exports/participants.csv"))
    assert not gone & {row[0] for row in old[1:]}
    run = finished_run(study)
    assert run.n_participants == Participant.objects.filter(study=study, is_preview=False).count()
    note = ResultTable.objects.get(run=run, name="filter_flow").note
    assert "2 participants withdrew" in note
    for name in ("participants", "ratings", "identifiers"):
        rows = csv_rows(owner_client.get(f"/studies/{study.slug}/exports/{name}.csv?confirm=1"))
        assert not gone & {row[0] for row in rows[1:]}, name
    earlier_note = ResultTable.objects.get(run=small_run, name="filter_flow").note
    assert "withdrew" not in earlier_note


# --- researchers: the page and the command --------------------------------------------------------------


@pytest.fixture(scope="module")
def _shared_rows_few(django_db_setup, django_db_blocker):
    """TIDE with three scripted participants, built once for the module's tests that delete some (each runs
    in a savepoint of it, tests/support/shared.py; conftest's collection hook runs them after the others)."""
    with rows_kept_until_exit(django_db_blocker), in_process_tasks():
        study = load_fixture("tide.json")
        fill_with_bots(study, 3)
        yield study.pk


@pytest.fixture
def few(_shared_rows_few, owner):
    """TIDE (owned by ``owner``) with three scripted participants: enough to delete some."""
    study = Study.objects.get(pk=_shared_rows_few)
    study.owners.add(owner)
    return study


def test_the_owner_deletes_a_participant_by_panel_id_after_confirming(few, owner_client, owner):
    person = Participant.objects.filter(study=few).first()
    page = f"/studies/{few.slug}/participants/delete/"
    assert owner_client.get(page).status_code == 200
    asked = owner_client.post(page, {"participant": person.external_id})
    assert asked.status_code == 200 and person.pseudonym in asked.content.decode()
    assert Participant.objects.filter(pk=person.pk).exists()  # not before the confirmation
    with announced() as heard:
        done = owner_client.post(page, {"participant": person.external_id, "confirm": "yes"}, follow=True)
    assert not Participant.objects.filter(pk=person.pk).exists()
    assert person.pseudonym in done.content.decode()
    assert Withdrawal.objects.get().channel == "researcher"
    assert [(h["action"], h["actor"], h["object"], h["address"]) for h in heard] == [
        ("participant.delete", owner, person.pseudonym, "127.0.0.1")]


def test_an_unknown_id_is_refused_with_a_message_and_nothing_changes(few, owner_client):
    before = _everything()
    response = owner_client.post(f"/studies/{few.slug}/participants/delete/",
                                 {"participant": "<script>x</script>", "confirm": "yes"})
    assert response.status_code == 400 and "has no participant" in response.content.decode()
    assert "<script>x" not in response.content.decode()
    assert owner_client.post(f"/studies/{few.slug}/participants/delete/", {"participant": " "}).status_code == 400
    assert _everything() == before


def test_another_researcher_cannot_delete(few, client, other):
    person = Participant.objects.filter(study=few).first()
    client.force_login(other)
    response = client.post(f"/studies/{few.slug}/participants/delete/",
                           {"participant": person.pseudonym, "confirm": "yes"})
    assert response.status_code == 404
    assert Participant.objects.filter(pk=person.pk).exists()


def test_the_command_deletes_by_pseudonym_or_panel_id(few, capsys):
    first, second = Participant.objects.filter(study=few)[:2]
    with announced() as heard:
        call_command("delete_participant", "--study", few.slug, "--participant", first.pseudonym)
        call_command("delete_participant", "--study", few.slug, "--participant", second.external_id)
    assert not Participant.objects.filter(pk__in=[first.pk, second.pk]).exists()
    assert list(Withdrawal.objects.values_list("channel", flat=True)) == ["command", "command"]
    assert [(h["action"], h["actor"]) for h in heard] == [("participant.delete", None)] * 2
    assert first.pseudonym in capsys.readouterr().out
    with pytest.raises(CommandError, match="has no participant"):
        call_command("delete_participant", "--study", few.slug, "--participant", first.pseudonym)
    with pytest.raises(CommandError, match="no study"):
        call_command("delete_participant", "--study", "nope", "--participant", "x")
