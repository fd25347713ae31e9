"""Allocation: which blocks a new participant judges, when each judges k of them until every block has r.

A study's ``allocation`` is ``"all"`` (everyone judges every block, the default) or
``{blocks_per_participant: k, judgements_per_block: r}``. Then:

- Each block has a counter row (``BlockTally``): the participants it is allocated to now (holding it or
  completed, not released). A newcomer is given the k blocks with the lowest counts (ties drawn at random),
  never one that already has r. Taking the lowest first keeps every count within 1 of the others (when
  fewer than k blocks share the lowest count, all of them are taken, and the rest come from the next
  level), and drawing ties at random makes every pair of blocks equally likely to be judged together,
  so co-occurrence is even in expectation. Within that rule a participant is given blocks of different
  prompts whenever the numbers allow (``blocks_pick``): one prompt shown in several blocks (TIDE's four
  per scenario) is not judged twice by one person.
- The choice is made under the study's lock, in a constant number of queries whatever the number of blocks
  and participants, reading k x (the most blocks of one scenario) counters from one index scan, never all of
  them. On PostgreSQL the lock, the choice, the counters and the assignments are one call of the function
  ``surveys_blocks_allocate`` (migration 0014): newcomers queue behind one round trip; it is called by
  ``surveys_participant_enrol`` (migration 0016, ``surveys.enrolment_pg``), which also inserts the newcomer, so
  that a whole entry is three round trips. On SQLite (whose writers are serialised anyway) the same choice is
  made in Python: lock, read, increment, insert.
- Assignments are held like places (pair counters follow them: a released block's pair is counted down,
  and up again when claimed back). A participant who leaves early, whose Prolific submission is returned,
  timed out or rejected, whose hold lapsed, or whom the quality rules exclude, releases their blocks: the
  counters go down and the next newcomers are given them. Lapsed holds are released by the next entry (a
  lapse is an instant, not an event); the rest by ``allocation_reconcile`` (after a Prolific sync or an
  analysis run's quality rules) and by ``assignments_release`` (leaving early). A participant who finishes
  after their blocks were released claims them again (their answers count): a block can then end with
  r + 1 judgements.
- Pairwise studies whose blocks hold three or more responses show two of them at a time: the pair is drawn
  uniformly among the block's least-allocated pairs (``PairTally``), never from the answers given so far,
  which would bias a Bradley-Terry fit (as Chatbot Arena found).

When r x blocks is not a multiple of k, the target is rounded up and the last participants are given
fewer than k blocks (the blocks still short of r) rather than push blocks past r.
"""

from __future__ import annotations

import random
from collections import Counter
from itertools import combinations

from django.db import connection, transaction
from django.db.models import Case, Count, F, IntegerField, Max, OuterRef, Q, Subquery, Value, When
from django.db.models.functions import Coalesce, Random

from web import clock

from .models import Block, BlockAssignment, BlockTally, Item, ItemPlacement, PairTally, Participant, Study
from .places import StudyClosed, StudyFull, lock_study

State = BlockAssignment.State
# The quality rules that exclude a participant for how they answered (analysis.quality); "incomplete" is not
# one: someone still in progress is incomplete, and leaving or timing out releases blocks by itself.
QUALITY_EXCLUSIONS = ("attention", "duration", "speed", "straightlining")


# ----------------------------------------------------------------------- setup


def tallies_create(*, study: Study) -> None:
    """Fresh counters for the study's blocks (at load, before anyone took part) and, for pairwise blocks of
    three or more responses, for their pairs."""
    BlockTally.objects.filter(study=study).delete()
    PairTally.objects.filter(block__study=study).delete()
    widest = (Block.objects.filter(study=study).values("scenario_id").annotate(n=Count("pk"))
              .aggregate(m=Max("n"))["m"]) or 1
    Study.objects.filter(pk=study.pk).update(scenario_blocks_max=widest)
    study.scenario_blocks_max = widest
    if study.allocates:
        # Random keys from the start: the first participants are not given neighbouring blocks (often the
        # same prompt's) together.
        rng = random.Random()
        BlockTally.objects.bulk_create(
            BlockTally(block_id=block_id, study=study, scenario_id=scenario_id, shuffle=rng.random())
            for block_id, scenario_id in Block.objects.filter(study=study).values_list("pk", "scenario_id")
        )
        if connection.vendor == "postgresql":
            # Fresh statistics, so that the first entries already read the lowest counters from the index
            # (with none, the planner expects a few rows and sorts them all), and their blocks' items by block.
            with connection.cursor() as cursor:
                cursor.execute("ANALYZE surveys_blocktally, surveys_item")
    if study.pairwise_enabled:
        items: dict[int, list[int]] = {}
        for item_id, block_id in Item.objects.filter(study=study).order_by("pk").values_list("pk", "block_id"):
            items.setdefault(block_id, []).append(item_id)
        PairTally.objects.bulk_create(
            PairTally(block_id=block_id, first_id=a, second_id=b)
            for block_id, ids in items.items() if len(ids) > 2 for a, b in combinations(ids, 2)
        )


