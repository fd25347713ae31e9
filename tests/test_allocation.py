"""Allocation (issue 25, item 4): each participant judges k blocks until every block has r judgements.

Counts are checked against what is stored (visits and assignments), not against the counters alone.
"""

from __future__ import annotations

import random
from collections import Counter
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from surveys import allocation, services
from surveys.definition import DefinitionError, parse_definition
from surveys.loader import study_load
from surveys.models import BlockAssignment, BlockTally, BlockVisit, ItemPlacement, PairTally, Participant
from surveys.places import StudyFull
from tests.support.generated_outputs import definition_from_outputs, outputs_rows, without_sample
from tests.support.threads import in_threads
from web import clock

pytestmark = pytest.mark.django_db


def _load(**options):
    definition = definition_from_outputs(outputs_rows(options.pop("n_prompts", 12)), **options)
    return study_load(definition=parse_definition(without_sample(definition))).study


def _enrol(study, n: int, *, start: int = 0) -> list[Participant]:
    return [services.participant_enroll(study=study, external_id=f"{i:024x}", seed=i) for i in range(start, start + n)]


def _live_counts(study) -> Counter:
    """Participants each block is allocated to now, from the assignments (not the counters)."""
    counts = Counter({block_id: 0 for block_id in study.blocks.values_list("pk", flat=True)})
    counts.update(BlockAssignment.objects.filter(study=study).exclude(state="released").values_list("block_id", flat=True))
    return counts


def _visited_blocks(participant) -> list[int]:
    return list(BlockVisit.objects.filter(participant=participant, block__isnull=False).values_list("block_id", flat=True))


# --- the definition ---------------------------------------------------------------------------------


def test_the_target_follows_from_r_blocks_and_k():
    study = _load(allocation={"blocks_per_participant": 5, "judgements_per_block": 3})
    assert (study.blocks_per_participant, study.judgements_per_block) == (5, 3)
    assert study.target_completions == 8  # 3 x 12 / 5 = 7.2, rounded up
    assert BlockTally.objects.filter(study=study, allocated=0).count() == 12


def test_all_is_the_default_and_keeps_every_block_for_everyone():
    study = _load()
    assert study.definition["allocation"] == "all" and not study.allocates
    (participant,) = _enrol(study, 1)
    assert sorted(_visited_blocks(participant)) == sorted(study.blocks.values_list("pk", flat=True))
    assert not BlockAssignment.objects.exists() and not BlockTally.objects.exists()


def test_k_larger_than_the_number_of_blocks_is_refused_with_its_path():
    data = definition_from_outputs(outputs_rows(6), allocation={"blocks_per_participant": 7, "judgements_per_block": 2})
    with pytest.raises(DefinitionError) as refused:
        parse_definition(data)
    assert refused.value.problems == ["allocation.blocks_per_participant: 7 is more than the study's 6 blocks"]


def test_an_r_the_target_cannot_reach_is_refused_with_its_path():
    data = definition_from_outputs(outputs_rows(12), allocation={"blocks_per_participant": 4, "judgements_per_block": 3},
                                   recruitment={"mode": "panel", "completion_code": "GENERATED1", "target_completions": 8})
    with pytest.raises(DefinitionError) as refused:
        parse_definition(data)
    (problem,) = refused.value.problems
    assert problem.startswith("allocation.judgements_per_block: 3 judgements of each of 12 blocks, 4 per participant, "
                              "need 9 completions; recruitment.target_completions is 8")


def test_a_target_beyond_what_the_allocation_needs_is_refused():
    data = definition_from_outputs(outputs_rows(12), allocation={"blocks_per_participant": 4, "judgements_per_block": 3},
                                   recruitment={"mode": "panel", "completion_code": "GENERATED1", "target_completions": 10})
    with pytest.raises(DefinitionError, match=r"recruitment.target_completions: 10 is more than the allocation needs"):
        parse_definition(data)


@pytest.mark.parametrize("allocation_value", [{"blocks_per_participant": 0, "judgements_per_block": 2}, "some",
                                               {"blocks_per_participant": 2}])
