"""Every database constraint rejects a bad row; a new constraint without a
test here fails ``test_every_constraint_has_a_test``."""

from datetime import timedelta

import pytest
from django.apps import apps
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from analysis.models import (
    AnalysisRun, EmbeddingCache, GoldScore, MetricsRun, MetricsTable, ParticipantResult, ResultTable,
)
from surveys.models import (
    AttentionCheck, Block, BlockAssignment, BlockTally, BlockVisit, Condition, ConsentDecline, DemographicQuestion, Dimension, Draft, FreeTextAnswer,
    FreeTextQuestion, Item, ItemPlacement, PairTally, Participant, RaterLink, Rating, Scenario, Study, StudyMembership,
    System, TurnAway, TypedAnswer, Withdrawal,
)

NOW = timezone.now()


def _participant(study, n=1, **extra):
    return Participant.objects.create(study=study, external_id=f"{n:024x}", pseudonym=f"p{n}", **extra)


def _visit(study, **extra):
    participant = _participant(study, 99)
    defaults = {"participant": participant, "sequence": 1, "block": study.blocks.first()}
    return BlockVisit.objects.create(**{**defaults, **extra})


def _placement(study, **extra):
    visit = _visit(study, shown_at=NOW)
    items = list(study.blocks.first().items.all())
    ItemPlacement.objects.create(visit=visit, item=items[0], position=1, rank=1, choice="best")
    defaults = {"visit": visit, "item": items[1], "position": 2}
    return ItemPlacement.objects.create(**{**defaults, **extra})


def _withdrawal(study, **extra):
    defaults = {"study": study, "pseudonym": "gone", "withdrawn_at": NOW, "channel": "participant",
                "status_before": "completed"}
    return Withdrawal.objects.create(**{**defaults, **extra})


def _membership(study, **extra):
    from django.contrib.auth import get_user_model

    user = get_user_model().objects.get_or_create(username="member")[0]
    return StudyMembership.objects.create(**{"study": study, "user": user, "role": "viewer", **extra})


def _study_copy(study, **changes):
    fields = {f.name: getattr(study, f.name) for f in Study._meta.concrete_fields if f.name not in {"id", "slug"}}
    return Study.objects.create(slug="bad", **{**fields, **changes})


