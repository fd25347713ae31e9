"""The frames contract: columns, dtypes, preview participants, block order, best-worst rows."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import numpy as np
import pandas as pd
import pytest

from analysis import frames
from analysis.frames import (
    PARTICIPANT_COLUMNS_AFTER, PARTICIPANT_COLUMNS_BEFORE, RATING_COLUMNS, participants_frame, ratings_frame,
)

TIDE_DEMOGRAPHICS = ["age", "sex", "gender", "race", "hispanic", "education", "employment", "state"]
from surveys.models import AttentionCheck, BlockVisit, Dimension, Item, ItemPlacement, Participant, Rating

T0 = datetime(2025, 3, 3, 9, tzinfo=timezone.utc)


def person(study, external_id, **fields):
    return Participant.objects.create(study=study, external_id=external_id, pseudonym=f"p_{external_id}", **fields)


def visit(participant, sequence, *, block=None, check=None, seconds=30.0, passed=None):
    shown = T0 + timedelta(minutes=sequence)
    return BlockVisit.objects.create(
        participant=participant, sequence=sequence, block=block, attention_check=check, shown_at=shown,
        submitted_at=None if seconds is None else shown + timedelta(seconds=seconds), attention_passed=passed,
    )


def test_the_ratings_frame_has_the_contract_columns_and_skips_previews(tide):
    empathy = Dimension.objects.get(study=tide)
    check = AttentionCheck.objects.filter(study=tide).first()
    live = person(tide, "a", status="completed", started_at=T0, finished_at=T0 + timedelta(minutes=20),
                  completion_code="C", blocks_assigned=2, demographics={"gender": "Woman", "state": "NY"})
    preview = person(tide, "b", is_preview=True)
    q3 = tide.blocks.get(key="Q3")
    first = visit(live, 1, block=q3, seconds=12.5)
    visit(live, 2, check=check, passed=False)
    second = visit(live, 3, block=tide.blocks.get(key="Q1"), seconds=7.0)
    for v in (first, second):
        for position, item in enumerate(Item.objects.filter(block=v.block), start=1):
            placement = ItemPlacement.objects.create(visit=v, item=item, position=position, rank=6 - position)
            Rating.objects.create(placement=placement, dimension=empathy, value=position)
    hidden = visit(preview, 1, block=q3)
    placement = ItemPlacement.objects.create(visit=hidden, item=Item.objects.get(key="Q3-R1"), position=1)
    Rating.objects.create(placement=placement, dimension=empathy, value=5)

    frame = ratings_frame(tide.pk)
    assert list(frame.columns) == RATING_COLUMNS
    assert len(frame) == 10 and set(frame["participant_id"]) == {"p_a"}
    row = frame[(frame["response_id"] == "Q1-R2")].iloc[0]
    item = Item.objects.select_related("block__scenario", "system", "condition").get(study=tide, key="Q1-R2")
    assert (row["block_id"], row["scenario"], row["model"], row["condition"], row["dimension"]) == (
        "Q1", item.block.scenario.key, item.system.name, item.condition.name, "empathy")
    assert (row["position"], row["rating"], row["rank"], row["block_order"], row["seconds_on_block"]) == (2, 2.0, 4.0, 2, 7.0)
    assert frame[frame["block_id"] == "Q3"]["block_order"].unique().tolist() == [1]
    assert frame["rating"].dtype == float and frame["position"].dtype == np.int64
    assert not frame["best"].any() and not frame["worst"].any()

    people = participants_frame(tide.pk)
    assert list(people.columns) == PARTICIPANT_COLUMNS_BEFORE + TIDE_DEMOGRAPHICS + PARTICIPANT_COLUMNS_AFTER
    assert people["participant_id"].tolist() == ["p_a"]
    a = people.iloc[0]
    assert (a["attention_checks"], a["attention_failures"], a["attention_passed"]) == (1, 1, False)
    assert (a["blocks_answered"], a["duration_minutes"], a["region"]) == (2, 20.0, "Northeast")


def test_best_worst_studies_get_one_row_per_shown_response(most_least):
    p = person(most_least, "m", status="in_progress", started_at=T0, blocks_assigned=2)
    answered = visit(p, 1, block=most_least.blocks.get(key="M1"))
    unanswered = visit(p, 2, block=most_least.blocks.get(key="M2"), seconds=None)
    for v in (answered, unanswered):
        for position, item in enumerate(Item.objects.filter(block=v.block), start=1):
            choice = {1: "best", 5: "worst"}.get(position, "") if v is answered else ""
            ItemPlacement.objects.create(visit=v, item=item, position=position, choice=choice)
    frame = ratings_frame(most_least.pk)
    assert len(frame) == 5 and set(frame["block_id"]) == {"M1"}
    assert frame["dimension"].tolist() == [""] * 5 and frame["rating"].isna().all()
    assert frame["best"].tolist() == [True, False, False, False, False]
    assert frame["worst"].tolist() == [False, False, False, False, True]
    people = participants_frame(most_least.pk)
    assert people.iloc[0]["attention_passed"] is pd.NA and np.isnan(people.iloc[0]["duration_minutes"])


def test_an_empty_study_gives_empty_frames_with_the_columns(counselor):
    assert list(ratings_frame(counselor.pk).columns) == RATING_COLUMNS
    asked = list(counselor.demographic_questions.values_list("key", flat=True))
    assert list(participants_frame(counselor.pk).columns) == PARTICIPANT_COLUMNS_BEFORE + asked + PARTICIPANT_COLUMNS_AFTER
    assert ratings_frame(counselor.pk).empty and participants_frame(counselor.pk).empty


def test_quoted_csv_files_import_through_the_exact_reader(tide):
    import io

    from analysis.imports.importers import responses_import

    participants = ('participant_id,started_at,finished_at,attention_passed,age,sex,gender,race,hispanic,'
                    'education,employment,state\n"q1",2025-03-03T09:00:00Z,2025-03-03T09:20:00Z,true,,,"Woman",'
                    '"Some college, but no degree",,,,\n')
    ratings = "participant_id,block_id,response_id,position,rating,rank,block_started_at,block_submitted_at\n"
    ratings += "".join(f'"q1","Q1","Q1-R{k}",{k},{k},,2025-03-03T09:01:00Z,2025-03-03T09:02:00Z\n' for k in range(1, 6))
    with pytest.raises(Exception) as caught:
        responses_import(study=tide, participants_file=io.StringIO(participants), ratings_file=io.StringIO(ratings))
    assert "race" in str(caught.value)  # the comma inside quotes stayed in its cell
    fixed = participants.replace(',"Woman","Some college, but no degree",,,,', ',"Woman",,,"Some college, but no degree",,')
    report = responses_import(study=tide, participants_file=io.StringIO(fixed), ratings_file=io.StringIO(ratings))
    assert report.ratings_created == 5
    assert Participant.objects.get(external_id="q1").demographics["education"] == "Some college, but no degree"


@pytest.mark.parametrize("ids", [[3, 4, 5, 9], [9, 3, 5, 4], [3, 10_000_000, 20_000_000], [20_000_000, 3, 10_000_000]],
                         ids=["lookup table", "lookup table, unsorted", "binary search", "binary search, unsorted"])
def test_positions_finds_each_id_and_marks_the_absent_ones(ids):
    id_array = np.array(ids, dtype=np.int64)
    values = np.array([ids[-1], 1, ids[0], ids[1], 7, 30_000_000], dtype=np.int64)
    expected = [list(ids).index(v) if v in ids else -1 for v in values]
    assert frames._positions(id_array, values).tolist() == expected
    assert frames._positions(id_array[:0], values).tolist() == [-1] * len(values)
