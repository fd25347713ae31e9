"""Writes of the participant flow: enrolment, answers, completion, exits.

Each public function is one transaction. Answers are saved under a lock on the
participant row, so a double submit or two tabs posting the same page store one
set of answers, and a page is only ever accepted while it is the current one.
All times come from ``web.clock.now()`` so simulated participants can take
realistic durations.
"""

from __future__ import annotations

import random
import secrets
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum

from django.db import IntegrityError, transaction
from django.db.models import Count, Exists, F, OuterRef, Value
from django.db.models.functions import Coalesce

from web import clock
from web.prepared_queries import PreparedUpdate

from . import allocation, demographics, drafts, enrolment_pg, limits, sequence
from .models import (
    AttentionCheck,
    Block,
    BlockVisit,
    ConsentDecline,
    DemographicQuestion,
    FreeTextAnswer,
    FreeTextQuestion,
    Item,
    ItemPlacement,
    Participant,
    Study,
    TurnAway,
)
# StudyClosed and StudyFull are raised by participant_enroll; they live with the places they guard.
from .page_answers import PageAnswers
from .places import StudyClosed, StudyFull, hold_limit, place_confirm, study_is_full  # noqa: F401
from .pseudonyms import pseudonym_for
from .questions import QUESTION_TYPES
from .selectors import VisitPage, visit_page_get
from .withdrawal import withdrawn as withdrawal_recorded


class AnswersRejected(ValueError):
    """Answers that do not fit the page they claim to answer (tampered or stale)."""


class RequiredAnswersMissing(AnswersRejected):
    """Required written questions without an answer; ``question_keys`` names them (in the study's order)."""

    def __init__(self, question_keys: list[str]):
        self.question_keys = question_keys
        super().__init__(f"required questions not answered: {', '.join(question_keys)}")


class SubmitOutcome(str, Enum):
    SAVED = "saved"
    ALREADY_SAVED = "already_saved"  # a double submit: the first one won
    NOT_CURRENT = "not_current"  # a page that is not (or no longer) the participant's current one


# --- counters that record nothing about the person --------------------------------


def _count_today(model, study: Study) -> None:
    day = clock.now().date()
    with transaction.atomic():
        row, _ = model.objects.get_or_create(study=study, day=day)
        model.objects.filter(pk=row.pk).update(count=F("count") + 1)


def consent_decline_record(*, study: Study) -> None:
    _count_today(ConsentDecline, study)


def turn_away_record(*, study: Study) -> None:
    _count_today(TurnAway, study)


# --- enrolment --------------------------------------------------------------------


def study_full(*, study: Study) -> bool:
    """A quick check without a lock, to turn newcomers away early (enrolment decides, under the lock): the
    places are taken, or, in a study that allocates blocks, every block has its r judgements."""
    return allocation.allocation_full(study=study) if study.allocates else study_is_full(study=study)


def participant_enroll(
    *,
    study: Study,
    external_id: str,
    panel_study_id: str = "",
    panel_session_id: str = "",
    is_preview: bool = False,
    seed: int | None = None,
) -> Participant:
    """Create the participant on consent, draw its whole sequence once, and hold a place for it.

    Returns the existing participant when this external id already enrolled
    (a second tab, or a retried POST), so orders are never drawn twice.
    Raises ``StudyClosed`` or ``StudyFull`` (surveys.places) and writes nothing then.
    """
    now = clock.now()
    fields = dict(
        study=study,
        external_id=external_id,
        pseudonym=pseudonym_for(key=study.pseudonym_key, external_id=external_id),
        panel_study_id=panel_study_id[: limits.PANEL_VALUE],
        panel_session_id=panel_session_id[: limits.PANEL_VALUE],
        is_preview=is_preview,
        seed=secrets.randbits(62) if seed is None else seed,
        consented_at=now,
        started_at=now,
        last_seen_at=now,
        hold_expires_at=None if is_preview else now + hold_limit(study),
    )
    if enrolment_pg.applies(study=study, is_preview=is_preview):
        # Three round trips instead of about 17; None leaves the cases below to the general path.
        participant = enrolment_pg.participant_enrol(fields=fields)
        if participant is not None:
            return participant
    existing = Participant.objects.filter(study=study, external_id=external_id).first()
    if existing is not None:
        if study.allocates and not existing.blocks_assigned:
            _pages_of_allocation(existing)
        return existing
    if not is_preview and withdrawal_recorded(study=study, external_id=external_id):
        raise StudyClosed(study.slug)  # they withdrew (surveys.withdrawal): never enrolled again
    if not is_preview:
        # Quick checks first, so a full study draws no sequence only to throw it away.
        if not study.is_open:
            raise StudyClosed(study.slug)
        if study_full(study=study):
            raise StudyFull(study.slug)
    if study.allocates and not is_preview:
        return _enroll_with_allocation(fields)
    try:
        with transaction.atomic():
            participant = Participant.objects.create(**fields)
            rng = random.Random(participant.seed)
            if study.allocates:  # a preview: the blocks a newcomer would get now, allocating nothing
                _assign_sequence(participant, rng, block_ids=allocation.blocks_preview(study=study))
            else:
                _assign_sequence(participant, rng)
                if not is_preview:
                    place_confirm(participant=participant)
    except IntegrityError:
        # The same person consented in two tabs at once: the other request won.
        return Participant.objects.get(study=study, external_id=external_id)
    return participant