def test_a_malformed_allocation_is_refused_with_its_path(allocation_value):
    data = definition_from_outputs(outputs_rows(6), allocation=allocation_value)
    with pytest.raises(DefinitionError) as refused:
        parse_definition(data)
    assert all(p.startswith("allocation") for p in refused.value.problems), refused.value.problems


def test_the_allocation_is_frozen_once_a_participant_answered():
    from surveys.loader import StudyLocked

    study = _load(allocation={"blocks_per_participant": 3, "judgements_per_block": 2})
    _enrol(study, 1)
    changed = definition_from_outputs(outputs_rows(12), allocation={"blocks_per_participant": 4, "judgements_per_block": 2})
    with pytest.raises(StudyLocked, match="allocation"):
        study_load(definition=parse_definition(changed))


# --- entry ----------------------------------------------------------------------------------------


def test_each_newcomer_gets_k_blocks_and_counts_stay_within_one_until_every_block_has_r():
    study = _load(allocation={"blocks_per_participant": 5, "judgements_per_block": 3})  # 12 blocks, target 8
    for i in range(8):
        (participant,) = _enrol(study, 1, start=i)
        counts = _live_counts(study)
        assert max(counts.values()) - min(counts.values()) <= 1, (i, counts)
        blocks = _visited_blocks(participant)
        # The last one gets the 1 block still short of r (3 x 12 = 7 x 5 + 1) rather than push others past r.
        assert len(blocks) == len(set(blocks)) == (5 if i < 7 else 1)
        assert set(blocks) == set(BlockAssignment.objects.filter(participant=participant).values_list("block_id", flat=True))
    assert set(_live_counts(study).values()) == {3}
    assert dict(BlockTally.objects.filter(study=study).values_list("block_id", "allocated")) == dict(_live_counts(study))
    with pytest.raises(StudyFull):
        _enrol(study, 1, start=99)
    assert not Participant.objects.filter(external_id=f"{99:024x}").exists()


def test_blocks_are_drawn_among_the_least_allocated_so_pairs_of_blocks_meet_evenly():
    """Ties are drawn at random: over many participants every pair of blocks is judged together about
    equally often (here 8 blocks, 2 each, 4 judgements per block: each of the 28 pairs expected 4/7 times)."""
    study = _load(n_prompts=8, allocation={"blocks_per_participant": 2, "judgements_per_block": 70})
    participants = _enrol(study, 280)
    together = Counter(frozenset(_visited_blocks(p)) for p in participants)
    assert len(together) == 28  # every pair of blocks occurs
    # Expected 10 per pair; a pairing that always took neighbours would leave most pairs at 0.
    assert max(together.values()) <= 22


def test_positions_are_counterbalanced_and_checks_inserted_as_today():
    study = _load(n_prompts=6, allocation={"blocks_per_participant": 3, "judgements_per_block": 8})
    participants = _enrol(study, 16)
    for participant in participants:
        pages = list(participant.visits.order_by("sequence").values_list("block_id", "attention_check_id"))
        assert [block is None for block, _ in pages].count(True) == 1  # the one check, between blocks
        assert pages[0][0] is not None and pages[-1][0] is not None
    firsts = Counter(ItemPlacement.objects.filter(position=1).values_list("item_id", flat=True))
    # Each block was shown 8 times with 4 responses: each response first exactly twice (a Latin square).
    assert set(firsts.values()) == {2} and len(firsts) == 24


# PostgreSQL (surveys.enrolment_pg): one call of surveys_participant_enrol (the withdrawal and lapsed-hold
# checks, the participant, the lock and allocation), the items with their first positions, then one statement
# for the pages; inside the test's transaction the call also takes a savepoint and releases it.
# SQLite: three quick checks before the lock, whether this panel id withdrew earlier, the participant, the
# allocation (lock, candidates, counters, assignments), then the pages (blocks, checks, items, first positions,
# visits, placements, blocks_assigned); savepoints count too.
ENTRY_QUERIES = {"postgresql": 5, "sqlite": 20}


