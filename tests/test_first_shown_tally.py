"""How often each item was shown first, as PostgreSQL keeps it (``FirstShownTally``, migration 0018, issue 25).

Every count is compared with the placements counted directly (participants only, not previews), after each of
the ways placements are written and deleted: the PostgreSQL entry path, the general path, previews, an entry
undone, a withdrawal, participants deleted, a restore's bulk insert, a session that skips the foreign-key
triggers (the responses import) and the migration's count of the placements written before it.
"""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.db import IntegrityError, connection, transaction
from django.db.models import Count

from surveys import allocation, services
from surveys.definition import parse_definition
from surveys.loader import study_load
from surveys.models import FirstShownTally, ItemPlacement, Participant, Study
from surveys.withdrawal import participant_withdraw
from tests.support.generated_outputs import definition_from_outputs, outputs_rows, without_sample

pytestmark = [pytest.mark.django_db,
              pytest.mark.skipif("connection.vendor != 'postgresql'", reason="kept by PostgreSQL's triggers")]


def _load(slug: str, **options) -> Study:
    definition = definition_from_outputs(outputs_rows(6), slug=slug, **options)
    return study_load(definition=parse_definition(without_sample(definition))).study


def _counted() -> dict[int, int]:
    """Placements at position 1 of participants who are not previews, per item: counted from the rows."""
    firsts = (ItemPlacement.objects.filter(position=1, visit__participant__is_preview=False)
              .values("item_id").annotate(n=Count("id")))
    return {row["item_id"]: row["n"] for row in firsts}


def _kept() -> dict[int, int]:
    """The tally, without the items it has come back down to zero for."""
    return {item_id: n for item_id, n in FirstShownTally.objects.values_list("item_id", "shown_first") if n}


def test_the_tally_follows_every_way_placements_are_written_and_deleted():
    allocating = _load("tally-k", allocation={"blocks_per_participant": 3, "judgements_per_block": 4})
    everyone = _load("tally-all")
    enrolled = [services.participant_enroll(study=allocating, external_id=f"p{i}", seed=i) for i in range(8)]
    enrolled += [services.participant_enroll(study=everyone, external_id=f"q{i}", seed=i) for i in range(4)]
    assert _kept() == _counted() and sum(_counted().values()) == 3 * 8 + 6 * 4

    preview = services.participant_enroll(study=everyone, external_id="preview", seed=3, is_preview=True)
    assert ItemPlacement.objects.filter(visit__participant=preview, position=1).count() == 6
    assert _kept() == _counted()

    allocation.enrolment_undo(participant_id=enrolled[0].pk)
    participant_withdraw(participant_id=enrolled[1].pk, channel="participant")
    Participant.objects.filter(pk=enrolled[8].pk).delete()
    preview.delete()
    assert _kept() == _counted() and sum(_counted().values()) == 3 * 6 + 6 * 3

    Participant.objects.filter(study=everyone).delete()  # a study's participants deleted in one statement
    assert _kept() == _counted() and sum(_counted().values()) == 3 * 6


def test_the_tally_follows_a_session_that_skips_the_foreign_key_triggers():
    """The responses import writes with session_replication_role = replica (analysis.imports.import_writer)."""
    study = _load("tally-replica")
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL session_replication_role = replica")
        participant = services.participant_enroll(study=study, external_id="imported", seed=4)
        assert _kept() == _counted() and sum(_counted().values()) == 6
        participant.delete()
        assert _kept() == _counted() == {}


def test_a_bulk_insert_of_placements_counts_each_first_once(tide, steps, client):
    """The restore writes placements in batches (bulk_create): one statement, many participants."""
    for pid in ("a" * 24, "b" * 24):
        steps.start(client, tide, pid)
    placements = list(ItemPlacement.objects.filter(visit__participant__study=tide).order_by("pk"))
    before = _counted()
    ItemPlacement.objects.filter(pk__in=[p.pk for p in placements]).delete()
    assert _kept() == _counted() == {}
    ItemPlacement.objects.bulk_create(placements)
    assert _kept() == _counted() == before


def test_a_placement_is_not_moved_and_its_answer_is_still_saved(tide, steps, client):
    steps.start(client, tide, "c" * 24)
    placement = ItemPlacement.objects.filter(visit__participant__study=tide, position=1).first()
    same_page = ItemPlacement.objects.filter(visit=placement.visit).exclude(pk=placement.pk).first()
    next_page = ItemPlacement.objects.filter(visit__participant=placement.visit.participant).exclude(
        visit=placement.visit).order_by("visit__sequence", "position").last()
    before = _kept()
    for change in ({"position": 9}, {"item_id": same_page.item_id}, {"visit_id": next_page.visit_id}):
        with pytest.raises(IntegrityError, match="not moved"), transaction.atomic():
            ItemPlacement.objects.filter(pk=placement.pk).update(**change)
    assert ItemPlacement.objects.get(pk=placement.pk).position == 1 and _kept() == before
    # An answer's own columns are written as before (ranking's rank).
    ItemPlacement.objects.filter(pk=placement.pk).update(rank=1)
    assert ItemPlacement.objects.get(pk=placement.pk).rank == 1


@pytest.mark.django_db(transaction=True)
def test_the_migration_counts_the_placements_written_before_it():
    study = _load("tally-migrated")
    for i in range(3):
        services.participant_enroll(study=study, external_id=f"m{i}", seed=i)
    counted = _counted()
    with connection.cursor() as cursor:  # as if the placements had been written before the triggers
        cursor.execute("ALTER TABLE surveys_itemplacement DISABLE TRIGGER first_shown_added")
        services.participant_enroll(study=study, external_id="unseen", seed=9)
        cursor.execute("ALTER TABLE surveys_itemplacement ENABLE ALWAYS TRIGGER first_shown_added")
    assert _kept() == counted != _counted()
    call_command("migrate", "surveys", "0017", verbosity=0)
    call_command("migrate", "surveys", verbosity=0)
    assert _kept() == _counted()