def _enroll_with_allocation(fields: dict) -> Participant:
    """Enrolment in a study that allocates blocks, in two steps so that the study's lock is held only while
    blocks are chosen: the participant and their blocks (under the lock), then their pages (after it)."""
    # Read before the lock, so that the lock is held for as few queries as possible.
    release_lapsed = allocation.lapsed_holds_exist(study=fields["study"])
    try:
        with transaction.atomic():
            participant = Participant.objects.create(**fields)
            # Takes the study's lock and checks it is open (as place_confirm does), in one round trip.
            block_ids = allocation.blocks_allocate(participant=participant, release_lapsed=release_lapsed)
    except IntegrityError:
        return Participant.objects.get(study=fields["study"], external_id=fields["external_id"])
    try:
        with transaction.atomic():
            _assign_sequence(participant, random.Random(participant.seed), block_ids=block_ids)
    except BaseException:
        allocation.enrolment_undo(participant_id=participant.pk)
        raise
    return participant


def _pages_of_allocation(participant: Participant) -> None:
    """The pages of a participant whose blocks were allocated but whose pages were never written (the
    process stopped between the two steps of ``_enroll_with_allocation``; or the other tab is writing them)."""
    block_ids = list(participant.block_assignments.values_list("block_id", flat=True))
    try:
        with transaction.atomic():
            if block_ids and not BlockVisit.objects.filter(participant=participant).exists():
                _assign_sequence(participant, random.Random(participant.seed), block_ids=block_ids)
    except IntegrityError:
        pass  # the other tab wrote them


@dataclass(frozen=True)
class PlannedPage:
    """One page of a new participant's sequence: a block with its responses in display order, or a check."""

    block: Block | None
    attention_check: AttentionCheck | None
    item_ids: list[int] = field(default_factory=list)  # a block's items, position 1 first


def sequence_plan(*, study: Study, rng: random.Random, block_ids: list[int] | None = None,
                  record_pairs: bool = False) -> list[PlannedPage]:
    """The sequence a new participant drawn with ``rng`` is given: their blocks (all of the study's, or
    ``block_ids``) shuffled, the attention checks inserted, each block's responses counterbalanced
    (``response_orders``); in pairwise blocks of three or more responses, the pair shown
    (``allocation.pairs_allocate``, counted only with ``record_pairs``).

    Enrolment writes it; the researchers' preview shows it and clicks through it without writing anything.
    """
    if block_ids is None:
        blocks = list(Block.objects.filter(study=study).select_related("scenario").order_by("order", "id"))
    else:  # drawn in order by the seed, whatever order they came in
        # By primary key only: the ids are the study's, and a filter on the study could lead the planner to
        # read all of its blocks.
        blocks = list(Block.objects.filter(pk__in=block_ids).select_related("scenario").order_by("id"))
    checks = list(AttentionCheck.objects.filter(study=study).order_by("id"))
    pages: list[Block | AttentionCheck] = sequence.pages_order(blocks, checks, rng)
    shown = None
    if study.pairwise_enabled:
        # Blocks of three or more responses show a pair of them (surveys.allocation).
        shown = allocation.pairs_allocate(study=study, block_ids=[block.pk for block in blocks], rng=rng,
                                          record=record_pairs)
    orders = response_orders(study=study, rng=rng, block_ids=block_ids, shown=shown)
    return [
        PlannedPage(block=page, attention_check=None, item_ids=orders[page.pk]) if isinstance(page, Block)
        else PlannedPage(block=None, attention_check=page)
        for page in pages
    ]


