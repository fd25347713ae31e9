"""block_order, seconds_on_block, rank_changed and attention_passed: one definition (analysis.derived), read the
same by the analysis frames, the exports and the API, checked against the stored rows themselves."""

from __future__ import annotations

import csv
import io

import numpy as np
import pandas as pd
import pytest

from analysis.frames import participants_frame, ratings_frame
from analysis.imports.importers import gold_import, responses_import
from analysis.models import ParticipantResult
from surveys.models import BlockVisit, ItemPlacement, Participant
from tests.support.quality_data import live_participants_create, planted_files, planted_population
from tests.support.researcher import fill_with_bots, finished_run



def _csv(response) -> list[dict]:
    assert response.status_code == 200, response.status_code
    return list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))


def _api_ratings(owner_api, slug: str) -> list[dict]:
    rows, url = [], f"/api/studies/{slug}/ratings/"
    while url:
        body = owner_api.get(url).json()
        rows += body["results"]
        url = body["next"]
    return rows


def _truth(study) -> dict[tuple[str, str], tuple[int, float | None]]:
    """(pseudonym, block key) -> (block_order, seconds_on_block), counted here from the visit rows."""
    truth, order = {}, {}
    visits = BlockVisit.objects.filter(participant__study=study, participant__is_preview=False).order_by(
        "participant_id", "sequence").select_related("participant", "block")
    for v in visits:
        if v.block is None:
            continue  # an attention check: not a block
        order[v.participant_id] = order.get(v.participant_id, 0) + 1
        seconds = (v.submitted_at - v.shown_at).total_seconds() if v.shown_at and v.submitted_at else None
        truth[(v.participant.pseudonym, v.block.key)] = (order[v.participant_id], seconds)
    return truth


def _rank_truth(study) -> dict[tuple[str, str], bool | None]:
    """(pseudonym, block key) -> rank_changed, read here from the placements: None without ranks."""
    truth = {}
    placements = ItemPlacement.objects.filter(
        visit__participant__study=study, visit__participant__is_preview=False, visit__block__isnull=False,
    ).values_list("visit__participant__pseudonym", "visit__block__key", "position", "rank")
    for pseudonym, block, position, rank in placements:
        key = (pseudonym, block)
        if rank is not None:
            truth[key] = truth.get(key) is True or rank != position
        else:
            truth.setdefault(key, None)
    return truth


def _checks_between_blocks(study) -> set[str]:
    """Pseudonyms of participants who completed the study and saw an attention check between two blocks."""
    found = set()
    for p in Participant.objects.filter(study=study, is_preview=False, status=Participant.Status.COMPLETED):
        kinds = list(BlockVisit.objects.filter(participant=p, submitted_at__isnull=False).order_by("sequence")
                     .values_list("block_id", flat=True))
        if any(kinds[i] is None and kinds[i - 1] and kinds[i + 1] for i in range(1, len(kinds) - 1)):
            found.add(p.pseudonym)
    return found


def _seconds(text: str) -> float | None:
    return float(text) if text else None


def _nan_none(value) -> float | None:
    return None if value is None or value != value else float(value)