# ----------------------------------------------------------------------- entry


def blocks_allocate(*, participant: Participant, release_lapsed: bool = True) -> list[int]:
    """The blocks ``participant`` (just created, not a preview) judges; writes their assignments.

    Call inside the enrolment's transaction: this takes the study's lock (and checks that it is open, as
    ``places.place_confirm`` does). ``release_lapsed``: first give back the blocks of lapsed holds
    (``lapsed_holds_exist`` tells, before the lock; a hold that lapses in between is released by the next
    entry). Raises ``StudyClosed``, or ``StudyFull`` when every block already has its r judgements (either
    rolls the enrolment back).

    On PostgreSQL the lock, the choice, the counters and the assignments are one call of the function
    ``surveys_blocks_allocate`` (migration 0014): one round trip while the lock is held, since every round
    trip under it queues every newcomer behind it. The function also lets this transaction's commit skip
    the disk flush (``synchronous_commit`` off, for this transaction only), so the lock is not held across
    one: nothing durable is given up, since the participant's pages are written right after by a transaction
    that commits normally, and its flush writes this one's log first. SQLite serialises writers anyway; it
    takes the same decision in Python over the same candidates, in four queries."""
    study = participant.study
    if release_lapsed:
        lock_study(study.pk)
        _release_lapsed_holds(study)
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT surveys_blocks_allocate(%s, %s, %s, %s, %s)",
                           [study.pk, participant.pk, study.blocks_per_participant, study.judgements_per_block,
                            candidates_limit(study)])
            chosen = cursor.fetchone()[0]
        if chosen is None:
            raise StudyClosed(study.slug)
    else:
        if not lock_study(study.pk)["is_open"]:
            raise StudyClosed(study.slug)
        chosen = _next_blocks(study)
        if chosen:
            # A fresh random key places each block at random among those it now shares a count with.
            BlockTally.objects.filter(block_id__in=chosen).update(allocated=F("allocated") + 1, shuffle=Random())
            BlockAssignment.objects.bulk_create(
                BlockAssignment(study=study, participant=participant, block_id=block_id) for block_id in chosen
            )
    if not chosen:
        raise StudyFull(study.slug)
    return sorted(chosen)


def candidates_limit(study: Study) -> int:
    # Any k x (widest scenario) blocks hold at least k different scenarios.
    return study.blocks_per_participant * max(study.scenario_blocks_max, 1)


def blocks_pick(candidates: list[tuple[int, int, float, int]], k: int) -> list[int]:
    """The k blocks to give among ``candidates`` (block, count, random key, scenario), lowest counts first.

    Lowest counts first keeps every count within 1 of the others. Among blocks of one count, each scenario's
    first block comes before any scenario's second, so a participant is not given two blocks of one prompt
    when the numbers allow (a block of a scenario already taken at a lower count ranks behind the others);
    and the scenarios with the most blocks left at that count come first, so that the last blocks of a count,
    which the next participants must take, are of different prompts too. The same order as the
    ``ranked``/``picked`` steps of ``surveys_blocks_allocate`` (migration 0014)."""
    ordered = sorted(candidates, key=lambda c: (c[1], c[2]))
    left_at_count = Counter((scenario_id, allocated) for _, allocated, _, scenario_id in ordered)
    seen: Counter = Counter()
    ranked = []
    for block_id, allocated, shuffle, scenario_id in ordered:
        seen[scenario_id] += 1
        ranked.append((allocated, seen[scenario_id], -left_at_count[scenario_id, allocated], shuffle, block_id))
    return [block_id for *_, block_id in sorted(ranked)[:k]]


def _next_blocks(study: Study) -> list[int]:
    """The k blocks a newcomer gets now (``blocks_pick``), from one scan of k x (widest scenario) index
    entries: never all the study's blocks."""
    candidates = list(
        BlockTally.objects.filter(study=study, allocated__lt=study.judgements_per_block)
        .order_by("allocated", "shuffle")
        .values_list("block_id", "allocated", "shuffle", "scenario_id")[: candidates_limit(study)]
    )
    return sorted(blocks_pick(candidates, study.blocks_per_participant))


def blocks_preview(*, study: Study) -> list[int]:
    """The blocks a newcomer would be given now (the researcher's preview); writes nothing."""
    return _next_blocks(study)


def lapsed_holds_exist(*, study: Study) -> bool:
    return _lapsed_holds(study).exists()