def _assign_sequence(participant: Participant, rng: random.Random, block_ids: list[int] | None = None) -> None:
    """Write the participant's pages (``sequence_plan``): their blocks (all, or ``block_ids``) and checks."""
    plan = sequence_plan(study=participant.study, rng=rng, block_ids=block_ids,
                         record_pairs=not participant.is_preview)
    visits = BlockVisit.objects.bulk_create(
        BlockVisit(participant=participant, sequence=i, block=page.block, attention_check=page.attention_check)
        for i, page in enumerate(plan, start=1)
    )
    placements = [
        ItemPlacement(visit=visit, item_id=item_id, position=position)
        for visit, page in zip(visits, plan)
        for position, item_id in enumerate(page.item_ids, start=1)
    ]
    ItemPlacement.objects.bulk_create(placements)
    n_blocks = sum(1 for page in plan if page.block is not None)
    Participant.objects.filter(pk=participant.pk).update(blocks_assigned=n_blocks)
    participant.blocks_assigned = n_blocks


def response_orders(
    *, study: Study, rng: random.Random, block_ids: list[int] | None = None, shown: dict[int, list[int]] | None = None
) -> dict[int, list[int]]:
    """The display order of every block's items for a new participant (of ``block_ids`` only, when given;
    of the items in ``shown`` only, for the blocks it names).

    Each block's order is a rotation of a fixed base permutation (a cyclic
    Latin square), so over participants each item appears in each position
    equally often. A rotation is identified by the item it puts first, so the
    least-used rotation comes from one aggregate query over first positions.
    """
    # The given blocks are the study's: by block only, so that the plan reads their items from the block index
    # (a filter on the study as well can lead PostgreSQL to scan all of the study's items).
    items = Item.objects.filter(study=study) if block_ids is None else Item.objects.filter(block_id__in=block_ids)
    items_by_block = sequence.items_by_block(items.order_by("option", "id").values_list("id", "block_id"))
    for block_id, pair in (shown or {}).items():
        items_by_block[block_id] = [item_id for item_id in items_by_block[block_id] if item_id in pair]
    firsts = ItemPlacement.objects.filter(visit__participant__is_preview=False, position=1)
    if block_ids is None:
        firsts = firsts.filter(visit__participant__study=study)
    else:
        # Only the items this participant is shown (they are the study's): the plan starts from the item index,
        # so the count stays small whatever the number of participants. With the study's filter too,
        # PostgreSQL can start from the study's participants and read every visit (measured: 15 ms at 100
        # participants, growing with each).
        firsts = firsts.filter(item_id__in=[i for ids in items_by_block.values() for i in ids])
    first_counts = Counter(dict(firsts.values_list("item_id").annotate(n=Count("id")).values_list("item_id", "n")))
    return sequence.rotations(study_key=study.pseudonym_key, items=items_by_block, first_counts=first_counts, rng=rng)


# --- pages ------------------------------------------------------------------------


def participant_instructions_confirm(*, participant_id: int) -> None:
    Participant.objects.filter(pk=participant_id).update(instructions_seen=True, last_seen_at=clock.now())


_first_shown = PreparedUpdate(
    lambda visit_id, now: (BlockVisit.objects.filter(pk=visit_id, shown_at__isnull=True), {"shown_at": now}),
    visit_id=int,
    now=datetime,
)


def visit_mark_shown(*, visit_id: int) -> None:
    """Record the server time the page was first shown (a refresh keeps it)."""
    _first_shown.run(visit_id=visit_id, now=clock.now())


