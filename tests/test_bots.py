"""Scripted participants drive the real views; what they submitted is what was stored."""

import random
import statistics

import pytest
from django.core.management import call_command

from bots.drive import BotRun, run_in_process, run_over_http
from bots.personas import PERSONAS, EarlyExit, Persona, persona_mix, persona_named
from surveys.models import BlockVisit, FreeTextAnswer, ItemPlacement, Participant, RaterLink, Rating
from tests.support.studies import load_fixture


def reconcile(run: BotRun) -> Participant:
    """Every acknowledged page of the run is in the database exactly as submitted."""
    participant = Participant.objects.get(external_id=run.external_id)
    for submission, ack in zip(run.submitted, run.acknowledged):
        assert ack.status == 303, (submission, ack)
        if submission.kind == "block":
            for placement in ItemPlacement.objects.filter(visit_id=submission.visit_id).prefetch_related("ratings__dimension"):
                for rating in placement.ratings.all():
                    assert str(rating.value) == submission.fields[f"rate-{placement.pk}-{rating.dimension.key}"]
                if f"rank-{placement.pk}" in submission.fields:
                    assert str(placement.rank) == submission.fields[f"rank-{placement.pk}"]
        elif submission.kind == "check":
            visit = BlockVisit.objects.get(pk=submission.visit_id)
            assert str(visit.attention_value) == submission.fields["attention"]
        elif submission.kind == "demographics":
            for key, value in submission.fields.items():
                if not key.startswith("text-"):
                    assert participant.demographics.get(key, "") == value
    submitted_pages = [s for s in run.submitted if s.kind in {"block", "check"}]
    assert participant.visits.filter(submitted_at__isnull=False).count() == len(submitted_pages)
    return participant


def _block_seconds(participant):
    return [
        (v.submitted_at - v.shown_at).total_seconds()
        for v in participant.visits.filter(block__isnull=False, submitted_at__isnull=False)
    ]


def test_an_honest_bot_completes_tide_in_realistic_time_with_ratings_that_follow_quality(tide):
    run = run_in_process(persona=Persona(), study=tide, seed=7)
    assert run.outcome == "completed" and run.completion_code == "C1TIDE7Q"
    participant = reconcile(run)
    minutes = (participant.finished_at - participant.started_at).total_seconds() / 60
    assert 10 <= minutes <= 75
    assert all(20 <= s <= 120 for s in _block_seconds(participant))
    by_condition = {}
    for value, condition in Rating.objects.values_list("value", "placement__item__condition__name"):
        by_condition.setdefault(condition, []).append(value)
    assert statistics.mean(by_condition["reference"]) > statistics.mean(by_condition["zero-shot"]) + 0.5
    assert all(v.attention_passed for v in participant.visits.filter(attention_check__isnull=False))
    # Ranks agree with ratings: a higher-rated response never gets a worse rank.
    for visit in participant.visits.filter(block__isnull=False):
        pairs = [(p.rank, p.ratings.get().value) for p in visit.placements.all()]
        ordered = [value for _, value in sorted(pairs)]
        assert ordered == sorted(ordered, reverse=True)


@pytest.mark.parametrize("name", ["speeder", "straight_liner", "attention_failer", "random"])
def test_each_persona_completes_through_the_real_views(tide, name):
    run = run_in_process(persona=persona_named(name), study=tide, seed=11)
    assert run.outcome == "completed"
    participant = reconcile(run)
    checks = list(participant.visits.filter(attention_check__isnull=False))
    if name == "speeder":
        assert all(3 <= s <= 8 for s in _block_seconds(participant))
    if name == "straight_liner":
        assert set(Rating.objects.values_list("value", flat=True)) == {3}
    if name == "attention_failer":
        assert [v.attention_passed for v in checks] == [False, False]


def test_an_early_exit_bot_leaves_half_way(tide):
    run = run_in_process(persona=EarlyExit(), study=tide, seed=3)
    assert run.outcome == "exited"
    participant = reconcile(run)
    assert participant.status == "exited" and participant.finished_at is None
    assert 10 <= participant.visits.filter(submitted_at__isnull=False).count() <= 14