def allocation_full(*, study: Study) -> bool:
    """A quick check without the lock, to turn newcomers away early: every block has its r, and no lapsed
    hold would give one back. ``blocks_allocate`` decides."""
    return not BlockTally.objects.filter(study=study, allocated__lt=study.judgements_per_block).exists() and not (
        _lapsed_holds(study).exists())


def pairs_allocate(*, study: Study, block_ids: list[int], rng: random.Random, record: bool) -> dict[int, list[int]]:
    """For pairwise blocks of three or more responses among ``block_ids``: the two items to show, drawn
    uniformly among the block's least-allocated pairs. ``record``: count the pairs (not for previews)."""
    tallies: dict[int, list[PairTally]] = {}
    for tally in PairTally.objects.filter(block_id__in=block_ids).order_by("pk"):
        tallies.setdefault(tally.block_id, []).append(tally)
    chosen: dict[int, PairTally] = {}
    for block_id, pairs in tallies.items():
        least = min(pair.allocated for pair in pairs)
        chosen[block_id] = rng.choice([pair for pair in pairs if pair.allocated == least])
    if record and chosen:
        PairTally.objects.filter(pk__in=[pair.pk for pair in chosen.values()]).update(allocated=F("allocated") + 1)
    return {block_id: [pair.first_id, pair.second_id] for block_id, pair in chosen.items()}


def _lapsed_holds(study: Study):
    lapsed = Participant.objects.filter(study=study, status=Participant.Status.IN_PROGRESS, hold_expires_at__lte=clock.now())
    return BlockAssignment.objects.filter(participant__in=lapsed.values("pk"), state=State.HELD)


def _release_lapsed_holds(study: Study) -> None:
    """Blocks of participants whose hold lapsed go back to the pool (a constant number of queries; the
    lapsed are found by a range scan of an index)."""
    lapsed = list(_lapsed_holds(study).values_list("pk", "participant_id", "block_id"))
    if lapsed:
        BlockAssignment.objects.filter(pk__in=[pk for pk, _, _ in lapsed]).update(state=State.RELEASED)
        _tallies_add(Counter(block_id for _, _, block_id in lapsed), sign=-1)
        _pairs_add({(participant_id, block_id) for _, participant_id, block_id in lapsed}, sign=-1)


def enrolment_undo(*, participant_id: int) -> None:
    """An enrolment whose pages could not be written: its blocks go back, the participant goes."""
    with transaction.atomic():
        assignments_release(participant_id=participant_id)
        Participant.objects.filter(pk=participant_id).delete()


def _tallies_add(by_block: Counter, *, sign: int) -> None:
    """Add ``sign`` x the count of each block to its counter, in one query."""
    if not by_block:
        return
    change = Case(*(When(block_id=block_id, then=Value(sign * n)) for block_id, n in by_block.items()),
                  output_field=IntegerField())
    BlockTally.objects.filter(block_id__in=list(by_block)).update(allocated=F("allocated") + change)


def _pairs_add(assignments: set[tuple[int, int]], *, sign: int) -> None:
    """Add ``sign`` to the counter of the pair each (participant, block) in ``assignments`` was shown, for the
    blocks that show a pair of three or more responses; three queries whatever their number (one when none
    of the blocks has pair counters)."""
    if not assignments:
        return
    pair_ids = {(block_id, first, second): pk for pk, block_id, first, second in PairTally.objects.filter(
        block_id__in={block_id for _, block_id in assignments}).values_list("pk", "block_id", "first_id", "second_id")}
    if not pair_ids:
        return
    shown: dict[tuple[int, int], list[int]] = {}
    for participant_id, block_id, item_id in ItemPlacement.objects.filter(
            visit__participant_id__in={participant_id for participant_id, _ in assignments},
            visit__block_id__in={block_id for block_id, _, _ in pair_ids}).values_list(
            "visit__participant_id", "visit__block_id", "item_id"):
        if (participant_id, block_id) in assignments:
            shown.setdefault((participant_id, block_id), []).append(item_id)
    by_pair = Counter(pair_ids.get((block_id, min(items), max(items))) for (_, block_id), items in shown.items()
                      if len(items) == 2)
    by_pair.pop(None, None)
    if by_pair:
        change = Case(*(When(pk=pk, then=Value(sign * n)) for pk, n in by_pair.items()), output_field=IntegerField())
        PairTally.objects.filter(pk__in=list(by_pair)).update(allocated=F("allocated") + change)


