"""The pairwise preference block as a participant meets it: two responses, which is better (left, right,
tie, both bad) and an optional reason; what is saved, what is refused, and the bots that answer it."""

from __future__ import annotations

import dataclasses
import re
from collections import Counter

import pytest
from django.db import IntegrityError, transaction

from bots.drive import run_in_process, run_with_services
from bots.personas import persona_named
from surveys import services
from surveys.definition import DefinitionError, parse_definition, read_definition_file
from surveys.models import BlockVisit, FreeTextAnswer, ItemPlacement, Participant, Rating
from surveys.questions import QUESTION_TYPES
from tests.support.paths import ROOT
from tests.test_flow_pages import _state

PID = "b" * 24
FIXTURE = ROOT / "fixtures" / "pairwise.json"


def _html(response) -> str:
    return response.content.decode()


def _preference_options(html: str) -> list[tuple[str, str]]:
    """(value, label) of the preference radio buttons, in page order."""
    return re.findall(r'<input type="radio" id="id-preference-\w+" name="preference" value="(\w+)"[^>]*> '
                      r'<span>([^<]+)</span>', html)


def test_it_shows_two_responses_side_by_side_and_asks_which_is_better(client, pairwise, steps):
    steps.start(client, pairwise, PID)
    response, spec = steps.page(client, pairwise)
    html = _html(response)
    assert spec.kind == "block" and "pairwise" in spec.by_type and len(spec.placements) == 2
    assert 'class="responses side-by-side"' in html
    assert "<legend>Which response is more empathetic?</legend>" in html
    assert _preference_options(html) == [
        ("left", "Response 1 is better"), ("right", "Response 2 is better"),
        ("tie", "Tie: both are about as good"), ("both_bad", "Both are bad"),
    ]
    assert 'name="text-reason"' in html  # the optional reason
    # Nothing of the other types: no scale, no ranking, no most/least.
    assert not re.search(r'name="(rate-|rank-|most|least)', html)


@pytest.mark.parametrize("choice", ["left", "right", "tie", "both_bad"])
def test_it_saves_the_preference_and_the_reason_on_the_block(client, pairwise, steps, choice):
    participant = steps.start(client, pairwise, PID)
    _, spec = steps.page(client, pairwise)
    response = client.post(f"/s/{pairwise.slug}/page/",
                           {"visit": spec.visit_id, "preference": choice, "text-reason": "Warmer wording."})
    assert response.status_code == 303
    visit = BlockVisit.objects.get(pk=spec.visit_id)
    assert visit.preference == choice and visit.submitted_at is not None
    assert FreeTextAnswer.objects.get(participant=participant).text == "Warmer wording."
    # The left response is the one shown first.
    assert list(ItemPlacement.objects.filter(visit=visit).order_by("position").values_list("pk", flat=True)) == \
        spec.placements
    assert Rating.objects.count() == 0


def test_the_reason_is_optional(client, pairwise, steps):
    steps.start(client, pairwise, PID)
    _, spec = steps.page(client, pairwise)
    client.post(f"/s/{pairwise.slug}/page/", {"visit": spec.visit_id, "preference": "tie"})
    assert BlockVisit.objects.get(pk=spec.visit_id).preference == "tie"
    assert FreeTextAnswer.objects.count() == 0


@pytest.mark.parametrize("posted, message", [
    ({}, "Please say which response is more empathetic, or choose Tie or Both are bad."),
    ({"preference": "middle"}, "Please choose one of the answers offered."),
    ({"preference": "left", "text-reason": "x" * 501}, "Please keep your answer to 500 characters (it has 501)."),
])
def test_a_missing_or_bad_answer_is_refused_with_a_clear_message_and_changes_nothing(
        client, pairwise, steps, posted, message):
    steps.start(client, pairwise, PID)
    _, spec = steps.page(client, pairwise)
    before = _state() + (list(BlockVisit.objects.values_list("preference", flat=True)),)
    response = client.post(f"/s/{pairwise.slug}/page/", {"visit": spec.visit_id, **posted})
    assert response.status_code == 400
    html = _html(response)
    assert 'class="error-summary"' in html and message in html
    assert _state() + (list(BlockVisit.objects.values_list("preference", flat=True)),) == before