def test_a_best_worst_bot_answers_free_text_within_limits(most_least):
    run = run_in_process(persona=Persona(), study=most_least, seed=5)
    assert run.outcome == "completed"
    assert run.external_id.startswith("open-")  # it came in by the study's open link
    reconcile(run)
    # The study's one "why" question is asked at the end, once.
    assert FreeTextAnswer.objects.count() <= 1
    assert all(0 < len(answer.text) <= 2000 for answer in FreeTextAnswer.objects.all())
    assert ItemPlacement.objects.filter(choice="best").count() == most_least.blocks.count()


def test_the_persona_mix_is_mostly_honest_with_some_of_each():
    names = [p.name for p in persona_mix(150, random.Random(1))]
    assert len(names) == 150
    assert names.count("honest") >= 90
    assert set(names) == set(PERSONAS)


def test_an_in_process_bot_comes_in_by_its_own_invited_rater_link(counselor):
    run = run_in_process(persona=Persona(), study=counselor, seed=3)
    assert run.outcome == "completed" and run.completion_code == ""  # an invited rater has no code
    link = RaterLink.objects.get(study=counselor)
    assert link.name == "Simulated rater 1" and link.external_id == run.external_id
    reconcile(run)


def test_bots_on_an_open_link_each_come_from_their_own_address(most_least, settings):
    """The open link allows an address few new starts: simulate_participants gives each bot its own."""
    settings.OPEN_LINK_STARTS_PER_HOUR = 2
    call_command("simulate_participants", study="most-least", n=4, seed=2)
    participants = Participant.objects.filter(study=most_least)
    assert participants.count() == 4 and participants.filter(status="completed").count() == 4
    assert all(pid.startswith("open-") for pid in participants.values_list("external_id", flat=True))


def test_the_http_driver_runs_a_bot_against_a_live_server(live_server, db):
    # Over HTTP a bot enters by a panel link (the surge benchmark's Prolific study).
    load_fixture("counselor.json", recruitment={"completion_code": "C0UNSEL1"})
    run = run_over_http(persona=Persona(), base_url=live_server.url, slug="counselor", seed=2)
    assert run.outcome == "completed" and run.completion_code == "C0UNSEL1"
    reconcile(run)
    assert Participant.objects.get().status == "completed"


@pytest.mark.slow(reason="a simulation: simulate_participants fills every group of a study, twice")
def test_simulate_participants_fills_a_study_with_every_group_and_is_idempotent(counselor, capsys):
    call_command("simulate_participants", study="counselor", n=40, seed=4)
    participants = Participant.objects.filter(study=counselor)
    assert participants.count() == 40
    assert participants.filter(status="completed").count() >= 30
    assert participants.filter(status="exited").exists()
    answers = [p.demographics for p in participants]
    # The counselor panel's own questions: a role (choice) and years of experience (number, 0-60).
    assert len({a.get("role", "") for a in answers}) >= 4
    years = [int(a["experience_years"]) for a in answers if a.get("experience_years")]
    assert len(years) >= 30 and all(0 <= y <= 60 for y in years) and len(set(years)) >= 10
    assert set(a for answer in answers for a in answer) <= {"role", "experience_years"}
    call_command("simulate_participants", study="counselor", n=40, seed=4)
    assert participants.count() == 40
    assert "nothing to add" in capsys.readouterr().out


def test_every_registered_question_type_has_its_bot_and_one_without_is_named(monkeypatch):
    from bots import question_bots
    from surveys import questions
    from surveys.questions import QUESTION_TYPES, QuestionType

    assert question_bots.question_bots() == [question_bots.BOTS[t.key] for t in QUESTION_TYPES]

    class Slider(QuestionType):
        key = "slider"

    monkeypatch.setattr(question_bots, "QUESTION_TYPES", (*questions.QUESTION_TYPES, Slider()))
    with pytest.raises(LookupError, match="slider"):
        question_bots.question_bots()
