"""Two submissions of the same page at the same moment store one set of answers.

The participant row is locked (SELECT ... FOR UPDATE on PostgreSQL; SQLite's
IMMEDIATE transactions serialise writers), and the page is saved only while it
is still unsubmitted. Runs on both databases; PostgreSQL is the one that matters.
"""

import pytest
from django.test import Client

from surveys import drafts, selectors, services
from surveys.models import BlockVisit, Draft, ItemPlacement, Participant, Rating
from tests.support.threads import in_threads

PID = "c" * 24


@pytest.mark.slow(reason="concurrent requests on a transactional database")
def test_two_concurrent_service_calls_store_one_set_of_answers(transactional_db, tide):
    participant = services.participant_enroll(study=tide, external_id=PID, seed=1)
    services.participant_instructions_confirm(participant_id=participant.pk)
    visit = participant.visits.filter(block__isnull=False).order_by("sequence").first()
    if visit.sequence != 1:
        pytest.fail("the first page is always a block")
    services.visit_mark_shown(visit_id=visit.pk)
    placements = list(ItemPlacement.objects.filter(visit=visit).order_by("position"))
    dimension = tide.dimensions.get()

    def answers(i):
        return services.PageAnswers(by_type={
            "rating": {(p.pk, dimension.pk): 1 + i for p in placements},
            "ranking": {p.pk: (k + i) % 5 + 1 for k, p in enumerate(placements)},
        })

    outcomes = in_threads(2, lambda i: services.block_answer_submit(
        participant_id=participant.pk, visit_id=visit.pk, answers=answers(i)))
    assert sorted(outcomes) == [services.SubmitOutcome.ALREADY_SAVED, services.SubmitOutcome.SAVED]
    winner = outcomes.index(services.SubmitOutcome.SAVED)
    assert set(Rating.objects.values_list("value", flat=True)) == {1 + winner}
    assert Rating.objects.count() == 5
    assert BlockVisit.objects.filter(submitted_at__isnull=False).count() == 1


@pytest.mark.slow(reason="concurrent requests on a transactional database")
def test_two_concurrent_posts_from_one_session_store_one_set_of_answers(transactional_db, tide, steps):
    client = Client()
    steps.start(client, tide, PID)
    _, spec = steps.page(client, tide)
    cookies = client.cookies

    def post(i):
        twin = Client()
        twin.cookies = cookies
        data = steps.answers(spec, rating=2 + i)
        return twin.post("/s/tide/page/", data).status_code

    statuses = in_threads(2, post)
    assert statuses == [303, 303]  # the loser is sent on to the next page
    assert Rating.objects.count() == 5
    assert len(set(Rating.objects.values_list("value", flat=True))) == 1
    assert Participant.objects.get().visits.filter(submitted_at__isnull=False).count() == 1


@pytest.mark.slow(reason="concurrent requests on a transactional database")
def test_a_draft_racing_its_pages_submit_never_outlives_it(transactional_db, tide):
    """The draft takes the submit's lock: it is written before the submit (which deletes it) or
    refused after it, never left behind for a submitted page."""
    participant = services.participant_enroll(study=tide, external_id=PID, seed=1)
    services.participant_instructions_confirm(participant_id=participant.pk)
    for _ in range(6):
        state = selectors.participant_state(participant=participant)
        page = selectors.visit_page_get(visit_id=state.current_visit_id, study=tide)
        if page.is_check:
            answers = services.PageAnswers(attention_value=page.visit.attention_check.expected_value)
        else:
            answers = services.PageAnswers(by_type={
                "rating": {(p.pk, d.pk): 3 for p in page.placements for d in page.dimensions},
                "ranking": {p.pk: p.position for p in page.placements},
            })
        services.visit_mark_shown(visit_id=page.visit.pk)
        work = (
            lambda: drafts.draft_save(participant_id=participant.pk, visit_id=page.visit.pk, fields={"a": "1"}),
            lambda: services.block_answer_submit(
                participant_id=participant.pk, visit_id=page.visit.pk, answers=answers
            ),
        )
        _, outcome = in_threads(2, lambda i: work[i]())
        assert outcome == services.SubmitOutcome.SAVED
        assert not Draft.objects.exists()
    assert BlockVisit.objects.filter(submitted_at__isnull=False).count() == 6