def test_entry_is_a_constant_number_of_queries_whatever_the_size_of_the_study():
    small = _load(slug="small", n_prompts=6, allocation={"blocks_per_participant": 3, "judgements_per_block": 40})
    large = _load(slug="large", n_prompts=60, allocation={"blocks_per_participant": 3, "judgements_per_block": 40})
    _enrol(large, 30, start=1000)
    _enrol(small, 1, start=2000)  # this process has read both studies' attention checks (surveys.study_content)
    counted = []
    for study, start in ((small, 0), (large, 0), (large, 500)):
        with CaptureQueriesContext(connection) as queries:
            _enrol(study, 1, start=start + 1)
        counted.append([q["sql"] for q in queries.captured_queries])
    assert [len(c) for c in counted] == [ENTRY_QUERIES[connection.vendor]] * 3
    if connection.vendor == "postgresql":
        # The counters are read and written by the function only, and the pages are one statement.
        assert [q.split()[0] for q in counted[2]] == ["SAVEPOINT", "SELECT", "RELEASE", "SELECT", "WITH"]
        assert "surveys_participant_enrol" in counted[2][1]
        assert not any("surveys_blocktally" in q for q in counted[2])


# --- release --------------------------------------------------------------------------------------


def test_leaving_early_gives_the_blocks_to_the_next_newcomer():
    study = _load(n_prompts=6, allocation={"blocks_per_participant": 3, "judgements_per_block": 1})  # target 2
    first, second = _enrol(study, 2)
    services.participant_exit(participant_id=first.pk)
    assert set(BlockAssignment.objects.filter(participant=first).values_list("state", flat=True)) == {"released"}
    (third,) = _enrol(study, 1, start=2)
    assert set(_visited_blocks(third)) == set(_visited_blocks(first))
    assert set(_live_counts(study).values()) == {1}


def test_a_lapsed_hold_releases_its_blocks_at_the_next_entry():
    study = _load(n_prompts=6, allocation={"blocks_per_participant": 3, "judgements_per_block": 1})
    first, _ = _enrol(study, 2)
    Participant.objects.filter(pk=first.pk).update(hold_expires_at=clock.now() - timedelta(seconds=1))
    (third,) = _enrol(study, 1, start=2)
    assert set(_visited_blocks(third)) == set(_visited_blocks(first))
    assert BlockAssignment.objects.filter(participant=first, state="released").count() == 3


def test_a_participant_who_finishes_after_their_blocks_were_released_claims_them_again():
    study = _load(n_prompts=6, allocation={"blocks_per_participant": 3, "judgements_per_block": 1})
    (first,) = _enrol(study, 1)
    allocation.assignments_release(participant_id=first.pk)  # as a lapse would
    assert sum(_live_counts(study).values()) == 0
    allocation.assignments_complete(participant_id=first.pk)
    assert set(BlockAssignment.objects.filter(participant=first).values_list("state", flat=True)) == {"completed"}
    assert sum(BlockTally.objects.filter(study=study).values_list("allocated", flat=True)) == 3


def test_exclusion_by_the_quality_rules_and_a_returned_submission_release_blocks_on_reconcile():
    from analysis.models import AnalysisRun, ParticipantResult
    from prolific.models import PanelStudy, PanelSubmission

    study = _load(n_prompts=6, allocation={"blocks_per_participant": 2, "judgements_per_block": 2})  # target 6
    excluded, returned, kept = _enrol(study, 3)
    Participant.objects.filter(pk=excluded.pk).update(status="completed", finished_at=clock.now())
    allocation.assignments_complete(participant_id=excluded.pk)
    older = AnalysisRun.objects.create(study=study, status="done", finished_at=clock.now())
    ParticipantResult.objects.create(run=older, participant=kept, excluded_by="speed")  # an older run's verdict
    run = AnalysisRun.objects.create(study=study, status="done", finished_at=clock.now())
    ParticipantResult.objects.create(run=run, participant=excluded, excluded_by="straightlining")
    ParticipantResult.objects.create(run=run, participant=kept, excluded_by="incomplete")  # still in progress
    panel = PanelStudy.objects.create(study=study, prolific_id="p1", status="ACTIVE", reward_cents=100, estimated_minutes=5,
                                      places=6, screened_out_code="SO", failed_checks_code="FC")
    PanelSubmission.objects.create(panel_study=panel, submission_id="s1", panel_participant_id=returned.external_id,
                                   participant=returned, status="RETURNED", releases_place=True)
    allocation.allocation_reconcile(study=study)
    states = dict(BlockAssignment.objects.values_list("participant_id", "state").distinct())
    assert states == {excluded.pk: "released", returned.pk: "released", kept.pk: "held"}
    assert dict(BlockTally.objects.filter(study=study).values_list("block_id", "allocated")) == dict(_live_counts(study))
    assert sum(_live_counts(study).values()) == 2
    # The excluded finisher's place is free again for the newcomer who judges those blocks.
    assert len(_enrol(study, 5, start=10)) == 5