@pytest.mark.parametrize("fixture", ["tide", "counselor", "most_least"])
def test_the_api_ratings_csv_and_the_frame_agree_on_block_order_seconds_and_rank_changed(
        request, fixture, owner, owner_api, quick_stats):
    study = request.getfixturevalue(fixture)
    study.owners.add(owner)
    fill_with_bots(study, 12, seed=3)
    run = finished_run(study)
    truth, ranks = _truth(study), _rank_truth(study)
    frame = ratings_frame(study.pk)
    assert len(frame)
    changed = [None if value is pd.NA else bool(value) for value in frame["rank_changed"]]
    if study.ranking_enabled:  # the bots rank both ways: some keep the order shown, most do not
        assert set(changed) == {True, False}
    else:
        assert set(changed) == {None}
    assert changed == [ranks[(row.participant_id, row.block_id)] for row in frame.itertuples()]

    # The analysis frame: every row carries its block's order and time.
    for row in frame.itertuples():
        assert (row.block_order, _nan_none(row.seconds_on_block)) == truth[(row.participant_id, row.block_id)]

    # ratings.csv: exactly the frame's rows of the retained participants, in the frame's order.
    exported = _csv(owner_api.get(f"/api/studies/{study.slug}/exports/ratings.csv"))
    retained = set(ParticipantResult.objects.filter(run=run, excluded_by="").values_list("participant__pseudonym",
                                                                                         flat=True))
    kept = frame[frame["participant_id"].isin(retained)]
    assert len(exported) == len(kept) > 0
    for row, frame_row in zip(exported, kept.itertuples()):
        assert (row["participant_id"], row["response_id"], row["block_id"]) == (
            frame_row.participant_id, frame_row.response_id, frame_row.block_id)
        assert (int(row["block_order"]), _seconds(row["seconds_on_block"])) == (
            frame_row.block_order, _nan_none(frame_row.seconds_on_block))
        assert row["position"] == str(frame_row.position)
        assert row["rating"] == ("" if np.isnan(frame_row.rating) else str(int(frame_row.rating)))
        assert row["rank"] == ("" if np.isnan(frame_row.rank) else str(int(frame_row.rank)))
        assert row.get("dimension", frame_row.dimension) == frame_row.dimension
        assert row["rank_changed"] == {None: "", True: "true", False: "false"}[
            ranks[(frame_row.participant_id, frame_row.block_id)]]
    assert ("dimension" in exported[0]) == (study.dimensions.count() > 1)

    # The API: every rating (retained or not) with the same two columns.
    listed = _api_ratings(owner_api, study.slug)
    assert len(listed) == int(frame["rating"].notna().sum())  # a best-worst study has no ratings to list
    for row in listed:
        assert (row["block_order"], row["seconds_on_block"]) == truth[(row["participant_id"], row["block_id"])]
        assert row["rank_changed"] == ranks[(row["participant_id"], row["block_id"])]

    # The case that used to differ: a check between two blocks does not count as a block.
    with_checks = _checks_between_blocks(study)
    if fixture != "most_least":  # the most-least study has no attention checks
        assert with_checks
        seen = frame[frame["participant_id"].isin(with_checks)]
        assert seen.groupby("participant_id", observed=True)["block_order"].max().tolist() == [
            study.blocks.count()] * len(with_checks)
        assert any(r["participant_id"] in with_checks and r["block_order"] == study.blocks.count() for r in listed)


def test_a_best_worst_study_exports_the_rows_of_its_frame(most_least, owner, owner_api, quick_stats):
    most_least.owners.add(owner)
    fill_with_bots(most_least, 8, seed=5)
    finished_run(most_least)
    exported = _csv(owner_api.get(f"/api/studies/{most_least.slug}/exports/ratings.csv"))
    assert exported and all(row["rating"] == "" and row["rank"] == "" for row in exported)
    assert list(exported[0]) == ["participant_id", "block_id", "scenario", "response_id", "model", "condition",
                                 "position", "rating", "rank", "block_order", "seconds_on_block", "rank_changed"]
    assert all(row["rank_changed"] == "" for row in exported)  # no ranking, so no rank to change
    # Every response shown in a submitted block, five per block.
    per_block = pd.DataFrame(exported).groupby(["participant_id", "block_id"]).size()
    assert set(per_block) == {5}


