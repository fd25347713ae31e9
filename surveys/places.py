"""Held places: who counts against a study's target while it runs.

A participant holds a place from consent until ``hold_expires_at``: the start
plus the study's hold limit (``hold_minutes``; by default twice
``estimated_minutes``, like Prolific's time-out; without an estimate,
``duration_max_minutes``, past which the duration rule excludes them anyway).
Newcomers are admitted while completions plus live holds stay below
``target_completions``, so people already in progress can always finish.

When a hold has lapsed, its place is free for a newcomer. The participant may
still go on while a place is free: each page they ask for then claims one again,
for ``HOLD_GRACE`` only (their time is up; they no longer keep a place between
pages). When none is free they see a "your time ran out" page; their answers are
kept, and they may continue later if a place frees up. A hold about to lapse is
renewed the same way, so that a page being answered never loses its place
between the check and the save.

Admission is decided under a lock on the study row (PostgreSQL ``FOR NO KEY
UPDATE``, taken last so that building the participant's sequence happens outside
it; SQLite's IMMEDIATE transactions serialise every writer anyway). Under
READ COMMITTED (Django's default) the count taken after the lock sees every
admission committed before it, so the target is never exceeded.

A participant whose Prolific submission was returned, timed out or rejected
(``prolific.models.PanelSubmission.releases_place``, stored by the sync) holds
no place, as on Prolific.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import Q

from web import clock

from .models import Participant, Study

# Longer than any request takes: a hold renewed at the start of a request outlives its save.
HOLD_GRACE = timedelta(minutes=2)


class StudyClosed(Exception):
    """The study does not accept new participants."""


class StudyFull(Exception):
    """Completions plus live holds have reached the study's target."""


def hold_limit(study: Study) -> timedelta:
    if study.hold_minutes:
        return timedelta(minutes=study.hold_minutes)
    if study.estimated_minutes:
        return timedelta(minutes=2 * study.estimated_minutes)
    return timedelta(minutes=study.duration_max_minutes)


def live_hold(now: datetime) -> Q:
    """Participants (of any study) holding a place at ``now``."""
    return Q(status=Participant.Status.IN_PROGRESS, hold_expires_at__gt=now)


def places_taken(*, study: Study, excluding: int | None = None) -> int:
    """Completions plus live holds (previews never count)."""
    taken = Participant.objects.filter(study=study, is_preview=False).filter(
        Q(status=Participant.Status.COMPLETED) | live_hold(clock.now())
    ).exclude(panel_submissions__releases_place=True)
    if study.allocates:
        # Finishers the quality rules excluded released their blocks (surveys.allocation): their place goes
        # to the newcomer who judges those blocks again.
        taken = taken.exclude(status=Participant.Status.COMPLETED, block_assignments__state="released")
    if excluding is not None:
        taken = taken.exclude(pk=excluding)
    return taken.count()


def study_is_full(*, study: Study) -> bool:
    """A quick check without a lock, to turn newcomers away early; ``place_confirm`` decides."""
    return study.target_completions is not None and places_taken(study=study) >= study.target_completions


def lock_study(study_id: int) -> dict:
    # NO KEY: the new participant's row already holds a KEY SHARE lock on the study
    # (its foreign key); a plain FOR UPDATE would wait on it and deadlock two newcomers.
    return Study.objects.select_for_update(no_key=True).filter(pk=study_id).values("is_open", "target_completions").get()


def place_confirm(*, participant: Participant) -> None:
    """Inside the transaction that enrols ``participant``, after its rows are written.

    Raises ``StudyClosed`` or ``StudyFull``, which rolls the enrolment back."""
    study = lock_study(participant.study_id)
    if not study["is_open"]:
        raise StudyClosed(participant.study_id)
    target = study["target_completions"]
    # A study that allocates blocks is full when every block has its r judgements (surveys.allocation decides,
    # under this lock); its target follows from them.
    if target is not None and not participant.study.allocates and places_taken(
            study=participant.study, excluding=participant.pk) >= target:
        raise StudyFull(participant.study_id)


def hold_needs_renewal(participant: Participant) -> bool:
    """Is this participant's hold lapsed or about to, in a study whose places are counted?"""
    return (
        participant.status == Participant.Status.IN_PROGRESS
        and participant.hold_expires_at is not None
        and participant.study.target_completions is not None
        and participant.hold_expires_at < clock.now() + HOLD_GRACE
    )


def hold_renew(*, participant: Participant) -> bool:
    """Claim a place again for ``HOLD_GRACE``; False when the hold has lapsed and the study is full.

    A live hold is always renewed: it is counted among the places taken, so excluding
    it leaves at least one free."""
    with transaction.atomic():
        study = lock_study(participant.study_id)
        now = clock.now()
        target = study["target_completions"]
        held = Participant.objects.filter(pk=participant.pk).filter(live_hold(now)).exists()
        if not held and target is not None and places_taken(study=participant.study, excluding=participant.pk) >= target:
            return False
        until = max(participant.hold_expires_at or now, now + HOLD_GRACE)
        Participant.objects.filter(pk=participant.pk, status=Participant.Status.IN_PROGRESS).update(hold_expires_at=until)
        participant.hold_expires_at = until
    return True