def test_a_preference_posted_to_a_study_that_does_not_ask_it_is_tampering(client, tide, steps):
    steps.start(client, tide, PID)
    _, spec = steps.page(client, tide)
    before = _state()
    response = client.post(f"/s/{tide.slug}/page/", {**steps.answers(spec), "preference": "left"})
    assert response.status_code == 400
    assert "Some answers do not belong to this page." in _html(response)
    assert _state() == before


def test_the_service_refuses_answers_that_do_not_fit_a_pairwise_page(client, pairwise, tide, steps):
    participant = steps.start(client, pairwise, PID)
    _, spec = steps.page(client, pairwise)
    before = _state()
    for answers in (services.PageAnswers(), services.PageAnswers(by_type={"pairwise": "middle"}),
                    services.PageAnswers(by_type={"pairwise": "left",
                                                  "ranking": {spec.placements[0]: 1, spec.placements[1]: 2}})):
        with pytest.raises(services.AnswersRejected):
            services.block_answer_submit(participant_id=participant.pk, visit_id=spec.visit_id, answers=answers)
        assert _state() == before
    # ... and a preference on a page that does not ask one.
    other = steps.start(client, tide, "c" * 24)
    _, tide_spec = steps.page(client, tide)
    dimensions = list(tide.dimensions.values_list("pk", flat=True))
    valid = services.PageAnswers(by_type={
        "rating": {(pid, did): 3 for pid in tide_spec.placements for did in dimensions},
        "ranking": {pid: rank for rank, pid in enumerate(tide_spec.placements, start=1)},
    })
    with pytest.raises(services.AnswersRejected, match="this page does not ask pairwise questions"):
        services.block_answer_submit(participant_id=other.pk, visit_id=tide_spec.visit_id,
                                     answers=dataclasses.replace(valid, by_type={**valid.by_type, "pairwise": "left"}))
    assert services.block_answer_submit(participant_id=other.pk, visit_id=tide_spec.visit_id, answers=valid) == \
        services.SubmitOutcome.SAVED


def test_the_database_keeps_preferences_to_submitted_blocks_and_known_answers(client, pairwise, steps):
    steps.start(client, pairwise, PID)
    _, spec = steps.page(client, pairwise)
    with pytest.raises(IntegrityError), transaction.atomic():
        BlockVisit.objects.filter(pk=spec.visit_id).update(preference="left")  # not submitted yet
    client.post(f"/s/{pairwise.slug}/page/", {"visit": spec.visit_id, "preference": "right"})
    with pytest.raises(IntegrityError), transaction.atomic():
        BlockVisit.objects.filter(pk=spec.visit_id).update(preference="middle")
    assert BlockVisit.objects.get(pk=spec.visit_id).preference == "right"


def test_an_unsubmitted_preference_survives_a_reload_as_a_draft(client, pairwise, steps):
    steps.start(client, pairwise, PID)
    _, spec = steps.page(client, pairwise)
    saved = client.post(f"/s/{pairwise.slug}/page/draft/", {"visit": spec.visit_id, "preference": "both_bad"})
    assert saved.status_code == 204, saved.content
    html = _html(client.get(f"/s/{pairwise.slug}/page/"))
    assert re.search(r'value="both_bad" checked', html)
    assert BlockVisit.objects.get(pk=spec.visit_id).preference == ""  # a draft is not an answer