def test_the_ratings_of_a_live_participant_with_checks_between_blocks(tide, owner, owner_api, quick_stats):
    tide.owners.add(owner)
    people = [p for p in planted_population(n_honest=2) if p.live]
    live_participants_create(tide, people)
    finished_run(tide)
    honest = Participant.objects.get(study=tide, external_id="live_honest")
    # Checks after the 8th and 16th blocks: sequences 9 and 18 are checks.
    blocks = list(BlockVisit.objects.filter(participant=honest, block__isnull=False).order_by("sequence")
                  .values_list("block__key", "sequence"))
    assert [s for _, s in blocks][7:10] == [8, 10, 11] and blocks[-1][1] == 26

    listed = [r for r in _api_ratings(owner_api, tide.slug) if r["participant_id"] == honest.pseudonym]
    api_order = {r["block_id"]: r["block_order"] for r in listed}
    assert api_order == {key: n for n, (key, _) in enumerate(blocks, start=1)}
    exported = _csv(owner_api.get(f"/api/studies/{tide.slug}/exports/ratings.csv"))
    csv_order = {r["block_id"]: int(r["block_order"]) for r in exported if r["participant_id"] == honest.pseudonym}
    assert csv_order == api_order
    frame = ratings_frame(tide.pk)
    mine = frame[frame["participant_id"] == honest.pseudonym]
    assert dict(zip(mine["block_id"].astype(str), mine["block_order"].tolist())) == api_order
    assert {r["seconds_on_block"] for r in listed} == {40.0} == set(mine["seconds_on_block"])


def test_attention_passed_agrees_between_participants_csv_and_the_frame(tide, owner, owner_api, quick_stats):
    tide.owners.add(owner)
    people = planted_population(n_honest=4)
    files = planted_files(people)
    responses_import(study=tide, participants_file=io.StringIO(files.participants_csv),
                     ratings_file=io.StringIO(files.ratings_csv))
    gold_import(study=tide, gold_file=io.StringIO(files.gold_csv))
    live_participants_create(tide, people)
    finished_run(tide)

    exported = {r["participant_id"]: r["attention_passed"] for r in
                _csv(owner_api.get(f"/api/studies/{tide.slug}/exports/participants.csv"))}
    frame = participants_frame(tide.pk).set_index("participant_id")["attention_passed"]
    assert set(exported) == set(frame.index)
    cell = {True: "true", False: "false"}
    assert exported == {pseudonym: "" if passed is pd.NA else cell[bool(passed)] for pseudonym, passed in frame.items()}

    # Both are the planted truth: imported outcomes as given, live ones from their checks.
    by_external = dict(Participant.objects.filter(study=tide).values_list("external_id", "pseudonym"))
    for p in people:
        checks_answered = sum(b < p.blocks_answered for b in (7, 15))  # live checks follow the 8th and 16th block
        expected = p.attention if not p.live else "" if not checks_answered else "false" if p.failed_checks else "true"
        assert exported[by_external[p.external_id]] == expected, p.external_id
    assert {"true", "false", ""} == set(exported.values())


def test_a_frame_of_some_participants_is_the_full_frame_restricted_to_them(counselor):
    fill_with_bots(counselor, 6, seed=7)
    ids = list(Participant.objects.filter(study=counselor).order_by("id").values_list("id", "pseudonym"))
    some = [ids[1], ids[4]]
    full = ratings_frame(counselor.pk)
    part = ratings_frame(counselor.pk, participant_ids=[pk for pk, _ in some])
    expected = full[full["participant_id"].isin([pseudonym for _, pseudonym in some])]
    assert len(part) == len(expected) > 0
    pd.testing.assert_frame_equal(part.astype({c: str for c in part.columns[:7]}).reset_index(drop=True),
                                  expected.astype({c: str for c in part.columns[:7]}).reset_index(drop=True))
    assert ratings_frame(counselor.pk, participant_ids=[]).empty


def test_ratings_csv_is_the_same_whatever_the_number_of_participants_per_frame(counselor, owner, owner_api, quick_stats,
                                                                                monkeypatch):
    from analysis.exporting import exports

    counselor.owners.add(owner)
    fill_with_bots(counselor, 9, seed=8)
    finished_run(counselor)
    url = f"/api/studies/{counselor.slug}/exports/ratings.csv"
    whole = _csv(owner_api.get(url))
    monkeypatch.setattr(exports, "_PARTICIPANTS_PER_FRAME", 2)
    monkeypatch.setattr(exports, "_ROWS_PER_BATCH", 7)
    assert _csv(owner_api.get(url)) == whole and len(whole) > 7
