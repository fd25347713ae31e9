"""The pure quality functions on small hand-made frames: boundaries and invariants."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from analysis import quality
from tests.support import stats_data as data

THRESHOLDS = {
    "duration_min_minutes": 10.0, "duration_max_minutes": 75.0, "fast_block_seconds": 10.0,
    "fast_share_max": 0.25, "straightline_sd_max": 0.6, "straightline_mae_min": 0.9,
    "attention_failures_allowed": 0,
}
T0 = pd.Timestamp("2025-01-01 09:00", tz="UTC")


def participants_from_rows(rows: list[dict]) -> pd.DataFrame:
    base = {
        "external_id": "x", "status": "completed", "attention_passed": True, "attention_failures": 0,
        "attention_checks": 1, "age": "", "sex": "", "gender": "Woman", "race": "", "hispanic": "",
        "education": "", "employment": "", "state": "", "region": "", "blocks_assigned": 1,
        "blocks_answered": 1, "completion_code": "C",
    }
    out = []
    for row in rows:
        minutes = row.pop("minutes", 30.0)
        record = {**base, "started_at": T0, "finished_at": pd.NaT if minutes is None else T0 + pd.Timedelta(minutes=minutes),
                  "duration_minutes": np.nan if minutes is None else minutes, **row}
        out.append(record)
    return pd.DataFrame(out)


def ratings_from_rows(rows: list[tuple[str, str, str, float, float]]) -> pd.DataFrame:
    """(participant, block, response, rating, seconds) tuples."""
    frame = pd.DataFrame(rows, columns=["participant_id", "block_id", "response_id", "rating", "seconds_on_block"])
    return frame.assign(dimension="empathy")


def gold_from_scores(scores: dict[str, float]) -> pd.DataFrame:
    return pd.DataFrame({"response_id": list(scores), "gold_score": list(scores.values())})


def table_for(ratings_frame, participants_frame, gold_frame):
    return quality.participant_table(ratings_frame, participants_frame, gold_frame, THRESHOLDS)


def test_it_keeps_durations_on_the_window_edges():
    people = participants_from_rows([{"participant_id": p, "minutes": m} for p, m in
                                     [("a", 9.99), ("b", 10.0), ("c", 75.0), ("d", 75.01), ("e", None)]])
    table = table_for(ratings_from_rows([]), people, gold_from_scores({}))
    assert quality.flag_duration(table, THRESHOLDS).tolist() == [True, False, False, True, False]
    assert quality.flag_incomplete(table, THRESHOLDS).tolist() == [False, False, False, False, True]


def test_a_block_of_exactly_the_fast_limit_is_not_fast_and_exactly_the_share_is_kept():
    def blocks(pid, seconds):
        return [(pid, f"B{i}", f"B{i}-R1", 3.0, s) for i, s in enumerate(seconds)]

    rows = blocks("quarter", [9.9, 10.0, 10.0, 30.0]) + blocks("over", [9.9, 9.99, 10.0, 30.0])
    rows += [("quarter", "B0", "B0-R2", 4.0, 9.9)]  # a second rating of a block counts the block once
    people = participants_from_rows([{"participant_id": "quarter"}, {"participant_id": "over"}])
    table = table_for(ratings_from_rows(rows), people, gold_from_scores({}))
    assert table["fast_share"].tolist() == [0.25, 0.5]
    assert quality.flag_speed(table, THRESHOLDS).tolist() == [False, True]


def test_straightlining_needs_both_low_sd_and_high_mae():
    scores = {"R1": 5.0, "R2": 5.0, "R3": 1.0, "R4": 1.0}
    rows = []
    for pid, values in {
        "liner": [3, 3, 3, 3],          # sd 0, mae 2   -> flagged
        "agrees": [5, 5, 1, 1],          # sd 2.3, mae 0 -> kept
        "steady": [4, 4, 4, 4],          # sd 0, mae 2   -> flagged
        "varied_wrong": [1, 1, 5, 5],    # sd 2.3, mae 4 -> kept (varied)
    }.items():
        rows += [(pid, "B", r, float(v), 30.0) for r, v in zip(scores, values)]
    rows += [("no_gold", "B", f"X{i}", 3.0, 30.0) for i in range(4)]
    people = participants_from_rows([{"participant_id": p} for p in ["liner", "agrees", "steady", "varied_wrong", "no_gold"]])
    table = table_for(ratings_from_rows(rows), people, gold_from_scores(scores))
    assert np.isnan(table.loc["no_gold", "mae"]) and table.loc["no_gold", "sd"] == 0.0
    assert table.loc["agrees", "mae"] == 0.0
    assert quality.flag_straightlining(table, THRESHOLDS).to_dict() == {
        "liner": True, "agrees": False, "steady": True, "varied_wrong": False, "no_gold": False
    }


def test_sd_uses_ddof_1_over_every_rating():
    rows = [("p", "B", f"R{i}", v, 30.0) for i, v in enumerate([1.0, 2.0, 3.0, 4.0])]
    table = table_for(ratings_from_rows(rows), participants_from_rows([{"participant_id": "p"}]), gold_from_scores({}))
    assert table.loc["p", "sd"] == pytest.approx(np.std([1, 2, 3, 4], ddof=1))


def test_attention_allows_the_studys_number_of_failures():
    people = participants_from_rows([{"participant_id": p, "attention_failures": n} for p, n in [("a", 0), ("b", 1), ("c", 2)]])
    table = table_for(ratings_from_rows([]), people, gold_from_scores({}))
    assert quality.flag_attention(table, THRESHOLDS).tolist() == [False, True, True]
    assert quality.flag_attention(table, {**THRESHOLDS, "attention_failures_allowed": 1}).tolist() == [False, False, True]


def test_the_first_flagging_rule_excludes_and_flagged_alone_counts_every_flag():
    people = participants_from_rows([
        {"participant_id": "both", "minutes": 5.0, "attention_failures": 1},
        {"participant_id": "short", "minutes": 5.0},
        {"participant_id": "fine"},
    ])
    result = quality.apply_quality_rules(ratings_from_rows([]), people, gold_from_scores({}), THRESHOLDS)
    assert result.participants["excluded_by"].tolist() == ["attention", "duration", ""]
    flow = result.filter_flow.set_index("rule")
    assert flow.loc["enrolled", "remaining"] == 3
    assert flow.loc["attention", ["excluded", "remaining", "flagged_alone"]].tolist() == [1, 2, 1]
    assert flow.loc["duration", ["excluded", "remaining", "flagged_alone"]].tolist() == [1, 1, 2]


def test_rejection_needs_two_failed_checks_in_a_study_of_five_minutes_or_more():
    rows = [{"participant_id": f"p{i}", "minutes": 30.0} for i in range(10)]
    rows += [{"participant_id": "two", "attention_failures": 2}, {"participant_id": "one", "attention_failures": 1},
             {"participant_id": "left", "minutes": None, "status": "exited", "attention_failures": 3}]
    result = quality.apply_quality_rules(ratings_from_rows([]), participants_from_rows(rows), gold_from_scores({}), THRESHOLDS).participants
    by_id = result.set_index("participant_id")
    assert by_id.loc["two", "reject_reason"] == "failed_attention_checks" and not by_id.loc["two", "payable"]
    assert by_id.loc["one", "reject_reason"] == "" and by_id.loc["one", "payable"]
    assert by_id.loc["left", "reject_reason"] == "failed_attention_checks" and not by_id.loc["left", "payable"]

    short_study = [{**r, "minutes": 4.0} if r.get("minutes") == 30.0 or "minutes" not in r else r for r in rows]
    short = quality.apply_quality_rules(ratings_from_rows([]), participants_from_rows(short_study), gold_from_scores({}), THRESHOLDS).participants
    assert set(short["reject_reason"]) == {""}


def test_too_fast_is_more_than_three_sd_below_the_mean_of_completed_participants():
    durations = [30.0, 31.0, 29.0, 30.5, 29.5] * 4 + [12.0]
    rows = [{"participant_id": f"p{i}", "minutes": m} for i, m in enumerate(durations)]
    result = quality.apply_quality_rules(ratings_from_rows([]), participants_from_rows(rows), gold_from_scores({}), THRESHOLDS).participants
    cutoff = np.mean(durations) - 3 * np.std(durations, ddof=1)
    assert 12.0 < cutoff
    assert result["reject_reason"].tolist() == [""] * 20 + ["too_fast"]


def test_it_does_not_mutate_its_inputs():
    people = participants_from_rows([{"participant_id": "a", "minutes": 5.0}, {"participant_id": "b"}])
    rows = ratings_from_rows([("a", "B", "R1", 3.0, 5.0), ("b", "B", "R1", 2.0, 40.0)])
    before = (people.copy(deep=True), rows.copy(deep=True))
    quality.apply_quality_rules(rows, people, gold_from_scores({"R1": 3.0}), THRESHOLDS)
    pd.testing.assert_frame_equal(people, before[0])
    pd.testing.assert_frame_equal(rows, before[1])


def test_it_handles_a_study_with_nobody():
    result = quality.apply_quality_rules(ratings_from_rows([]), participants_from_rows([]).reindex(columns=participants_from_rows([{"participant_id": "x"}]).columns), gold_from_scores({}), THRESHOLDS)
    assert result.participants.empty
    assert result.filter_flow["remaining"].tolist() == [0] * 6
    assert result.filter_flow_by_subgroup is None  # no subgroups declared: no per-subgroup flow
    with_subgroups = quality.apply_quality_rules(
        ratings_from_rows([]), participants_from_rows([]).reindex(columns=participants_from_rows([{"participant_id": "x"}]).columns),
        gold_from_scores({}), THRESHOLDS, data.SUBGROUPS)
    assert with_subgroups.filter_flow_by_subgroup.empty


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([None, 5.0, 30.0, 80.0]), st.integers(0, 2), st.integers(0, 2)),
                min_size=1, max_size=25))
def test_the_flow_adds_up(people_spec):
    rows = [{"participant_id": f"p{i}", "minutes": m, "attention_failures": f, "blocks_answered": 1 - (a == 0),
             "gender": ["Woman", "Man", ""][a]} for i, (m, f, a) in enumerate(people_spec)]
    gender = data.subgroups_named("gender")
    result = quality.apply_quality_rules(ratings_from_rows([]), participants_from_rows(rows), gold_from_scores({}),
                                         THRESHOLDS, gender)
    flow = result.filter_flow
    retained = int((result.participants["excluded_by"] == "").sum())
    assert flow["remaining"].iloc[-1] == retained
    assert flow["excluded"].sum() == len(rows) - retained
    assert (flow["flagged_alone"].iloc[1:] >= flow["excluded"].iloc[1:]).all()
    by_group = result.filter_flow_by_subgroup
    assert by_group["excluded"].sum() == len(rows) - retained  # every excluded person counts in one group
    assert set(by_group["group"]) <= {"Woman", "Man", quality.OUTSIDE_GROUPS}


def test_a_participant_exactly_on_the_straightlining_boundary_is_kept_whatever_the_float_noise():
    # All ratings 4 against gold 4.9: |4 - 4.9| is 0.9000000000000004 in floating point.
    assert abs(4.0 - 4.9) > 0.9
    scores = {"R1": 4.9, "R2": 4.9, "R3": 4.9}
    rows = [("on_the_line", "B", r, 4.0, 30.0) for r in scores]
    rows += [("just_over", "B", r, 3.9, 30.0) for r in scores]  # MAE 1.0: flagged
    people = participants_from_rows([{"participant_id": "on_the_line"}, {"participant_id": "just_over"}])
    table = table_for(ratings_from_rows(rows), people, gold_from_scores(scores))
    assert quality.flag_straightlining(table, THRESHOLDS).tolist() == [False, True]
    # An SD of exactly 0.6 that the arithmetic delivers as 0.5999999999999999 is not below 0.6.
    noisy = pd.DataFrame({"sd": [0.5999999999999999, 0.5999], "mae": [1.5, 1.5]})
    assert quality.flag_straightlining(noisy, THRESHOLDS).tolist() == [False, True]


def test_an_imported_participant_who_finished_without_a_single_rating_is_incomplete_and_not_paid():
    people = participants_from_rows([
        {"participant_id": "empty", "blocks_assigned": 0, "blocks_answered": 0},
        {"participant_id": "rated", "blocks_assigned": 1, "blocks_answered": 1},
    ])
    ratings = ratings_from_rows([("rated", "B", "R1", 4.0, 30.0), ("rated", "B", "R2", 2.0, 30.0)])
    result = quality.apply_quality_rules(ratings, people, gold_from_scores({}), THRESHOLDS).participants
    by_id = result.set_index("participant_id")
    assert by_id.loc["empty", "excluded_by"] == "incomplete" and not by_id.loc["empty", "payable"]
    assert by_id.loc["rated", "excluded_by"] == "" and by_id.loc["rated", "payable"]


def test_unchanged_rank_share_counts_ranked_blocks_that_kept_the_order_shown_and_excludes_no_one():
    # a: three ranked blocks, two kept as shown (two rows each: rank_changed is per block);
    # b: ranking off (NA); c: one ranked block, moved.
    rows = [("a", "b1", "r1", 3.0, 20.0), ("a", "b1", "r2", 4.0, 20.0), ("a", "b2", "r3", 2.0, 20.0),
            ("a", "b2", "r4", 5.0, 20.0), ("a", "b3", "r5", 1.0, 20.0), ("b", "b1", "r1", 3.0, 20.0),
            ("c", "b1", "r1", 4.0, 20.0)]
    ratings = ratings_from_rows(rows).assign(
        rank_changed=pd.array([False, False, True, True, False, None, True], dtype="boolean"))
    people = participants_from_rows([{"participant_id": p, "blocks_answered": 3, "blocks_assigned": 3}
                                     for p in "abc"])
    table = table_for(ratings, people, gold_from_scores({}))
    share = table["unchanged_rank_share"]
    assert share["a"] == pytest.approx(2 / 3) and np.isnan(share["b"]) and share["c"] == 0.0
    # A metric only: the rules are those of DESIGN, in their order.
    assert quality.RULES == ("incomplete", "attention", "duration", "speed", "straightlining")
