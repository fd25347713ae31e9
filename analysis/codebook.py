"""The codebook shipped with the "everything for the paper" zip: each column's
meaning, type and allowed values."""

from __future__ import annotations

from collections.abc import Iterator

PARTICIPANT_ID = ("participant id: HMAC of the panel id with the study's key (never the panel id)", "text", "p_ + 20 hex")
COLUMNS: dict[str, tuple[str, str, str]] = {
    "participant_id": PARTICIPANT_ID,
    "started_at": ("when the participant consented", "ISO 8601 time (UTC)", ""),
    "finished_at": ("when the participant completed; blank = exited early", "ISO 8601 time (UTC)", "blank allowed"),
    "attention_passed": ("passed every instructed attention check", "boolean", "true, false, blank = never reached"),
    "age": ("age band or years", "text", "as asked; 'Prefer not to answer'"),
    "sex": ("sex assigned at birth", "text", "study choices"),
    "gender": ("gender", "text", "study choices"),
    "race": ("race", "text", "study choices"),
    "hispanic": ("Hispanic, Latino or Spanish origin", "text", "Yes, No, Prefer not to answer"),
    "education": ("highest education completed", "text", "study choices"),
    "employment": ("employment status", "text", "study choices"),
    "state": ("US state", "text", "USPS code, 'Outside the US', blank"),
    "region": ("US Census region of the state", "text", "Northeast, Midwest, South, West, blank"),
    "duration_minutes": ("minutes from consent to completion", "number", ">= 0"),
    "sd": ("SD (ddof=1) of all the participant's ratings", "number", ">= 0"),
    "mae": ("mean absolute error of ratings against gold scores", "number", ">= 0, blank without gold"),
    "fast_share": ("share of blocks answered faster than the speed threshold", "number", "0-1"),
    "excluded_by": ("first quality rule that excluded the participant", "text",
                    "blank (retained), incomplete, attention, duration, speed, straightlining"),
    "payable": ("whether the participant should be paid", "boolean", "true, false"),
    "reject_reason": ("Prolific-allowed rejection ground", "text", "blank, failed_attention_checks, too_fast"),
    "block_id": ("block (question) id", "text", "Q1..Q24 in TIDE"),
    "scenario": ("scenario id", "text", "S1..S6 in TIDE"),
    "response_id": ("response (item) id", "text", "Q<n>-R<k>"),
    "model": ("system that wrote the response", "text", "the study's systems"),
    "condition": ("condition of the response", "text", "zero-shot, fine-tuned, reference"),
    "position": ("display position on the page", "integer", "1-5"),
    "rating": ("rating on the study's scale", "integer", "1-5 in TIDE"),
    "rank": ("rank within the block, 1 = most empathetic", "integer", "1-5, blank when ranking is off"),
    "block_order": ("the block's place in the participant's sequence (attention checks not counted)", "integer", ">= 1"),
    "seconds_on_block": ("seconds from first showing the block to its submission", "number", ">= 0"),
    "step": ("step of the exclusion flow", "integer", "0 = enrolled"),
    "rule": ("quality rule", "text", "enrolled, incomplete, attention, duration, speed, straightlining"),
    "excluded": ("participants this rule excluded (first rule that flags)", "integer", ">= 0"),
    "remaining": ("participants left after this rule", "integer", ">= 0"),
    "flagged_alone": ("participants this rule would flag on its own", "integer", ">= 0"),
    "zs_mean": ("mean rating of the zero-shot responses", "number", ""),
    "ft_mean": ("mean rating of the fine-tuned responses", "number", ""),
    "winner": ("higher of zero-shot and fine-tuned", "text", "zero-shot, fine-tuned, tie"),
    "reference_mean": ("mean rating of the reference in the same blocks", "number", ""),
    "reference_points": ("2 if the reference beats both, 1 if one, 0 otherwise", "integer", "0-2"),
    "grouping": ("demographic grouping", "text", "age, education, gender, race"),
    "level": ("unit of analysis", "text", "participant (participant means), rating (every rating)"),
    "group_a": ("first group", "text", ""), "group_b": ("second group", "text", ""),
    "n_a": ("size of group a", "integer", ""), "n_b": ("size of group b", "integer", ""),
    "mean_a": ("mean of group a", "number", ""), "mean_b": ("mean of group b", "number", ""),
    "sd_a": ("SD of group a", "number", ""), "sd_b": ("SD of group b", "number", ""),
    "t": ("Welch t statistic", "number", ""), "dof": ("Welch-Satterthwaite degrees of freedom", "number", ""),
    "p": ("p-value", "number", "0-1"), "p_holm": ("Holm-adjusted p-value within the family", "number", "0-1"),
    "cohen_d": ("Cohen's d with pooled SD, sign of mean_a - mean_b", "number", ""),
    "factor": ("factor of the ANOVA", "text", "region"),
    "F": ("F statistic", "number", ""), "df_between": ("between-groups df", "number", ""),
    "df_within": ("within-groups df", "number", ""), "eta_squared": ("eta squared", "number", "0-1"),
    "n": ("number of observations", "integer", ""), "note": ("why a row could not be computed, or caveats", "text", ""),
    "holm_family": ("the family within which Holm's correction was applied", "text", ""),
    "variant": ("sensitivity variant", "text", "with/without straight-lining rule"),
}


def codebook_rows(tables: dict[str, list[str]]) -> Iterator[list[str]]:
    """One row per (file, column): file, column, meaning, type, allowed values."""
    yield ["file", "column", "meaning", "type", "allowed_values"]
    for filename, columns in tables.items():
        for column in columns:
            meaning, kind, allowed = COLUMNS.get(column, ("see docs/statistics.md for this table", "", ""))
            yield [filename, column, meaning, kind, allowed]