def _pairs_recount(study: Study) -> None:
    """Every pair counter from what was shown to participants whose assignment is not released."""
    tallies = {(t.block_id, t.first_id, t.second_id): t for t in PairTally.objects.filter(block__study=study)}
    if not tallies:
        return
    live = set(BlockAssignment.objects.filter(study=study).exclude(state=State.RELEASED)
               .values_list("participant_id", "block_id"))
    shown: dict[tuple[int, int], list[int]] = {}
    for participant_id, block_id, item_id in ItemPlacement.objects.filter(
            visit__participant__study=study, visit__participant__is_preview=False,
            visit__block_id__in={block_id for block_id, _, _ in tallies}).values_list(
            "visit__participant_id", "visit__block_id", "item_id"):
        if (participant_id, block_id) in live:
            shown.setdefault((participant_id, block_id), []).append(item_id)
    counts = Counter((block_id, min(items), max(items)) for (_, block_id), items in shown.items() if len(items) == 2)
    changed = []
    for key, tally in tallies.items():
        if tally.allocated != counts.get(key, 0):
            tally.allocated = counts.get(key, 0)
            changed.append(tally)
    PairTally.objects.bulk_update(changed, ["allocated"], batch_size=1000)


# ----------------------------------------------------------------------- later


def assignments_complete(*, participant_id: int) -> None:
    """A finisher's blocks count as judged; blocks released while they were away are claimed again."""
    rows = list(BlockAssignment.objects.filter(participant_id=participant_id).values_list("block_id", "state", "study_id"))
    if not rows:  # a study where everyone judges every block
        return
    _lock_for_counters(rows[0][2])
    states = {block_id: state for block_id, state, _ in rows}
    BlockAssignment.objects.filter(participant_id=participant_id).exclude(state=State.COMPLETED).update(state=State.COMPLETED)
    claimed = [block_id for block_id, state in states.items() if state == State.RELEASED]
    _tallies_add(Counter(claimed), sign=+1)
    _pairs_add({(participant_id, block_id) for block_id in claimed}, sign=+1)


def assignments_release(*, participant_id: int) -> None:
    """The participant left: their blocks go back to the pool."""
    rows = list(BlockAssignment.objects.filter(participant_id=participant_id).values_list("block_id", "state", "study_id"))
    if not rows:
        return
    _lock_for_counters(rows[0][2])
    states = {block_id: state for block_id, state, _ in rows}
    BlockAssignment.objects.filter(participant_id=participant_id).update(state=State.RELEASED)
    released = [block_id for block_id, state in states.items() if state != State.RELEASED]
    _tallies_add(Counter(released), sign=-1)
    _pairs_add({(participant_id, block_id) for block_id in released}, sign=-1)


def _lock_for_counters(study_id: int) -> None:
    # Counters are only changed under the study's lock: two transactions updating overlapping sets of
    # counter rows in different orders could otherwise deadlock.
    lock_study(study_id)


def released_participants(study: Study) -> Q:
    """Participants of ``study`` who hold no block: left early, hold lapsed, returned / timed out / rejected on
    the panel, or excluded by the quality rules of the latest analysis run (other than for being incomplete:
    someone still in progress is not excluded by it)."""
    latest_run = study.analysis_runs.filter(participant_results__isnull=False).order_by("-pk").values("pk")[:1]
    return (
        Q(status=Participant.Status.EXITED)
        | Q(status=Participant.Status.IN_PROGRESS, hold_expires_at__lte=clock.now())
        | Q(panel_submissions__releases_place=True)
        | Q(results__run_id=Subquery(latest_run), results__excluded_by__in=QUALITY_EXCLUSIONS)
    )


def allocation_reconcile(*, study: Study) -> None:
    """Set every assignment's state from the facts (exits, lapsed holds, panel submissions, the latest
    quality rules), and every counter from the assignments. Idempotent; takes the study's lock, as entry does.

    Run after a Prolific sync and after an analysis run's quality rules; its cost grows with the study, so
    entry does not run it."""
    if not study.allocates:
        return
    with transaction.atomic():
        lock_study(study.pk)
        released = Participant.objects.filter(study=study).filter(released_participants(study)).values("pk")
        assignments = BlockAssignment.objects.filter(study=study)
        assignments.filter(participant__in=released).exclude(state=State.RELEASED).update(state=State.RELEASED)
        kept = assignments.exclude(participant__in=released)
        kept.filter(participant__status=Participant.Status.COMPLETED).exclude(state=State.COMPLETED).update(
            state=State.COMPLETED)
        kept.filter(participant__status=Participant.Status.IN_PROGRESS).exclude(state=State.HELD).update(state=State.HELD)
        live = (
            BlockAssignment.objects.filter(block_id=OuterRef("block_id")).exclude(state=State.RELEASED)
            .order_by().values("block_id").annotate(n=Count("pk")).values("n")
        )
        BlockTally.objects.filter(study=study).update(allocated=Coalesce(Subquery(live), 0))
        _pairs_recount(study)
