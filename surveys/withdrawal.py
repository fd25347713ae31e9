"""Withdrawal: a participant (or a researcher on their request) deletes everything they answered.

The participant's row goes, and with it (by the database's cascades) their visits, placements, ratings,
free text, drafts, block assignments and run results; their demographics were columns of that row. A
``Withdrawal`` tombstone keeps the pseudonym, the time and the channel, and no panel id:

- counts stay right: a run's notes and the dashboard count the tombstones;
- places stay right: the blocks they held go back to the pool (``allocation.assignments_release``) before the
  row goes, and a deleted participant holds no place (``surveys.places`` counts rows);
- the panel stays right: the same panel id is recognised by its pseudonym (``withdrawn``) and never enrolled
  again; Prolific's submission keeps its own copy of the id (``prolific.PanelSubmission``), and the participant
  is asked to return it.

Runs and exports read participants from the database, so a withdrawn participant is in none made after.
"""

from __future__ import annotations

from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Q

from web import clock
from web.signals import announce_action

from . import allocation
from .models import Participant, Study, Withdrawal
from .pseudonyms import pseudonym_for

Channel = Withdrawal.Channel


class ParticipantNotFound(Exception):
    """No participant of the study has that panel id or pseudonym."""


def withdrawn(*, study: Study, external_id: str) -> bool:
    """Did the holder of this panel id withdraw from ``study``? (Only the pseudonym is kept.)"""
    pseudonym = pseudonym_for(key=study.pseudonym_key, external_id=external_id)
    return Withdrawal.objects.filter(study=study, pseudonym=pseudonym).exists()


def participant_find_for_deletion(*, study: Study, identifier: str) -> Participant:
    """A researcher's request names a participant by panel id or by pseudonym (exports show the latter)."""
    identifier = identifier.strip()
    participant = (Participant.objects.filter(study=study, is_preview=False)
                   .filter(Q(external_id=identifier) | Q(pseudonym=identifier)).first())
    if participant is None:
        raise ParticipantNotFound(f'study "{study.slug}" has no participant with the panel id or pseudonym '
                                  f'"{identifier[:80]}"')
    return participant


def participant_withdraw(*, participant_id: int, channel: str, actor: Any = None, request: Any = None) -> Withdrawal | None:
    """Delete the participant's answers and row, keep a tombstone; announce it (``web.signals``).

    Idempotent: a participant already gone (withdrawn by a double click or in another tab) changes nothing
    and returns None."""
    with transaction.atomic():
        # The row lock makes two concurrent withdrawals of the same participant take turns: the second
        # finds no row.
        participant = Participant.objects.select_for_update().filter(pk=participant_id, is_preview=False).first()
        if participant is None:
            return None
        study = participant.study
        # Before the row goes: the counters of the blocks they held come down (under the study's lock).
        allocation.assignments_release(participant_id=participant.pk)
        try:
            with transaction.atomic():
                tombstone = Withdrawal.objects.create(
                    study=study, pseudonym=participant.pseudonym, withdrawn_at=clock.now(), channel=channel,
                    status_before=participant.status,
                )
        except IntegrityError:  # a tombstone of the same pseudonym already (a re-created row): keep the first
            tombstone = Withdrawal.objects.get(study=study, pseudonym=participant.pseudonym)
        participant.delete()
        action = "participant.withdraw" if channel == Channel.PARTICIPANT else "participant.delete"
        announce_action(actor=None if channel == Channel.PARTICIPANT else actor, study=study, action=action,
                        object=tombstone.pseudonym, detail=f"channel={channel}", request=request)
    return tombstone


def withdrawals_count(*, study_id: int) -> int:
    return Withdrawal.objects.filter(study_id=study_id).count()


def withdrawals_note(*, study_id: int) -> str:
    """The sentence a run's notes add when participants withdrew (their answers are in none of its tables)."""
    n = withdrawals_count(study_id=study_id)
    if not n:
        return ""
    people = "1 participant" if n == 1 else f"{n} participants"
    return f" {people} withdrew and their answers were deleted: they are in none of this run's tables or counts."