BAD_ROWS = {
    "study_duration_window_valid": lambda s: _study_copy(s, duration_min_minutes=80, duration_max_minutes=75),
    "study_fast_share_is_fraction": lambda s: _study_copy(s, fast_share_max=1.2),
    "study_fast_seconds_nonnegative": lambda s: _study_copy(s, fast_block_seconds=-1),
    "study_sd_threshold_nonnegative": lambda s: _study_copy(s, straightline_sd_max=-0.1),
    "study_mae_threshold_nonnegative": lambda s: _study_copy(s, straightline_mae_min=-0.1),
    "study_panel_has_completion_code": lambda s: _study_copy(s, completion_code=""),
    "study_recruitment_mode_known": lambda s: _study_copy(s, recruitment_mode="mail"),
    "study_target_positive": lambda s: _study_copy(s, target_completions=0),
    "study_hold_times_positive": lambda s: _study_copy(s, hold_minutes=0),
    "study_draft_not_open": lambda s: _study_copy(s, launched_at=None, is_open=True),
    "system_unique_name": lambda s: System.objects.create(study=s, name=s.systems.first().name),
    "condition_unique_name": lambda s: Condition.objects.create(study=s, name="reference"),
    "scenario_unique_key": lambda s: Scenario.objects.create(study=s, key="S1", user_input="x"),
    "dimension_unique_key": lambda s: Dimension.objects.create(study=s, key="empathy", label="x", scale_min=1, scale_max=5),
    "dimension_scale_ordered": lambda s: Dimension.objects.create(study=s, key="d2", label="x", scale_min=5, scale_max=5),
    "block_unique_key": lambda s: Block.objects.create(study=s, key="Q1", scenario=s.scenarios.first()),
    "item_unique_key": lambda s: Item.objects.create(
        study=s, block=s.blocks.last(), key="Q1-R1", option=9, text="x", system=s.systems.first(), condition=s.conditions.first()),
    "item_unique_option_in_block": lambda s: Item.objects.create(
        study=s, block=s.blocks.first(), key="new", option=1, text="x", system=s.systems.first(), condition=s.conditions.first()),
    "item_option_positive": lambda s: Item.objects.create(
        study=s, block=s.blocks.first(), key="new", option=0, text="x", system=s.systems.first(), condition=s.conditions.first()),
    "item_text_not_empty": lambda s: Item.objects.create(
        study=s, block=s.blocks.first(), key="new", option=9, text="", system=s.systems.first(), condition=s.conditions.first()),
    "attention_check_unique_key": lambda s: AttentionCheck.objects.create(study=s, key="AC1", text="x", expected_value=1),
    "free_text_unique_key": lambda s: [FreeTextQuestion.objects.create(study=s, key="k", prompt="x") for _ in range(2)],
    "free_text_max_length_range": lambda s: FreeTextQuestion.objects.create(study=s, key="k", prompt="x", max_length=0),
    "demographic_unique_key": lambda s: DemographicQuestion.objects.create(study=s, key="age", prompt="x"),
    "demographic_known_kind": lambda s: DemographicQuestion.objects.create(study=s, key="income", prompt="x", kind="slider"),
    "demographic_number_has_range": lambda s: DemographicQuestion.objects.create(study=s, key="income", prompt="x",
                                                                                 kind="number", min_value=5, max_value=5),
    "participant_unique_external_id": lambda s: [_participant(s, 1), Participant.objects.create(study=s, external_id=f"{1:024x}", pseudonym="other")],
    "participant_unique_pseudonym": lambda s: [_participant(s, 1), Participant.objects.create(study=s, external_id="b" * 24, pseudonym="p1")],
    "participant_finish_after_start": lambda s: _participant(s, started_at=NOW, finished_at=NOW - timedelta(minutes=1)),
    "participant_completed_has_finish": lambda s: _participant(s, status="completed", finished_at=None, completion_code="C"),
    "participant_external_id_set": lambda s: Participant.objects.create(study=s, external_id="", pseudonym="p0"),
    "rater_link_unique_external_id": lambda s: [RaterLink.objects.create(study=s, name=n, token_hash=n, external_id="rater-1") for n in "ab"],
    "rater_link_unique_active_name": lambda s: [RaterLink.objects.create(study=s, name="Ann", token_hash=h, external_id=h) for h in "ab"],
    "rater_link_name_set": lambda s: RaterLink.objects.create(study=s, name="", token_hash="h", external_id="rater-1"),
    "decline_unique_day": lambda s: [ConsentDecline.objects.create(study=s, day=NOW.date()) for _ in range(2)],
    "turn_away_unique_day": lambda s: [TurnAway.objects.create(study=s, day=NOW.date()) for _ in range(2)],
    "visit_unique_sequence": lambda s: [_visit(s), BlockVisit.objects.create(participant=Participant.objects.get(pseudonym="p99"), sequence=1, block=s.blocks.last())],
    "visit_block_once": lambda s: [_visit(s), BlockVisit.objects.create(participant=Participant.objects.get(pseudonym="p99"), sequence=2, block=s.blocks.first())],
    "visit_is_block_xor_check": lambda s: _visit(s, attention_check=s.attention_checks.first()),
    "visit_sequence_positive": lambda s: _visit(s, sequence=0),
    "visit_submitted_after_shown": lambda s: _visit(s, submitted_at=NOW),
    "visit_preference_known": lambda s: _visit(s, shown_at=NOW, submitted_at=NOW, preference="middle"),
    "visit_preference_on_submitted_block": lambda s: _visit(s, shown_at=NOW, preference="left"),
    "placement_unique_position": lambda s: _placement(s, position=1),
    "placement_unique_item": lambda s: _placement(s, item=s.blocks.first().items.first()),
    "placement_unique_rank": lambda s: _placement(s, rank=1),
    "placement_one_best_one_worst": lambda s: _placement(s, choice="best"),
    "placement_position_positive": lambda s: _placement(s, position=0),
    "placement_rank_positive": lambda s: _placement(s, rank=0),
    "placement_choice_known": lambda s: _placement(s, choice="meh"),
    "rating_unique_per_dimension": lambda s: [Rating.objects.create(placement=_placement(s), dimension=s.dimensions.first(), value=3),
                                               Rating.objects.create(placement=ItemPlacement.objects.get(position=2), dimension=s.dimensions.first(), value=4)],
    "rating_value_sane": lambda s: Rating.objects.create(placement=_placement(s), dimension=s.dimensions.first(), value=101),
    "free_text_answer_once": lambda s: [FreeTextAnswer.objects.create(participant=_participant(s), question=FreeTextQuestion.objects.create(study=s, key="k", prompt="x"), text="a"),
                                         FreeTextAnswer.objects.create(participant=Participant.objects.get(pseudonym="p1"), question=FreeTextQuestion.objects.get(key="k"), text="b")],
    "free_text_answer_once_per_visit": lambda s: [FreeTextAnswer.objects.create(participant=Participant.objects.get(pseudonym="p99"), visit=v, question=q, text=t)
                                                   for v in [_visit(s)] for q in [FreeTextQuestion.objects.create(study=s, key="k", prompt="x", per_block=True)] for t in "ab"],
    "typed_answer_once": lambda s: [TypedAnswer.objects.create(participant=v.participant, visit=v, type_key="slider", item="1",
                                                       value=n) for v in [_visit(s)] for n in (10, 20)],
    "typed_answer_names_its_type": lambda s: [TypedAnswer.objects.create(participant=v.participant, visit=v, type_key="",
                                                                 value=1) for v in [_visit(s)]],
    "draft_once_per_visit": lambda s: [Draft.objects.create(participant=v.participant, visit=v, fields={}, saved_at=NOW)
                                       for v in [_visit(s)] for _ in range(2)],
    "draft_once_for_final_questions": lambda s: [Draft.objects.create(participant=p, fields={}, saved_at=NOW)
                                                 for p in [_participant(s)] for _ in range(2)],
    "study_allocation_complete": lambda s: Study.objects.filter(pk=s.pk).update(blocks_per_participant=3),
    "pair_tally_unique_pair": lambda s: [PairTally.objects.create(block=b, first=i, second=j) for b in [s.blocks.first()]
                                         for i, j in [list(b.items.order_by("pk")[:2])] for _ in range(2)],
    "pair_tally_ordered": lambda s: [PairTally.objects.create(block=b, first=j, second=i) for b in [s.blocks.first()]
                                     for i, j in [list(b.items.order_by("pk")[:2])]],
    "assignment_block_once": lambda s: [BlockAssignment.objects.create(study=s, participant=p, block=s.blocks.first())
                                        for p in [_participant(s)] for _ in range(2)],
    "assignment_state_known": lambda s: BlockAssignment.objects.create(study=s, participant=_participant(s),
                                                                       block=s.blocks.first(), state="lost"),
    "withdrawal_unique_pseudonym": lambda s: [_withdrawal(s) for _ in range(2)],
    "withdrawal_channel_known": lambda s: _withdrawal(s, channel="pigeon"),
    "membership_one_role_per_study": lambda s: [_membership(s) for _ in range(2)],
    "membership_role_known": lambda s: _membership(s, role="owner"),
    "run_status_known": lambda s: AnalysisRun.objects.create(study=s, status="paused"),
    "run_done_has_finish_time": lambda s: AnalysisRun.objects.create(study=s, status="done"),
    "run_done_has_no_pending_table": lambda s: AnalysisRun.objects.create(
        study=s, status="done", finished_at=NOW, pending=["mixed_model"]),
    "result_unique_participant": lambda s: [ParticipantResult.objects.create(run=r, participant=p) for r in [AnalysisRun.objects.create(study=s)] for p in [_participant(s)] for _ in range(2)],
    "result_rule_known": lambda s: ParticipantResult.objects.create(run=AnalysisRun.objects.create(study=s), participant=_participant(s), excluded_by="vibes"),
    "result_table_unique_name": lambda s: [ResultTable.objects.create(run=r, name="ttests") for r in [AnalysisRun.objects.create(study=s)] for _ in range(2)],
    "embedding_unique_text": lambda s: [EmbeddingCache.objects.create(model_name="m", text_hash="h", vector=b"") for _ in range(2)],
    "metrics_run_status_known": lambda s: MetricsRun.objects.create(study=s, status="paused"),
    "metrics_run_done_has_finish_time": lambda s: MetricsRun.objects.create(study=s, status="done"),
    "metrics_table_unique_name": lambda s: [MetricsTable.objects.create(run=r, name="robustness") for r in [MetricsRun.objects.create(study=s)] for _ in range(2)],
}


def test_every_constraint_has_a_test():
    names = {c.name for model in apps.get_models() if model._meta.app_label in {"surveys", "analysis"} for c in model._meta.constraints}
    assert names == set(BAD_ROWS), f"missing: {names - set(BAD_ROWS)}, stale: {set(BAD_ROWS) - names}"


@pytest.mark.parametrize("name", sorted(BAD_ROWS))
def test_the_constraint_rejects_a_bad_row(tide, name):
    with pytest.raises(IntegrityError) as caught, transaction.atomic():
        BAD_ROWS[name](tide)
    # PostgreSQL names the constraint; SQLite names checks but lists columns for uniques.
    message = str(caught.value)
    if connection.vendor == "postgresql":
        assert name in message
    else:
        assert name in message or message.startswith("UNIQUE constraint failed")


def test_a_gold_score_is_one_per_item(tide):
    item = tide.items.first()
    GoldScore.objects.create(item=item, score=3.0)
    with pytest.raises(IntegrityError), transaction.atomic():
        GoldScore.objects.create(item=item, score=4.0)
