"""Entry with allocation on PostgreSQL in two round trips (surveys.enrolment_pg, issue 25).

Its pages are checked against the general path's own plan (``services.sequence_plan`` for the blocks the
researcher's preview names), its refusals against the rows left behind, and its rows column by column
against those the ORM writes.
"""

from __future__ import annotations

import random
from datetime import timedelta

import pytest
from django.db import connection

from surveys import allocation, enrolment_pg, services
from surveys.definition import parse_definition
from surveys.loader import study_load
from surveys.models import BlockAssignment, BlockTally, BlockVisit, ItemPlacement, Participant, Study
from surveys.places import StudyClosed, StudyFull
from surveys.withdrawal import participant_withdraw
from tests.support.generated_outputs import definition_from_outputs, outputs_rows, without_sample
from web import clock

pytestmark = [pytest.mark.django_db,
              pytest.mark.skipif("connection.vendor != 'postgresql'", reason="the PostgreSQL path")]


def _load(slug: str = "fast", n_prompts: int = 10, k: int = 4, r: int = 3, **options) -> Study:
    definition = definition_from_outputs(outputs_rows(n_prompts), slug=slug, **options,
                                         allocation={"blocks_per_participant": k, "judgements_per_block": r})
    return study_load(definition=parse_definition(without_sample(definition))).study


def _pages(participant: Participant) -> list[tuple[int | None, int | None, list[int]]]:
    visits = BlockVisit.objects.filter(participant=participant).order_by("sequence")
    return [(visit.block_id, visit.attention_check_id,
             list(visit.placements.order_by("position").values_list("item_id", flat=True))) for visit in visits]


def test_it_applies_to_allocating_studies_of_participants_only():
    study = _load()
    assert enrolment_pg.applies(study=study, is_preview=False)
    assert not enrolment_pg.applies(study=study, is_preview=True)
    everyone = study_load(definition=parse_definition(without_sample(
        definition_from_outputs(outputs_rows(4), slug="everyone")))).study
    assert not enrolment_pg.applies(study=everyone, is_preview=False)


@pytest.mark.parametrize("seed", [1, 7, 2026])
def test_a_newcomer_gets_the_pages_the_general_plan_draws_from_their_seed(seed):
    study = _load()
    for i in range(5):  # some first positions already taken, so the rotations have counts to follow
        services.participant_enroll(study=study, external_id=f"earlier{i}", seed=100 + i)
    blocks = allocation.blocks_preview(study=study)
    plan = services.sequence_plan(study=study, rng=random.Random(seed), block_ids=blocks)
    participant = services.participant_enroll(study=study, external_id="newcomer", seed=seed)
    expected = [(page.block.pk if page.block else None, page.attention_check.pk if page.attention_check else None,
                 page.item_ids) for page in plan]
    assert _pages(participant) == expected
    assert any(check is not None for _, check, _ in expected)  # the study's attention check is among them
    assert participant.blocks_assigned == len(blocks) == 4
    assert Participant.objects.get(pk=participant.pk).blocks_assigned == 4
    assert sorted(BlockAssignment.objects.filter(participant=participant).values_list("block_id", flat=True)) == blocks


def test_its_rows_are_the_rows_the_orm_writes_column_by_column():
    fast = _load(slug="fast")
    general = _load(slug="general")
    one = services.participant_enroll(study=fast, external_id="same-person", seed=5,
                                      panel_study_id="S1", panel_session_id="X1")
    # The general path's participant row, built by the ORM from the same fields.
    other = Participant.objects.create(study=general, external_id="same-person", pseudonym="p_other", seed=5,
                                       panel_study_id="S1", panel_session_id="X1", consented_at=one.consented_at,
                                       started_at=one.started_at, last_seen_at=one.last_seen_at,
                                       hold_expires_at=one.hold_expires_at)
    skip = {"id", "study", "pseudonym", "blocks_assigned"}
    stored = Participant.objects.get(pk=one.pk)
    for field in Participant._meta.concrete_fields:
        if field.name not in skip:
            assert field.value_from_object(stored) == field.value_from_object(other), field.name
    visit = BlockVisit.objects.filter(participant=one).first()
    orm_visit = BlockVisit.objects.create(participant=other, sequence=1, block_id=visit.block_id)
    for field in BlockVisit._meta.concrete_fields:
        if field.name not in {"id", "participant", "sequence", "block", "attention_check"}:
            assert field.value_from_object(visit) == field.value_from_object(orm_visit), field.name
    placement = ItemPlacement.objects.filter(visit__participant=one).first()
    orm_placement = ItemPlacement.objects.create(visit=orm_visit, item_id=placement.item_id, position=1)
    for field in ItemPlacement._meta.concrete_fields:
        if field.name not in {"id", "visit", "position"}:
            assert field.value_from_object(placement) == field.value_from_object(orm_placement), field.name