# The two updates every answer POST makes (before its answers), compiled once per process (web.prepared_queries).
_in_progress_seen = PreparedUpdate(
    lambda participant_id, now: (
        Participant.objects.filter(pk=participant_id, status=Participant.Status.IN_PROGRESS),
        {"last_seen_at": now},
    ),
    participant_id=int,
    now=datetime,
)


def _current_page(visit_id: int, participant_id: int):
    earlier_open = BlockVisit.objects.filter(
        participant_id=participant_id, submitted_at__isnull=True, sequence__lt=OuterRef("sequence")
    )
    return BlockVisit.objects.filter(pk=visit_id, participant_id=participant_id, submitted_at__isnull=True).exclude(
        Exists(earlier_open)
    )


_current_page_submitted = PreparedUpdate(
    lambda visit_id, participant_id, now: (
        _current_page(visit_id, participant_id),
        {"submitted_at": now, "shown_at": Coalesce("shown_at", Value(now))},
    ),
    visit_id=int,
    participant_id=int,
    now=datetime,
)


@transaction.atomic
def block_answer_submit(
    *, participant_id: int, visit_id: int, answers: PageAnswers, page: VisitPage | None = None
) -> SubmitOutcome:
    """Save all answers of one page, or none; a replay of a saved page changes nothing.

    ``page`` is the page as the request already read it (``selectors.visit_page_get``), so that its
    placements and the study's dimensions are not read again; without it, it is read here.
    """
    now = clock.now()
    # The participant's row is locked first, by the update of their last sighting: two tabs posting the same
    # page, or a draft arriving (surveys.drafts takes the same lock), queue here until this commits.
    # Locking the study would queue everyone.
    if not _in_progress_seen.run(participant_id=participant_id, now=now):
        return SubmitOutcome.NOT_CURRENT
    # Only the current page is accepted: not yet submitted, and no page before it still open. Marked submitted
    # first (one transaction: a rejected answer undoes it), as the database allows a pairwise preference only on
    # a submitted block.
    if not _current_page_submitted.run(visit_id=visit_id, participant_id=participant_id, now=now):
        submitted = BlockVisit.objects.filter(pk=visit_id, participant_id=participant_id, submitted_at__isnull=False)
        return SubmitOutcome.ALREADY_SAVED if submitted.exists() else SubmitOutcome.NOT_CURRENT
    if page is None:
        study = Study.objects.get(participants__pk=participant_id)
        page = visit_page_get(visit_id=visit_id, study=study)
    elif page.visit.pk != visit_id:
        raise ValueError(f"the page given is visit {page.visit.pk}, not {visit_id}")
    if page.is_check:
        _save_attention(page.visit, answers)
    else:
        # The answers rows name the participant by id only.
        _save_block(Participant(pk=participant_id), page, answers)
    drafts.draft_discard(participant_id=participant_id, visit_id=visit_id)
    return SubmitOutcome.SAVED


def _save_attention(visit: BlockVisit, answers: PageAnswers) -> None:
    if answers.attention_value is None:
        raise AnswersRejected("an attention check needs an answer")
    BlockVisit.objects.filter(pk=visit.pk).update(
        attention_value=answers.attention_value,
        attention_passed=answers.attention_value == visit.attention_check.expected_value,
    )


def _save_block(participant: Participant, page: VisitPage, answers: PageAnswers) -> None:
    """Every question type checks its answers against the page (the last line of defence behind the forms:
    they must fit this page exactly), then saves them; a type the page does not ask must have no answers.
    The page's per-block written questions are checked even when nothing is written: a required one left
    blank must be refused."""
    asked = [kind for kind in QUESTION_TYPES if kind.asked(page)]
    for kind in QUESTION_TYPES:
        if kind in asked:
            problem = kind.check(page, answers)
        else:
            problem = f"this page does not ask {kind.key.replace('_', ' ')} questions" if kind.answered(answers) else None
        if problem:
            raise AnswersRejected(problem)
    for kind in asked:
        kind.save(page, participant, answers)


