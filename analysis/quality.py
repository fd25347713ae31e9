"""Quality rules of DESIGN 3.2: pure functions from frames to flags and the exclusion flow.

Inputs are the frames of ``analysis.frames`` and a thresholds mapping with
the keys of ``surveys.models.QUALITY_FIELDS``. Nothing here reads the
database or changes its inputs. The exact boundaries are documented in
docs/quality.md and pinned by tests/test_quality*.py.

Examples
--------
>>> import pandas as pd
>>> table = pd.DataFrame({"duration_minutes": [9.9, 10.0, 75.0, 75.1]}, index=["a", "b", "c", "d"])
>>> flag_duration(table, {"duration_min_minutes": 10, "duration_max_minutes": 75}).tolist()
[True, False, False, True]
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from analysis.stats.groups import Subgroup

RULES = ("incomplete", "attention", "duration", "speed", "straightlining")
ENROLLED = "enrolled"
FILTER_FLOW_COLUMNS = ["step", "rule", "excluded", "remaining", "flagged_alone"]
FILTER_FLOW_BY_SUBGROUP_COLUMNS = ["step", "rule", "grouping", "group", "excluded"]
RESULT_COLUMNS = [
    "participant_id", "duration_minutes", "sd", "mae", "fast_share", "attention_failures",
    "excluded_by", "payable", "reject_reason",
]
OUTSIDE_GROUPS = "(in neither group)"
# Thresholds are compared at this many decimals (see ``at_precision``).
COMPARE_DECIMALS = 9
REJECT_ATTENTION = "failed_attention_checks"
REJECT_TOO_FAST = "too_fast"
# Prolific: rejecting for attention needs two failed instructed checks in a study of 5+ minutes.
REJECT_MIN_FAILED_CHECKS = 2
REJECT_MIN_STUDY_MINUTES = 5.0
REJECT_TOO_FAST_SDS = 3.0

Thresholds = Mapping[str, float]


@dataclass(frozen=True)
class QualityResult:
    participants: pd.DataFrame
    filter_flow: pd.DataFrame
    filter_flow_by_subgroup: pd.DataFrame | None  # None: the study declares no subgroups


def participant_metrics(
    ratings: pd.DataFrame, participants: pd.DataFrame, gold: pd.DataFrame, thresholds: Thresholds
) -> pd.DataFrame:
    """Per participant (index ``participant_id``): duration_minutes, sd, mae, fast_share,
    unchanged_rank_share.

    ``sd`` uses ddof=1 over all the participant's ratings (every dimension);
    ``mae`` averages |rating - gold| over the rated items that have a gold
    score (NaN if none); ``fast_share`` is the share of the participant's
    answered blocks with ``seconds_on_block < fast_block_seconds`` (NaN if
    no block was answered); ``unchanged_rank_share`` is the share of the
    participant's ranked blocks (``rank_changed`` not NA) whose ranking is the
    order shown (``rank_changed`` False; NaN without a ranked block). It is a
    metric for the researcher, not a rule: no participant is excluded by it.
    Participants without ratings get NaN.
    """
    index = pd.Index(participants["participant_id"].astype(object), name="participant_id")
    # Group by integer codes: turning 1.2 million categorical ids into objects
    # and hashing them three times was most of this function's time.
    codes, ids = pd.factorize(ratings["participant_id"])
    ids = pd.Index(np.asarray(ids, dtype=object), name="participant_id")
    ratings_values = ratings["rating"].to_numpy(dtype=float)
    has_id = codes >= 0
    rated = ~np.isnan(ratings_values) & has_id
    by_participant = pd.Series(ratings_values[rated]).groupby(codes[rated], sort=False)
    sd = by_participant.std(ddof=1)

    gold_scores = gold.assign(response_id=gold["response_id"].astype(object)).set_index("response_id")["gold_score"]
    gold_of_rating = ratings["response_id"].map(gold_scores).to_numpy(dtype=float)
    error = np.abs(ratings_values - gold_of_rating)
    scored = ~np.isnan(error) & has_id
    mae = pd.Series(error[scored]).groupby(codes[scored], sort=False).mean()

    seconds = ratings["seconds_on_block"].to_numpy(dtype=float)
    block_codes, block_keys = pd.factorize(ratings["block_id"])
    answered = np.flatnonzero(~np.isnan(seconds) & has_id)
    participant_block = codes[answered].astype(np.int64) * (len(block_keys) + 1) + block_codes[answered]
    blocks = answered[~pd.Series(participant_block).duplicated().to_numpy()]
    is_fast = pd.Series(seconds[blocks] < thresholds["fast_block_seconds"])
    fast_share = is_fast.groupby(codes[blocks], sort=False).mean()

    unchanged_rank_share = _unchanged_rank_share(ratings, codes, block_codes, len(block_keys))

    def by_id(per_code: pd.Series) -> np.ndarray:
        return pd.Series(per_code.to_numpy(), index=ids[per_code.index]).reindex(index).to_numpy(dtype=float)

    return pd.DataFrame(
        {
            "duration_minutes": participants["duration_minutes"].to_numpy(dtype=float),
            "sd": by_id(sd),
            "mae": by_id(mae),
            "fast_share": by_id(fast_share),
            "unchanged_rank_share": by_id(unchanged_rank_share),
        },
        index=index,
    )


def _unchanged_rank_share(ratings: pd.DataFrame, codes: np.ndarray, block_codes: np.ndarray,
                          n_blocks: int) -> pd.Series:
    """Per participant code: the share of ranked blocks whose ranking kept the order shown.

    ``rank_changed`` is one value per block visit, repeated on each of its rows: one row per
    (participant, block) counts. Frames without the column (made by hand) have no ranked block.
    """
    if "rank_changed" not in ratings:
        return pd.Series(dtype=float)
    changed = pd.array(ratings["rank_changed"], dtype="boolean")
    ranked = np.flatnonzero(~changed.isna() & (codes >= 0))
    participant_block = codes[ranked].astype(np.int64) * (n_blocks + 1) + block_codes[ranked]
    blocks = ranked[~pd.Series(participant_block).duplicated().to_numpy()]
    kept = pd.Series(~changed[blocks].to_numpy(dtype=bool))
    return kept.groupby(codes[blocks], sort=False).mean()


def participant_table(
    ratings: pd.DataFrame, participants: pd.DataFrame, gold: pd.DataFrame, thresholds: Thresholds
) -> pd.DataFrame:
    """The participants frame indexed by ``participant_id`` with the metrics added: what the rules read."""
    metrics = participant_metrics(ratings, participants, gold, thresholds)
    table = participants.set_index(pd.Index(participants["participant_id"].astype(object), name="participant_id"))
    return table.drop(columns=["participant_id", "duration_minutes"]).join(metrics)


def flag_incomplete(table: pd.DataFrame, thresholds: Thresholds | None = None) -> pd.Series:
    """No finish time, fewer blocks answered than assigned, or no block answered at all.

    The last case is an imported participant with a finish time but no rating rows:
    nothing was assigned to them, yet they did not take part.
    """
    answered = table["blocks_answered"]
    flags = table["finished_at"].isna() | (answered < table["blocks_assigned"]) | (answered.fillna(0) == 0)
    return flags.astype(bool).rename("incomplete")


def flag_attention(table: pd.DataFrame, thresholds: Thresholds) -> pd.Series:
    """More failed attention checks than the study allows (default 0: any failure)."""
    return (table["attention_failures"] > thresholds["attention_failures_allowed"]).astype(bool).rename("attention")


def flag_duration(table: pd.DataFrame, thresholds: Thresholds) -> pd.Series:
    """Total minutes outside the closed window [min, max]; no duration (unfinished) is not flagged here."""
    minutes = table["duration_minutes"]
    outside = (minutes < thresholds["duration_min_minutes"]) | (minutes > thresholds["duration_max_minutes"])
    return outside.fillna(False).astype(bool).rename("duration")


def flag_speed(table: pd.DataFrame, thresholds: Thresholds) -> pd.Series:
    """Share of fast blocks strictly above the allowed share (exactly the share is kept, at ``COMPARE_DECIMALS``)."""
    return (at_precision(table["fast_share"]) > thresholds["fast_share_max"]).fillna(False).astype(bool).rename("speed")


def at_precision(values: pd.Series) -> pd.Series:
    """``values`` rounded to ``COMPARE_DECIMALS`` decimals, for comparing with a threshold.

    A value on a boundary must not land on either side by floating-point noise:
    ratings whose SD is exactly 0.6 come out as 0.5999999999999999, all ratings 4
    against gold 4.9 give an MAE of 0.9000000000000004.

    >>> at_precision(pd.Series([0.5999999999999999, 0.9000000000000004])).tolist()
    [0.6, 0.9]
    """
    return values.round(COMPARE_DECIMALS)


def flag_straightlining(table: pd.DataFrame, thresholds: Thresholds) -> pd.Series:
    """SD below the threshold AND MAE above it, both compared at ``COMPARE_DECIMALS`` decimals.

    Without a gold MAE (or SD) nobody is flagged.
    """
    flags = (at_precision(table["sd"]) < thresholds["straightline_sd_max"]) & (
        at_precision(table["mae"]) > thresholds["straightline_mae_min"])
    return flags.fillna(False).astype(bool).rename("straightlining")


RULE_FLAGS: dict[str, Callable[[pd.DataFrame, Thresholds], pd.Series]] = {
    "incomplete": flag_incomplete,
    "attention": flag_attention,
    "duration": flag_duration,
    "speed": flag_speed,
    "straightlining": flag_straightlining,
}


def rule_flags(table: pd.DataFrame, thresholds: Thresholds) -> pd.DataFrame:
    """One boolean column per rule, in evaluation order."""
    return pd.DataFrame({rule: RULE_FLAGS[rule](table, thresholds) for rule in RULES}, index=table.index)


def first_flagging_rule(flags: pd.DataFrame) -> pd.Series:
    """The first rule (in ``RULES`` order) that flags each participant; "" when none does."""
    excluded_by = pd.Series("", index=flags.index, dtype=object, name="excluded_by")
    for rule in reversed(RULES):
        excluded_by = excluded_by.mask(flags[rule], rule)
    return excluded_by


def filter_flow(flags: pd.DataFrame, excluded_by: pd.Series) -> pd.DataFrame:
    """Step 0 "enrolled" (everyone), then one row per rule: excluded, remaining, flagged_alone."""
    remaining = len(flags)
    rows = [{"step": 0, "rule": ENROLLED, "excluded": 0, "remaining": remaining, "flagged_alone": 0}]
    for step, rule in enumerate(RULES, start=1):
        excluded = int((excluded_by == rule).sum())
        remaining -= excluded
        rows.append(
            {"step": step, "rule": rule, "excluded": excluded, "remaining": remaining,
             "flagged_alone": int(flags[rule].sum())}
        )
    return pd.DataFrame(rows, columns=FILTER_FLOW_COLUMNS)


def filter_flow_by_subgroup(
    participants: pd.DataFrame, excluded_by: pd.Series, subgroups: Sequence[Subgroup]
) -> pd.DataFrame:
    """Participants excluded by each rule, per group of each subgroup comparison the study declares.

    A participant outside both groups of a comparison (blank, left-out or
    other answers) counts under ``OUTSIDE_GROUPS``. Every group present gets
    a row for every rule, zeros included, so the table is complete for charts.
    """
    rows = []
    for subgroup in subgroups:
        answers = participants[subgroup.demographic] if subgroup.demographic in participants.columns else \
            pd.Series("", index=participants.index)
        labels = pd.Series([subgroup.label_of(a) or OUTSIDE_GROUPS for a in answers], index=excluded_by.index)
        counts = pd.crosstab(excluded_by, labels)
        groups = [g for g in (subgroup.group_a.label, subgroup.group_b.label, OUTSIDE_GROUPS) if g in counts.columns]
        rows += [
            {"step": step, "rule": rule, "grouping": subgroup.key, "group": g,
             "excluded": int(counts.at[rule, g]) if rule in counts.index else 0}
            for step, rule in enumerate(RULES, start=1)
            for g in groups
        ]
    return pd.DataFrame(rows, columns=FILTER_FLOW_BY_SUBGROUP_COLUMNS)


def reject_reasons(table: pd.DataFrame) -> pd.Series:
    """Payment rejection grounds allowed by Prolific (docs/quality.md); "" when none.

    ``failed_attention_checks``: two or more failed instructed checks, when the
    median duration of completed participants is at least 5 minutes.
    ``too_fast``: a completed participant whose duration is below the mean
    minus 3 SD (ddof=1) of completed participants' durations.
    """
    completed = table["finished_at"].notna() & table["duration_minutes"].notna()
    durations = table.loc[completed, "duration_minutes"]
    long_enough = bool(durations.median() >= REJECT_MIN_STUDY_MINUTES) if len(durations) else False
    cutoff = durations.mean() - REJECT_TOO_FAST_SDS * durations.std(ddof=1) if len(durations) > 1 else np.nan

    attention = long_enough & (table["attention_failures"] >= REJECT_MIN_FAILED_CHECKS)
    too_fast = completed & (table["duration_minutes"] < cutoff).fillna(False)
    reasons = pd.Series("", index=table.index, dtype=object, name="reject_reason")
    reasons = reasons.mask(too_fast, REJECT_TOO_FAST)
    return reasons.mask(attention, REJECT_ATTENTION)


def apply_quality_rules(
    ratings: pd.DataFrame,
    participants: pd.DataFrame,
    gold: pd.DataFrame,
    thresholds: Thresholds,
    subgroups: Sequence[Subgroup] = (),
) -> QualityResult:
    """Flags, exclusion, payment decision and the flow tables for one study.

    ``payable`` is True for completed participants (status "completed") who
    answered at least one block, without a reject reason; it does not depend
    on ``excluded_by``.
    """
    table = participant_table(ratings, participants, gold, thresholds)
    flags = rule_flags(table, thresholds)
    excluded_by = first_flagging_rule(flags)
    reasons = reject_reasons(table)
    # Completing means answering: a "completed" participant with no answered block is not paid.
    payable = (table["status"] == "completed") & (reasons == "") & (table["blocks_answered"].fillna(0) > 0)
    result = pd.DataFrame(
        {
            "participant_id": table.index.to_numpy(dtype=object),
            "duration_minutes": table["duration_minutes"].to_numpy(dtype=float),
            "sd": table["sd"].to_numpy(dtype=float),
            "mae": table["mae"].to_numpy(dtype=float),
            "fast_share": table["fast_share"].to_numpy(dtype=float),
            "attention_failures": table["attention_failures"].to_numpy(dtype=np.int64),
            "excluded_by": excluded_by.to_numpy(dtype=object),
            "payable": payable.to_numpy(dtype=bool),
            "reject_reason": reasons.to_numpy(dtype=object),
        },
        columns=RESULT_COLUMNS,
    )
    return QualityResult(
        participants=result,
        filter_flow=filter_flow(flags, excluded_by),
        filter_flow_by_subgroup=filter_flow_by_subgroup(
            participants.set_index("participant_id").reindex(table.index), excluded_by, subgroups
        ) if subgroups else None,
    )