def test_the_same_person_twice_is_one_participant_with_one_set_of_pages():
    study = _load()
    first = services.participant_enroll(study=study, external_id="twice", seed=3)
    again = services.participant_enroll(study=study, external_id="twice", seed=4)
    assert again.pk == first.pk and again.seed == 3
    assert Participant.objects.filter(study=study).count() == 1
    assert BlockVisit.objects.filter(participant=first).count() == len(_pages(first))
    assert BlockAssignment.objects.filter(participant=first).count() == 4
    assert sum(BlockTally.objects.filter(study=study).values_list("allocated", flat=True)) == 4


def test_a_closed_study_refuses_and_writes_nothing():
    study = _load()
    Study.objects.filter(pk=study.pk).update(is_open=False)
    study.refresh_from_db()
    with pytest.raises(StudyClosed):
        services.participant_enroll(study=study, external_id="late", seed=1)
    assert not Participant.objects.filter(study=study).exists()
    assert not BlockAssignment.objects.exists() and set(BlockTally.objects.values_list("allocated", flat=True)) == {0}
    # The transaction of the caller (here the test's) goes on: the refusal rolled back a savepoint only.
    assert Study.objects.filter(pk=study.pk).exists()


def test_a_full_study_refuses_and_writes_nothing():
    study = _load(n_prompts=4, k=4, r=1)  # 4 blocks, each judged once: one participant fills it
    services.participant_enroll(study=study, external_id="first", seed=1)
    with pytest.raises(StudyFull):
        services.participant_enroll(study=study, external_id="second", seed=2)
    assert list(Participant.objects.filter(study=study).values_list("external_id", flat=True)) == ["first"]
    assert set(BlockTally.objects.filter(study=study).values_list("allocated", flat=True)) == {1}


def test_someone_who_withdrew_is_not_enrolled_again():
    study = _load()
    participant = services.participant_enroll(study=study, external_id="leaver", seed=1)
    participant_withdraw(participant_id=participant.pk, channel="participant")
    with pytest.raises(StudyClosed):
        services.participant_enroll(study=study, external_id="leaver", seed=2)
    assert not Participant.objects.filter(study=study).exists()


def test_lapsed_holds_are_given_back_before_a_newcomer_is_served():
    study = _load(n_prompts=4, k=4, r=1)
    gone = services.participant_enroll(study=study, external_id="gone", seed=1)
    Participant.objects.filter(pk=gone.pk).update(hold_expires_at=clock.now() - timedelta(minutes=1))
    newcomer = services.participant_enroll(study=study, external_id="newcomer", seed=2)
    assert sorted(b for b, _, _ in _pages(newcomer) if b) == sorted(study.blocks.values_list("pk", flat=True))
    assert set(BlockAssignment.objects.filter(participant=gone).values_list("state", flat=True)) == {"released"}


def test_the_app_s_connections_compile_no_query_plans():
    # A newcomer's items and first positions, planned with statistics that lag a fresh study, were estimated
    # costly enough to be JIT-compiled: 29 ms of compiling for a 2 ms query (config/settings.py).
    with connection.cursor() as cursor:
        cursor.execute("SHOW jit")
        assert cursor.fetchone()[0] == "off"


def test_the_pages_commit_without_waiting_for_the_disk():
    study = _load()
    participant = services.participant_enroll(study=study, external_id="first", seed=1)
    pages = [("block", block) for block, _, _ in _pages(participant) if block]
    orders = {block: items for block, _, items in _pages(participant) if block}
    BlockVisit.objects.filter(participant=participant).delete()
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL synchronous_commit = on")  # the test's transaction, as a request's starts
        enrolment_pg._pages_write(participant.pk, pages, orders)
        cursor.execute("SHOW synchronous_commit")
        assert cursor.fetchone()[0] == "off"
    assert [block for block, _, _ in _pages(participant)] == [block for _, block in pages]


@pytest.mark.django_db(transaction=True)
def test_the_next_statement_waits_for_the_disk_again():
    study = _load()
    participant = services.participant_enroll(study=study, external_id="first", seed=1)  # in autocommit
    assert participant.blocks_assigned == 4
    with connection.cursor() as cursor:
        # set_config's is_local: the pages' own transaction only, not the connection's later ones.
        cursor.execute("SELECT current_setting('synchronous_commit'), reset_val FROM pg_settings "
                       "WHERE name = 'synchronous_commit'")
        now, connection_default = cursor.fetchone()
    assert now == connection_default