def participant_demographics_submit(
    *, participant_id: int, answers: dict[str, str], free_text: dict[int, str] | None = None
) -> None:
    """Save the (all optional) answers about the person and the end-of-study texts.

    Raises ``AnswersRejected`` (nothing saved) for an answer its question does not accept, and
    ``RequiredAnswersMissing`` (nothing saved) when a required end-of-study question is left blank.
    """
    with transaction.atomic():
        participant = Participant.objects.select_for_update().get(pk=participant_id)
        if participant.status != Participant.Status.IN_PROGRESS or participant.demographics_done:
            return
        written = {qid for qid, text in (free_text or {}).items() if text.strip()}
        if missing := _required_unanswered(participant, study_level_answered=written):
            raise RequiredAnswersMissing(missing)
        questions = {q.key: q for q in DemographicQuestion.objects.filter(study_id=participant.study_id)}
        stored = {}
        for key, value in answers.items():
            question = questions.get(key)
            if question is None or not value:
                continue
            if problem := demographics.answer_problem(question, value):
                raise AnswersRejected(f"{key}: {problem}")
            stored[key] = demographics.stored_answer(question, value)
        participant.demographics = stored
        participant.demographics_done = True
        participant.last_seen_at = clock.now()
        participant.save()
        FreeTextAnswer.objects.bulk_create(
            FreeTextAnswer(participant=participant, question_id=qid, text=text)
            for qid, text in (free_text or {}).items()
            if text
        )
        drafts.draft_discard(participant_id=participant.pk, visit_id=None)


class NotFinished(Exception):
    """Completion was asked for while pages or the final questions remain."""


def participant_complete(*, participant_id: int) -> Participant:
    """Mark the participant completed and give them the study's code (idempotent)."""
    with transaction.atomic():
        participant = Participant.objects.select_for_update().select_related("study").get(pk=participant_id)
        if participant.status == Participant.Status.COMPLETED:
            return participant
        unanswered = BlockVisit.objects.filter(participant=participant, submitted_at__isnull=True).exists()
        if participant.status != Participant.Status.IN_PROGRESS or unanswered or not participant.demographics_done:
            raise NotFinished(participant.pseudonym)
        # Whatever wrote the answers (the pages, the bots, a script): no code without every required one.
        if missing := _required_unanswered(participant):
            raise RequiredAnswersMissing(missing)
        now = clock.now()
        participant.status = Participant.Status.COMPLETED
        participant.finished_at = now
        participant.last_seen_at = now
        participant.completion_code = participant.study.completion_code
        participant.save(update_fields=["status", "finished_at", "last_seen_at", "completion_code"])
        allocation.assignments_complete(participant_id=participant.pk)
    return participant


def _required_unanswered(participant: Participant, *, study_level_answered: set[int] | None = None) -> list[str]:
    """Keys of the required written questions this participant has not answered: a study-level one
    without an answer (``study_level_answered``: the ids answered in this submission, else the stored
    ones), a per-block one without an answer on some submitted block."""
    required = list(FreeTextQuestion.objects.filter(study_id=participant.study_id, required=True).order_by("order"))
    if not required:
        return []
    stored = FreeTextAnswer.objects.filter(participant=participant).exclude(text="")
    if study_level_answered is None:
        study_level_answered = set(stored.filter(visit__isnull=True).values_list("question_id", flat=True))
    blocks_seen = BlockVisit.objects.filter(
        participant=participant, block__isnull=False, submitted_at__isnull=False
    ).count() if any(q.per_block for q in required) else 0
    answered_on_blocks = Counter(stored.filter(visit__isnull=False).values_list("question_id", flat=True))
    missing = []
    for question in required:
        if question.per_block:
            if answered_on_blocks[question.pk] < blocks_seen:
                missing.append(question.key)
        elif question.pk not in study_level_answered:
            missing.append(question.key)
    return missing


def participant_exit(*, participant_id: int) -> None:
    """Leaving early: the answers so far stay, finished_at stays empty; drafts go (never submitted), and the
    blocks allocated to them go back to the pool."""
    with transaction.atomic():
        left = Participant.objects.filter(pk=participant_id, status=Participant.Status.IN_PROGRESS).update(
            status=Participant.Status.EXITED, last_seen_at=clock.now()
        )
        drafts.drafts_discard_all(participant_id=participant_id)
        if left:
            allocation.assignments_release(participant_id=participant_id)