# --- pairwise with three or more systems ----------------------------------------------------------


def test_pairwise_blocks_of_four_systems_show_a_pair_drawn_among_the_least_allocated():
    study = _load(n_prompts=3, pairwise=True, allocation={"blocks_per_participant": 3, "judgements_per_block": 30})
    assert PairTally.objects.count() == 3 * 6
    participants = _enrol(study, 30)
    for participant in participants:
        for visit in participant.visits.filter(block__isnull=False):
            assert visit.placements.count() == 2
    items_by_visit: dict[int, tuple[int, set[int]]] = {}
    for visit_id, block_id, item_id in ItemPlacement.objects.values_list("visit_id", "visit__block_id", "item_id"):
        items_by_visit.setdefault(visit_id, (block_id, set()))[1].add(item_id)
    shown = Counter((block_id, frozenset(items)) for block_id, items in items_by_visit.values())
    for block in study.blocks.all():
        per_pair = [n for (block_id, _), n in shown.items() if block_id == block.pk]
        assert len(per_pair) == 6 and sum(per_pair) == 30 and max(per_pair) - min(per_pair) <= 1
    # The counters agree with what was shown.
    assert sorted(PairTally.objects.values_list("allocated", flat=True)) == sorted(shown.values())


def test_the_pair_ignores_earlier_answers():
    """Answers of earlier participants change nothing in the draw: the same seeds draw the same pairs."""
    study = _load(n_prompts=2, pairwise=True, allocation={"blocks_per_participant": 2, "judgements_per_block": 12})
    rng = random.Random(5)
    first = allocation.pairs_allocate(study=study, block_ids=list(study.blocks.values_list("pk", flat=True)),
                                      rng=random.Random(1), record=False)
    for participant in _enrol(study, 2):
        for visit in participant.visits.filter(block__isnull=False):
            services.visit_mark_shown(visit_id=visit.pk)
            services.block_answer_submit(participant_id=participant.pk, visit_id=visit.pk,
                                         answers=services.PageAnswers(by_type={"pairwise": rng.choice(["left", "right"])}))
    PairTally.objects.update(allocated=0)
    again = allocation.pairs_allocate(study=study, block_ids=list(study.blocks.values_list("pk", flat=True)),
                                      rng=random.Random(1), record=False)
    assert again == first


# --- concurrency ----------------------------------------------------------------------------------


@pytest.mark.slow(reason="twenty concurrent newcomers on a transactional database")
def test_twenty_newcomers_at_once_keep_block_counts_within_one(transactional_db):
    """Real connections (PostgreSQL: the study row's lock; SQLite: IMMEDIATE transactions)."""
    study = _load(n_prompts=30, allocation={"blocks_per_participant": 4, "judgements_per_block": 8})  # target 60
    for wave in range(3):
        in_threads(20, lambda i: services.participant_enroll(study=study, external_id=f"{wave:02d}{i:022x}", seed=i))
        counts = _live_counts(study)
        assert max(counts.values()) - min(counts.values()) <= 1, counts
        assert sum(counts.values()) == 20 * 4 * (wave + 1)
    assert set(_live_counts(study).values()) == {8}
    assert dict(BlockTally.objects.filter(study=study).values_list("block_id", "allocated")) == dict(_live_counts(study))


# --- the hooks that release: a Prolific sync and an analysis run's quality rules ------------------