def test_every_persona_completes_the_pairwise_study_through_the_pages_and_the_services(client, pairwise):
    runs = [run_in_process(persona=persona_named(name), study=pairwise, seed=k)
            for k, name in enumerate(["honest", "speeder", "straight_liner", "random"])]
    runs += [run_with_services(persona=persona_named("honest"), study=pairwise, seed=11)]
    assert [run.outcome for run in runs] == ["completed"] * len(runs)
    answered = BlockVisit.objects.filter(block__isnull=False, submitted_at__isnull=False)
    assert answered.count() == 5 * 24
    assert set(answered.values_list("preference", flat=True)) <= {"left", "right", "tie", "both_bad"}
    # The straight-liner always picks the response shown first.
    straight = Participant.objects.get(external_id=runs[2].external_id)
    assert set(answered.filter(participant=straight).values_list("preference", flat=True)) == {"left"}
    # Honest raters prefer the better condition (the design's reference over its baseline) most of the time.
    honest = Participant.objects.get(external_id=runs[4].external_id)
    picks = Counter()
    for visit in answered.filter(participant=honest).prefetch_related("placements__item__condition"):
        left, right = sorted(visit.placements.all(), key=lambda p: p.position)
        winner = {"left": left, "right": right}.get(visit.preference)
        if winner is not None:
            picks[winner.item.condition.name] += 1
    assert picks["reference"] > picks["zero-shot"]


# --- the definition -------------------------------------------------------------------------


def _definition(**changes) -> dict:
    return {**read_definition_file(FIXTURE), **changes}


def test_a_pairwise_block_of_three_responses_is_accepted_and_shows_two_of_them():
    """Pairs drawn among a block's responses (surveys.allocation; tests/test_allocation.py draws them)."""
    data = _definition()
    data["blocks"] = [dict(data["blocks"][0], responses=data["blocks"][0]["responses"][:1] * 1
                           + [dict(r, id=f"{r['id']}-x", option=9 + k) for k, r in enumerate(data["blocks"][1]["responses"])])]
    assert len(parse_definition(data).blocks[0].responses) == 3


@pytest.mark.parametrize("mode", ["ranking", "best_worst"])
def test_pairwise_does_not_combine_with_another_way_of_choosing(mode):
    with pytest.raises(DefinitionError, match=f"{mode}: a pairwise study already asks which"):
        parse_definition(_definition(**{mode: True}))


def test_pairwise_combines_with_ratings(client, steps, db):
    """Rate both responses and say which is better: one page, both saved."""
    from surveys.loader import study_load

    data = _definition(slug="rate-and-prefer", dimensions=[{"key": "warmth", "label": "Warmth", "min": 1, "max": 5}])
    study = study_load(definition=parse_definition(data)).study
    steps.start(client, study, PID)
    _, spec = steps.page(client, study)
    assert "pairwise" in spec.by_type and set(spec.by_type.get("rating", {})) == {"warmth"}
    client.post(f"/s/{study.slug}/page/", {**steps.answers(spec), "preference": "right"})
    assert BlockVisit.objects.get(pk=spec.visit_id).preference == "right"
    assert Rating.objects.filter(placement__visit_id=spec.visit_id).count() == 2


def test_every_question_type_is_registered_once_with_its_own_fields():
    keys = [kind.key for kind in QUESTION_TYPES]
    assert keys == ["rating", "ranking", "best_worst", "pairwise", "free_text"]
    assert len(set(keys)) == len(keys)
    # Each type with controls below the cards renders them with its own partial.
    templates = [kind.template for kind in QUESTION_TYPES if kind.template]
    assert len(set(templates)) == len(templates)
    for template in templates:
        assert (ROOT / "templates" / template).is_file(), template
    # The exports a type brings are exports the analysis side knows.
    from analysis.exporting.exports import EXPORTS

    assert {name for kind in QUESTION_TYPES for name in kind.exports} <= set(EXPORTS)


@pytest.mark.django_db  # the study fixtures need the test database, also when this test runs alone
@pytest.mark.parametrize("fixture, answers", [
    ("tide", []), ("counselor", []), ("most_least", ["choices", "free-text"]),
    ("pairwise", ["pairwise", "free-text"]),
])
def test_a_study_lists_the_answer_exports_of_the_types_it_asks(request, fixture, answers):
    from surveys.questions import answer_exports

    study = request.getfixturevalue(fixture)
    assert [name for name in answer_exports(study) if name != "ratings"] == answers