def test_a_sync_that_finds_a_returned_submission_gives_its_blocks_back(prolific):
    from prolific import services as panel_services
    from prolific.models import PanelStudy

    study = _load(n_prompts=6, allocation={"blocks_per_participant": 3, "judgements_per_block": 1})  # target 2
    first, second = _enrol(study, 2)
    panel = PanelStudy.objects.create(study=study, prolific_id="p1", status="ACTIVE", reward_cents=100,
                                      estimated_minutes=5, places=2, screened_out_code="SO", failed_checks_code="FC")
    prolific.studies["p1"] = {"id": "p1", "status": "ACTIVE"}
    prolific.add_submission("p1", first.external_id, "RETURNED")
    prolific.add_submission("p1", second.external_id, "ACTIVE")
    panel_services.panel_submissions_sync(panel=panel)
    assert BlockAssignment.objects.filter(participant=first, state="released").count() == 3
    (third,) = _enrol(study, 1, start=2)
    assert set(_visited_blocks(third)) == set(_visited_blocks(first))


def test_an_analysis_run_that_excludes_finishers_gives_their_blocks_back(quick_stats):
    from tests.support.researcher import fill_with_bots, finished_run

    # Three blocks take a few minutes: every finisher is under the 10-minute minimum, so excluded as too fast.
    study = _load(n_prompts=6, allocation={"blocks_per_participant": 3, "judgements_per_block": 2})  # target 4
    fill_with_bots(study, 4, seed=5, mix={"honest": 1.0})
    assert set(_live_counts(study).values()) == {2}
    with pytest.raises(StudyFull):
        _enrol(study, 1, start=50)
    run = finished_run(study)
    assert set(run.participant_results.values_list("excluded_by", flat=True)) == {"duration"}
    assert set(_live_counts(study).values()) == {0}
    assert len(_enrol(study, 4, start=60)) == 4  # their places and blocks went to newcomers
    assert set(_live_counts(study).values()) == {2}


def test_a_preview_is_given_the_blocks_a_newcomer_would_get_and_allocates_nothing():
    study = _load(n_prompts=6, allocation={"blocks_per_participant": 3, "judgements_per_block": 2})
    (first,) = _enrol(study, 1)
    preview = services.participant_enroll(study=study, external_id="preview-1", is_preview=True, seed=3)
    shown = set(_visited_blocks(preview))
    assert len(shown) == 3 and not shown & set(_visited_blocks(first))  # the least allocated: the other three
    assert not BlockAssignment.objects.filter(participant=preview).exists()
    assert sum(BlockTally.objects.filter(study=study).values_list("allocated", flat=True)) == 3


def test_the_first_participants_are_not_given_neighbouring_blocks_together():
    """Blocks of one prompt often follow each other in the definition; ties start in random order."""
    study = _load(n_prompts=40, allocation={"blocks_per_participant": 4, "judgements_per_block": 1})
    order = dict(study.blocks.values_list("pk", "order"))
    windows = 0
    for participant in _enrol(study, 10):
        positions = sorted(order[block] for block in _visited_blocks(participant))
        windows += positions == list(range(positions[0], positions[0] + 4))
    assert windows <= 2  # in definition order, all 10 would be runs of 4 neighbours


# --- pair counters follow releases; one prompt per participant ------------------------------------


def _shown_pairs(participant) -> Counter:
    """(block, first item, second item) of each pair ``participant`` was shown, from the stored placements."""
    items: dict[int, list[int]] = {}
    for visit_id, block_id, item_id in ItemPlacement.objects.filter(visit__participant=participant).values_list(
            "visit_id", "visit__block_id", "item_id"):
        items.setdefault((visit_id, block_id), []).append(item_id)
    return Counter((block_id, min(ids), max(ids)) for (_, block_id), ids in items.items())


def _pair_counts(study) -> Counter:
    return Counter({(block_id, first, second): n for block_id, first, second, n in PairTally.objects.filter(
        block__study=study).values_list("block_id", "first_id", "second_id", "allocated") if n})


def test_pair_counters_go_down_when_blocks_are_released_and_up_when_claimed_again():
    study = _load(n_prompts=3, pairwise=True, allocation={"blocks_per_participant": 3, "judgements_per_block": 6})
    leaver, lapsed, stayer = _enrol(study, 3)
    assert _pair_counts(study) == _shown_pairs(leaver) + _shown_pairs(lapsed) + _shown_pairs(stayer)
    services.participant_exit(participant_id=leaver.pk)
    assert _pair_counts(study) == _shown_pairs(lapsed) + _shown_pairs(stayer)
    Participant.objects.filter(pk=lapsed.pk).update(hold_expires_at=clock.now() - timedelta(seconds=1))
    (newcomer,) = _enrol(study, 1, start=3)  # the next entry releases the lapsed hold
    assert _pair_counts(study) == _shown_pairs(stayer) + _shown_pairs(newcomer)
    allocation.assignments_complete(participant_id=lapsed.pk)  # finished after all: their pairs count again
    assert _pair_counts(study) == _shown_pairs(lapsed) + _shown_pairs(stayer) + _shown_pairs(newcomer)
    # Reconcile finds the same from the facts (the lapsed participant's hold lapsed: released again).
    PairTally.objects.update(allocated=7)
    allocation.allocation_reconcile(study=study)
    assert _pair_counts(study) == _shown_pairs(stayer) + _shown_pairs(newcomer)


def test_a_participant_is_not_given_two_blocks_of_one_prompt_when_the_numbers_allow():
    """Each prompt in 4 blocks (as TIDE shows each scenario four times), 10 prompts, 5 blocks each: every
    participant can get 5 different prompts, and does, while counts stay within 1."""
    study = _load(n_prompts=10, blocks_per_prompt=4, allocation={"blocks_per_participant": 5, "judgements_per_block": 3})
    assert study.scenario_blocks_max == 4
    scenario = dict(study.blocks.values_list("pk", "scenario_id"))
    for i in range(study.target_completions):
        (participant,) = _enrol(study, 1, start=i)
        prompts = [scenario[block] for block in _visited_blocks(participant)]
        assert len(prompts) == len(set(prompts)), (i, prompts)
        counts = _live_counts(study)
        assert max(counts.values()) - min(counts.values()) <= 1
    assert set(_live_counts(study).values()) == {3}


def test_when_the_numbers_do_not_allow_counts_within_one_come_first():
    """2 prompts x 4 blocks, 3 blocks each: someone must get two blocks of a prompt; still at most 2 of one."""
    study = _load(n_prompts=2, blocks_per_prompt=4, allocation={"blocks_per_participant": 3, "judgements_per_block": 3})
    scenario = dict(study.blocks.values_list("pk", "scenario_id"))
    for participant in _enrol(study, study.target_completions):
        prompts = Counter(scenario[block] for block in _visited_blocks(participant))
        assert max(prompts.values()) <= 2
        counts = _live_counts(study)
        assert max(counts.values()) - min(counts.values()) <= 1


def test_the_blocks_pick_takes_lowest_counts_first_then_one_block_per_prompt():
    # (block, count, random key, scenario), in no particular order.
    candidates = [(1, 0, 0.1, 10), (2, 0, 0.2, 10), (3, 0, 0.3, 11), (4, 1, 0.0, 12), (5, 1, 0.5, 10), (6, 1, 0.4, 13)]
    assert allocation.blocks_pick(candidates, 2) == [1, 3]  # not 1 and 2: same prompt
    assert allocation.blocks_pick(candidates, 3) == [1, 3, 2]  # all of count 0 first, even of one prompt
    assert allocation.blocks_pick(candidates, 4) == [1, 3, 2, 4]  # then prompts not yet taken
    assert allocation.blocks_pick(candidates, 6) == [1, 3, 2, 4, 6, 5]
    # Among first blocks, the prompts with the most blocks left at that count first (here prompt 20), so that
    # the blocks left for the next participants are of different prompts.
    balanced = [(1, 0, 0.9, 20), (2, 0, 0.8, 20), (3, 0, 0.7, 20), (4, 0, 0.1, 21), (5, 0, 0.2, 22)]
    assert allocation.blocks_pick(balanced, 2) == [3, 4]
