"""What each column of a downloaded file means: its meaning, type and allowed values.

``COLUMNS`` gives a column name its shared meaning (ids, p-values, notes). Each result table's own columns
are carried by its registry entry (``registry.Analysis.columns``, one of the mappings below); the files that
are not result tables (participants.csv, scenarios.csv, coverage.csv) are listed by
``analysis.exporting.codebook``, which puts them all together with the answer files' entries (their question
types'). Entries describe the software, not one study.
"""

from __future__ import annotations

from typing import NamedTuple

from analysis import quality, stats
from surveys.definition import PREFER_NOT

TEXT = "text"
INTEGER = "integer"
NUMBER = "number"
BOOLEAN = "boolean"
TIME = "ISO 8601 time"
#: The types a column can have; every entry uses one of these.
TYPES = (TEXT, INTEGER, NUMBER, BOOLEAN, TIME)


class Column(NamedTuple):
    meaning: str
    type: str
    allowed: str


# Ranges and value sets said the same way everywhere.
ANY = "any real number; blank when not computable"
NON_NEGATIVE = ">= 0; blank when not computable"
COUNT = ">= 0"
SHARE = "0-1; blank when not computable"
ON_SCALE = "within the study's rating scale; blank when there are no ratings"
FREE_TEXT = "free text"
_RULES = ", ".join(quality.RULES)

PARTICIPANT_ID = Column(
    "participant id: a pseudonym, the HMAC of the panel id with the study's secret key (never the panel id)",
    TEXT, "p_ followed by 20 hex digits",
)

#: The shared meaning of a column name (a file's entry in TABLE_COLUMNS overrides it).
COLUMNS: dict[str, Column] = {
    "participant_id": PARTICIPANT_ID,
    "block_id": Column("block id: one page of responses to the same prompt", TEXT,
                       "the study's block ids (e.g. Q1..Q24 in TIDE)"),
    "scenario": Column("scenario id: the situation the block's prompt belongs to", TEXT,
                       "the study's scenario ids (e.g. S1..S6 in TIDE)"),
    "response_id": Column("response (item) id", TEXT, "the study's response ids (e.g. Q1-R1 in TIDE)"),
    "model": Column("system that wrote the response", TEXT,
                    "the study's systems (the reference's author counts as a system)"),
    "condition": Column("condition of the response", TEXT,
                        "the study's conditions (e.g. zero-shot, fine-tuned, reference in TIDE)"),
    "dimension": Column("rating dimension (key of the rating scale)", TEXT,
                        "the study's dimension keys; blank when the study has no rating dimension"),
    "position": Column("display position of the response on the page (1 = shown first)", INTEGER,
                       "1 to the number of responses per block"),
    "rating": Column("rating on the study's scale", INTEGER, "the dimension's scale (e.g. 1-5 in TIDE)"),
    "rank": Column("rank the participant gave the response within the block (1 = ranked first)", INTEGER,
                   "1 to the number of responses per block; blank when ranking is off"),
    "region": Column("region of the participant's answer to the study's region question, by the study's region "
                     "map (e.g. the US Census region of the state in TIDE)", TEXT,
                     "the study's regions (e.g. Northeast, Midwest, South, West in TIDE); blank when the answer is "
                     "blank, withheld or not in the map, or the study declares no regions"),
    "n": Column("number of observations the row rests on", INTEGER, COUNT),
    "mean": Column("mean of the values the row summarises", NUMBER, ON_SCALE),
    "sd": Column("standard deviation (ddof=1) of the values the row summarises", NUMBER,
                 ">= 0; blank when n < 2"),
    "ci_low": Column("lower bound of the t-based 95% confidence interval of the mean", NUMBER,
                     "any real number; blank when n < 2"),
    "ci_high": Column("upper bound of the t-based 95% confidence interval of the mean", NUMBER,
                      "any real number; blank when n < 2"),
    "p": Column("two-sided p-value of the row's test", NUMBER, "0-1; blank when the test could not run"),
    "p_holm": Column("p-value Holm-adjusted within the family named in holm_family", NUMBER,
                     "0-1 and >= p; blank when p is blank"),
    "holm_family": Column("the family of tests Holm's correction ran over, or 'none: <why>' when none applies",
                          TEXT, FREE_TEXT),
    "note": Column("why a value of the row is missing, or a caveat (subsampling, one dimension only, "
                   "convergence); blank when the row was computed without remark", TEXT, "free text; blank allowed"),
    "variant": Column("participant set the row was computed on: the retained participants (with the "
                      "straight-lining rule) or those plus the ones only that rule excluded (without it)", TEXT,
                      "with straight-lining rule, without straight-lining rule"),
    "n_participants": Column("number of participants whose data entered the row", INTEGER, COUNT),
}

PARTICIPANTS: dict[str, Column] = {
    "started_at": Column("when the participant consented", TIME, "UTC, with offset"),
    "finished_at": Column("when the participant completed the study", TIME,
                          "UTC, with offset; blank = exited early or still in progress"),
    "attention_passed": Column("passed every instructed attention check answered", BOOLEAN,
                               "true, false; blank = no check answered"),
    "duration_minutes": Column("minutes from consent to completion", NUMBER, ">= 0; blank when not completed"),
    "sd": Column("standard deviation (ddof=1) of all the participant's ratings (every dimension)", NUMBER,
                 ">= 0; blank with fewer than 2 ratings"),
    "mae": Column("mean absolute error of the participant's ratings against the gold scores", NUMBER,
                  ">= 0; blank when no rated response has a gold score"),
    "fast_share": Column("share of the participant's submitted blocks answered faster than the speed threshold",
                         NUMBER, "0-1; blank when no block was submitted"),
    "excluded_by": Column("first quality rule that excluded the participant (rules in this order: "
                          f"{_RULES})", TEXT, f"blank = retained; {_RULES}"),
    "payable": Column("whether the participant should be paid (completed, and no rejection ground)", BOOLEAN,
                      "true, false"),
    "reject_reason": Column("ground on which the panel allows rejecting the submission", TEXT,
                            f"blank = none; {quality.REJECT_ATTENTION}, {quality.REJECT_TOO_FAST}"),
}

SCENARIOS: dict[str, Column] = {
    "scenario": Column("scenario id", TEXT, "the study's scenario ids"),
    "label": Column("the scenario's label in the study definition (not shown to participants)", TEXT,
                    "free text; blank when the definition gives none"),
    "user_input": Column("the person's message the responses answer, as shown above them", TEXT, FREE_TEXT),
    "context": Column("the conversation before the person's message, oldest turn first, shown as a transcript above "
                      "it: a JSON list of {\"role\": \"user\" | \"assistant\", \"text\": ...}", TEXT,
                      "JSON list; [] when the scenario has no conversation"),
}



COVERAGE: dict[str, Column] = {
    "judgements_per_block": Column("r: the judgements each block needs (the study's allocation)", INTEGER,
                                   ">= 1; blank when every participant judges every block"),
    "judged": Column("submitted judgements of the block by participants who still hold it (not released by "
                     "leaving, timing out, a returned or rejected panel submission, or the quality rules), when the "
                     "file was written", INTEGER, COUNT),
    "allocated": Column("participants the block is allocated to when the file was written (in progress or "
                        "completed, not released)", INTEGER, f"{COUNT}; blank when every participant judges every block"),
    "missing": Column("judgements the block still needs: r minus judged, at least 0", INTEGER,
                      f"{COUNT}; blank when every participant judges every block"),
    "complete": Column("whether the block has its r judgements", BOOLEAN,
                       "true, false; blank when every participant judges every block"),
}

_FLOW_RULE = Column("quality rule of this step", TEXT, f"{quality.ENROLLED} (step 0), {_RULES}")

FILTER_FLOW: dict[str, Column] = {
    "step": Column("step of the exclusion flow: 0 = everyone enrolled, then one step per rule in order", INTEGER,
                   f"0-{len(quality.RULES)}"),
    "rule": _FLOW_RULE,
    "excluded": Column("participants this rule excluded (each participant counts for the first rule that flags "
                       "them)", INTEGER, COUNT),
    "remaining": Column("participants left after this step", INTEGER, COUNT),
    "flagged_alone": Column("participants this rule flags on its own, whatever the earlier rules did", INTEGER, COUNT),
}

FILTER_FLOW_BY_SUBGROUP: dict[str, Column] = {
    "step": Column("step of the exclusion flow (one per rule, in order)", INTEGER, f"1-{len(quality.RULES)}"),
    "rule": Column("quality rule of this step", TEXT, _RULES),
    "grouping": Column("key of the study's subgroup comparison", TEXT, "the study's subgroup keys"),
    "group": Column("group of the comparison the participants are in", TEXT,
                    f"the comparison's two group labels, '{quality.OUTSIDE_GROUPS}' for everyone else"),
    "excluded": Column("participants of this group that this rule excluded (first rule that flags them); "
                       "zeros included", INTEGER, COUNT),
}

_BASELINE_MEAN = Column("mean rating of the system's responses in the study's baseline condition, in the scenario",
                        NUMBER, ON_SCALE)

WIN_TABLE: dict[str, Column] = {
    "model": Column("system compared (a system with only reference responses is not a row)", TEXT,
                    "the study's systems"),
    "zs_mean": _BASELINE_MEAN,
    "ft_mean": Column("mean rating of the system's responses in the study's treatment condition, in the scenario",
                      NUMBER, ON_SCALE),
    "winner": Column("the condition with the higher mean (means within 1e-9 are a tie)", TEXT,
                     "the study's baseline or treatment condition, tie; blank when either mean is missing "
                     "(e.g. zero-shot, fine-tuned, tie in TIDE)"),
    "reference_mean": Column("mean rating of the reference responses shown in the same blocks as the system's",
                             NUMBER, ON_SCALE),
    "reference_points": Column("2 if the reference's mean beats both condition means, 1 if one, 0 otherwise "
                               "(ties earn nothing)", INTEGER, "0, 1, 2; blank when a mean is missing"),
    "n": Column("participants who rated the system in the scenario", INTEGER, COUNT),
}

WIN_SUMMARY: dict[str, Column] = {
    "n_models": Column("systems with a decided comparison in the scenario (ties included)", INTEGER, COUNT),
    "zs_wins": Column("systems whose baseline-condition mean was the higher", INTEGER, COUNT),
    "ft_wins": Column("systems whose treatment-condition mean was the higher", INTEGER, COUNT),
    "ties": Column("systems whose two condition means tied", INTEGER, COUNT),
    "zs_win_share": Column("zs_wins / n_models", NUMBER, SHARE),
    "ft_win_share": Column("ft_wins / n_models", NUMBER, SHARE),
    "win_split": Column("the two shares as a label: '<baseline share> / <treatment share>'", TEXT,
                        "two percentages with one decimal, e.g. '87.5% / 12.5%'; blank when n_models is 0"),
    "reference_points": Column("points the reference earned over the scenario's systems (sum of win_table's "
                               "reference_points)", INTEGER, COUNT),
    "reference_points_max": Column("the most points the reference could earn: 2 per system with points", INTEGER,
                                   COUNT),
    "reference_points_share": Column("reference_points / reference_points_max", NUMBER, SHARE),
}

DESCRIPTIVES: dict[str, Column] = {
    "dimension": Column("rating dimension (key of the rating scale)", TEXT,
                        "the study's dimension keys; blank when the ratings carry no dimension"),
    "n": Column("ratings in the cell (system x condition x scenario x dimension)", INTEGER, COUNT),
    "mean": Column("mean rating in the cell", NUMBER, ON_SCALE),
    "sd": Column("standard deviation (ddof=1) of the ratings in the cell", NUMBER, ">= 0; blank when n < 2"),
}

TTESTS: dict[str, Column] = {
    "grouping": Column("key of the study's subgroup comparison (blank answers, 'Prefer not to answer' and the "
                       "answers the comparison leaves out leave a participant out of that comparison only)", TEXT,
                       "the study's subgroup keys (e.g. age, education, gender, race in TIDE)"),
    "model": Column("system whose ratings are compared (its conditions pooled; the reference's system is tested "
                    "as a system of its own)", TEXT, "the study's systems"),
    "level": Column("unit of analysis", TEXT, "participant (each participant's mean rating of the system), rating "
                    "(every rating as independent: overstates significance, for comparison only)"),
    "group_a": Column("label of the comparison's first group", TEXT, "the study's group labels (e.g. 60+ in TIDE)"),
    "group_b": Column("label of the comparison's second group", TEXT, "the study's group labels (e.g. under 60 in TIDE)"),
    "n_a": Column("values in group a (participants or ratings, per level)", INTEGER, COUNT),
    "n_b": Column("values in group b (participants or ratings, per level)", INTEGER, COUNT),
    "mean_a": Column("mean rating of group a", NUMBER, ON_SCALE),
    "mean_b": Column("mean rating of group b", NUMBER, ON_SCALE),
    "sd_a": Column("standard deviation (ddof=1) of group a", NUMBER, ">= 0; blank when n_a < 2"),
    "sd_b": Column("standard deviation (ddof=1) of group b", NUMBER, ">= 0; blank when n_b < 2"),
    "t": Column("Welch t statistic (group a minus group b)", NUMBER, ANY),
    "dof": Column("Welch-Satterthwaite degrees of freedom", NUMBER, NON_NEGATIVE),
    "p": Column("two-sided p-value of Welch's t-test", NUMBER, "0-1; blank when the test could not run"),
    "cohen_d": Column("Cohen's d with the pooled SD, signed as mean_a - mean_b", NUMBER, ANY),
}

# Columns of every regional table (one-way across US Census regions, per scenario and level).
_REGIONAL: dict[str, Column] = {
    "factor": Column("factor the participants are grouped by", TEXT, "region"),
    "level": Column("unit of analysis", TEXT, "participant (each participant's mean rating in the scenario), "
                    "rating (every rating as independent)"),
}
# ... and of the omnibus tests among them.
_REGIONAL_COUNTS: dict[str, Column] = {
    "n": Column("values that entered the test (participants or ratings, per level; participants without a "
                "region left out)", INTEGER, COUNT),
    "n_groups": Column("regions that entered the test", INTEGER, COUNT),
}

ANOVA: dict[str, Column] = {
    **_REGIONAL,
    **_REGIONAL_COUNTS,
    "F": Column("one-way ANOVA F statistic", NUMBER, NON_NEGATIVE),
    "df_between": Column("between-regions degrees of freedom (n_groups - 1)", NUMBER, NON_NEGATIVE),
    "df_within": Column("within-regions degrees of freedom (n - n_groups)", NUMBER, NON_NEGATIVE),
    "p": Column("p-value of the ANOVA F test", NUMBER, "0-1; blank when the test could not run"),
    "eta_squared": Column("eta squared: between-regions over total sum of squares", NUMBER, SHARE),
}

WELCH_ANOVA: dict[str, Column] = {
    **_REGIONAL,
    **_REGIONAL_COUNTS,
    "n": Column("values that entered the test (regions with n < 2 or no variance left out, see note)", INTEGER,
                COUNT),
    "n_groups": Column("regions that entered the test (n >= 2 and some variance)", INTEGER, COUNT),
    "F": Column("Welch's ANOVA F statistic", NUMBER, NON_NEGATIVE),
    "df_between": Column("numerator degrees of freedom", NUMBER, NON_NEGATIVE),
    "df_within": Column("Welch's denominator degrees of freedom", NUMBER, NON_NEGATIVE),
    "p": Column("p-value of Welch's F test", NUMBER, "0-1; blank when the test could not run"),
    "partial_eta_squared": Column("partial eta squared reported with Welch's ANOVA", NUMBER, SHARE),
}

GAMES_HOWELL: dict[str, Column] = {
    **_REGIONAL,
    "region_a": Column("first region of the pair", TEXT, "Northeast, Midwest, South, West"),
    "region_b": Column("second region of the pair", TEXT, "Northeast, Midwest, South, West"),
    "n_a": Column("values in region a (participants or ratings, per level)", INTEGER, COUNT),
    "n_b": Column("values in region b (participants or ratings, per level)", INTEGER, COUNT),
    "mean_a": Column("mean rating in region a", NUMBER, ON_SCALE),
    "mean_b": Column("mean rating in region b", NUMBER, ON_SCALE),
    "diff": Column("mean_a - mean_b", NUMBER, ANY),
    "se": Column("standard error of diff", NUMBER, NON_NEGATIVE),
    "t": Column("Games-Howell t statistic", NUMBER, ANY),
    "df": Column("Welch degrees of freedom of the pair", NUMBER, NON_NEGATIVE),
    "p": Column("Games-Howell p-value, already adjusted over the region pairs of the scenario x level", NUMBER,
                "0-1; blank when the test could not run"),
    "hedges_g": Column("Hedges' g of the pair (bias-corrected standardised mean difference)", NUMBER, ANY),
}

KRUSKAL: dict[str, Column] = {
    **_REGIONAL,
    **_REGIONAL_COUNTS,
    "H": Column("Kruskal-Wallis H statistic", NUMBER, NON_NEGATIVE),
    "df": Column("degrees of freedom (n_groups - 1)", INTEGER, COUNT),
    "p": Column("p-value of the Kruskal-Wallis test", NUMBER, "0-1; blank when the test could not run"),
    "epsilon_squared": Column("epsilon squared: H / (n - 1)", NUMBER, NON_NEGATIVE),
}

REGION_MEANS: dict[str, Column] = {
    "level": _REGIONAL["level"],
    "region": Column("US Census region", TEXT, "Northeast, Midwest, South, West"),
    "n": Column("values in the region (participants or ratings, per level)", INTEGER, COUNT),
    "mean": Column("mean rating in the region", NUMBER, ON_SCALE),
    "sd": Column("standard deviation (ddof=1) in the region", NUMBER, ">= 0; blank when n < 2"),
    "is_top": Column("the region with the highest mean of the scenario x level", BOOLEAN, "true, false"),
    "top_significant": Column(f"true only on the top row, when the scenario's ANOVA has p_holm < {stats.ALPHA} and "
                              "the top region's CI lies wholly above the runner-up's", BOOLEAN, "true, false"),
    "anova_p_holm": Column("p_holm of the scenario's ANOVA at the same level (anova.csv)", NUMBER,
                           "0-1; blank when the ANOVA could not run"),
}

WILCOXON: dict[str, Column] = {
    "model": Column("system whose baseline and treatment ratings are paired", TEXT, "the study's systems"),
    "dimension": DESCRIPTIVES["dimension"],
    "n": Column("participants who rated the system in both conditions (one pair each: their two mean ratings)",
                INTEGER, COUNT),
    "n_nonzero": Column("pairs whose difference is not zero (the pairs the test uses)", INTEGER, COUNT),
    "median_zs": Column("median over the pairs of the baseline-condition mean rating", NUMBER, ON_SCALE),
    "median_ft": Column("median over the pairs of the treatment-condition mean rating", NUMBER, ON_SCALE),
    "W": Column("Wilcoxon signed-rank statistic: min(W+, W-)", NUMBER, NON_NEGATIVE),
    "p": Column("two-sided p-value of the Wilcoxon signed-rank test", NUMBER, "0-1; blank when the test could not run"),
    "rank_biserial": Column("matched-pairs rank-biserial correlation, positive when the treatment condition is rated "
                            "higher", NUMBER, "-1 to 1; blank when every difference is zero"),
}

_PAIR_SIDE = "over the pairs of the row's level, of the {side} side (the rater's mean rating in the {side} condition)"

DIMENSION_WILCOXON: dict[str, Column] = {
    "dimension": DESCRIPTIVES["dimension"],
    "level": Column("what one pair is", TEXT, "rater_item (a rater x block: the rater's mean rating of the block's "
                    "baseline responses and of its treatment responses; treats these pairs as independent), "
                    "rater_mean (a rater: the means of that rater's rater_item pairs; empty when participants judged "
                    "a share of the blocks), item (a block: the means over its raters of its rater_item pairs), "
                    "crossed (the rater_item differences in a t test with random raters and items; empty when "
                    "participants judged a share of the blocks)"),
    "t": Column("crossed level: the mean rater x block difference over its standard error (random raters and "
                "items), positive when the treatment condition is rated higher", NUMBER,
                "any real number; blank on the Wilcoxon levels"),
    "df": Column("crossed level: Satterthwaite degrees of freedom of t", NUMBER,
                 "> 0; blank on the Wilcoxon levels"),
    "valid_for_design": Column("the level's units are independent in this design, so it leads the table (few "
                               "raters who judge everything: item and crossed; many participants who judge "
                               "everything: rater_mean and crossed; a share of the blocks each: item)", BOOLEAN,
                               "true, false"),
    "baseline": Column("the study's baseline condition (the first side of every pair)", TEXT,
                       "the study's baseline condition"),
    "treatment": Column("the study's treatment condition (the second side of every pair)", TEXT,
                        "the study's treatment condition"),
    "n_pairs": Column("pairs at this level: rater x blocks (rater_item), raters (rater_mean) or blocks (item) with "
                      "ratings in both conditions", INTEGER, COUNT),
    "n_nonzero": Column("pairs whose difference is not zero (the pairs the test uses)", INTEGER, COUNT),
    "n_raters": Column("raters (participants) in the pairs", INTEGER, COUNT),
    "mean_baseline": Column("mean " + _PAIR_SIDE.format(side="baseline"), NUMBER, ON_SCALE),
    "sd_baseline": Column("standard deviation (ddof=1) " + _PAIR_SIDE.format(side="baseline"), NUMBER,
                          ">= 0; blank when n_pairs < 2"),
    "mean_treatment": Column("mean " + _PAIR_SIDE.format(side="treatment"), NUMBER, ON_SCALE),
    "sd_treatment": Column("standard deviation (ddof=1) " + _PAIR_SIDE.format(side="treatment"), NUMBER,
                           ">= 0; blank when n_pairs < 2"),
    "median_baseline": Column("median " + _PAIR_SIDE.format(side="baseline"), NUMBER, ON_SCALE),
    "median_treatment": Column("median " + _PAIR_SIDE.format(side="treatment"), NUMBER, ON_SCALE),
    "median_difference": Column("median of treatment - baseline over all the pairs (zero differences included)",
                                NUMBER, "any real number; blank when n_pairs is 0"),
    "W": Column("Wilcoxon signed-rank statistic: min(W+, W-) over the non-zero differences", NUMBER, NON_NEGATIVE),
    "z": Column("normal approximation of the signed-rank statistic (tie-corrected, no continuity correction), "
                "positive when the treatment condition is rated higher", NUMBER, ANY),
    "p": Column("two-sided p-value of the Wilcoxon signed-rank test (scipy's default method: exact, or an exhaustive "
                "permutation with ties up to 13 pairs, else the normal approximation)", NUMBER,
                "0-1; blank when the test could not run"),
    "rank_biserial": WILCOXON["rank_biserial"],
    "r": Column("effect size r = z / sqrt(n_nonzero), positive when the treatment condition is rated higher",
                NUMBER, "-1 to 1; blank when the test could not run"),
}

_NOT_FOR_UNIT = "; blank when the unit is coarser"

DEMOGRAPHICS_TABLE: dict[str, Column] = {
    "question": Column("key of the study's demographic question (its column in participants.csv)", TEXT,
                       "the study's demographic keys"),
    "type": Column("type of the question", TEXT, "choice, number, us_state, text"),
    "answer": Column("the answer the row counts", TEXT, "a choice of the question, another answer found, "
                     f"'mean (SD)' (number questions), 'answered' (text questions), '{PREFER_NOT}', 'not answered'"),
    "n": Column("retained participants who gave the answer (mean (SD) row: who gave a number)", INTEGER, COUNT),
    "percent": Column("100 x n / n_participants", NUMBER, "0-100"),
    "mean": Column("mean of the number answers (mean (SD) row only)", NUMBER, "the question's range; else blank"),
    "sd": Column("standard deviation (ddof=1) of the number answers (mean (SD) row only)", NUMBER,
                 ">= 0; blank elsewhere or when fewer than 2 answers"),
    "min": Column("smallest number answer (mean (SD) row only)", NUMBER, "the question's range; else blank"),
    "max": Column("largest number answer (mean (SD) row only)", NUMBER, "the question's range; else blank"),
    "n_participants": Column("retained participants (the denominator of percent)", INTEGER, COUNT),
}

REFERENCE_VS_SYSTEMS: dict[str, Column] = {
    "reference": Column("the reference condition compared with the other responses of its blocks", TEXT,
                        "the study's reference conditions"),
    "measure": Column("what one trial is", TEXT, "most, least (best-worst choice sets showing the reference), "
                      "ranked_first (rankings of a block holding it), rated_higher (the reference's rating against "
                      "another response's rating of the same block by the same participant, ties left out)"),
    "dimension": Column("rating dimension of a rated_higher row", TEXT,
                        "the study's dimension keys; blank on the other measures"),
    "n": Column("trials", INTEGER, COUNT),
    "count": Column("trials the reference won: picked most / least, ranked first, rated higher", INTEGER, COUNT),
    "share": Column("count / n", NUMBER, SHARE),
    "chance": Column("the share expected at random: 1 / responses in the set (mean over the sets when they "
                     "differ), 1/2 for rated_higher", NUMBER, SHARE),
    "ci_low": Column("lower bound of the 95% Wilson score interval of share", NUMBER, SHARE),
    "ci_high": Column("upper bound of the 95% Wilson score interval of share", NUMBER, SHARE),
    "p": Column("two-sided exact binomial test of count out of n against chance (scipy.stats.binomtest)", NUMBER,
                "0-1; blank when n is 0"),
}

RANK_SUMMARY: dict[str, Column] = {
    "unit": Column("what the row summarises", TEXT, "response, model_condition, model"),
    "response_id": Column("response (item) id", TEXT, "the study's response ids" + _NOT_FOR_UNIT),
    "block_id": Column("block id of the response", TEXT, "the study's block ids" + _NOT_FOR_UNIT),
    "scenario": Column("scenario of the response", TEXT, "the study's scenario ids" + _NOT_FOR_UNIT),
    "condition": Column("condition of the response", TEXT, "the study's conditions" + _NOT_FOR_UNIT),
    "n": Column("ranks the row averages", INTEGER, COUNT),
    "mean_rank": Column("mean rank (1 = ranked first)", NUMBER, "1 to the number of responses per block"),
    "sd_rank": Column("standard deviation (ddof=1) of the ranks", NUMBER, ">= 0; blank when n < 2"),
}

FRIEDMAN: dict[str, Column] = {
    "n": Column("participants who ranked every response of the block", INTEGER, COUNT),
    "k": Column("responses ranked in the block", INTEGER, COUNT),
    "chi2": Column("Friedman chi-square statistic", NUMBER, NON_NEGATIVE),
    "df": Column("degrees of freedom (k - 1)", INTEGER, COUNT),
    "p": Column("p-value of the Friedman test", NUMBER, "0-1; blank when the test could not run"),
    "kendall_w": Column("Kendall's W: chi2 / (n (k - 1))", NUMBER, SHARE),
}

BRADLEY_TERRY: dict[str, Column] = {
    "strength": Column("Plackett-Luce log-worth of the system x condition, centred to mean 0 (differences are "
                       "log-odds of being ranked above)", NUMBER, "any real number; blank when never ranked above "
                       "another item"),
    "ci_low": Column("lower bound of the 95% percentile bootstrap interval of strength", NUMBER,
                     "any real number; blank when n_boot is 0"),
    "ci_high": Column("upper bound of the 95% percentile bootstrap interval of strength", NUMBER,
                      "any real number; blank when n_boot is 0"),
    "worth": Column("normalised worth: softmax of the strengths (the column sums to 1)", NUMBER, "0-1"),
    "n_rankings": Column("complete rankings (participant x block) the model was fitted on", INTEGER, COUNT),
    "n_participants": Column("participants whose rankings were used", INTEGER, COUNT),
    "n_boot": Column("bootstrap resamples of participants", INTEGER, COUNT),
    "method": Column("estimation method", TEXT, "Plackett-Luce (MM), percentile bootstrap over participants"),
}

BEST_WORST: dict[str, Column] = {
    "n_shown": Column("times a response of this system x condition was shown", INTEGER, COUNT),
    "n_participants": Column("participants who were shown it", INTEGER, COUNT),
    "best": Column("times it was chosen as best", INTEGER, COUNT),
    "worst": Column("times it was chosen as worst", INTEGER, COUNT),
    "best_minus_worst": Column("best - worst", INTEGER, "any integer"),
    "normalized": Column("(best - worst) / n_shown", NUMBER, "-1 (always worst) to 1 (always best)"),
    "normalized_ci_low": Column("lower bound of the 95% percentile bootstrap interval of normalized (participants "
                                "resampled with replacement)", NUMBER,
                                "-1 to 1; blank when n_boot is 0 or fewer than 2 participants saw the source"),
    "normalized_ci_high": Column("upper bound of the 95% percentile bootstrap interval of normalized (participants "
                                 "resampled with replacement)", NUMBER,
                                 "-1 to 1; blank when n_boot is 0 or fewer than 2 participants saw the source"),
    "n_boot": Column("bootstrap resamples of participants", INTEGER, COUNT),
}

BEST_WORST_SHARES: dict[str, Column] = {
    "choice": Column("which pick the row counts", TEXT, "most, least"),
    "n_sets": Column("choice sets (participant x block) that showed the source: the denominator of share", INTEGER,
                     COUNT),
    "n_participants": Column("participants who were shown the source", INTEGER, COUNT),
    "count": Column("choice sets in which the source was picked (most or least, per choice)", INTEGER, COUNT),
    "share": Column("count / n_sets: the share of the choice sets showing the source in which it was picked",
                    NUMBER, "0-1"),
    "ci_low": Column("lower bound of the 95% Wilson score interval of share", NUMBER, "0-1"),
    "ci_high": Column("upper bound of the 95% Wilson score interval of share", NUMBER, "0-1"),
    "chance_share": Column("share expected if every pick were at random: the mean over the source's choice sets of "
                           "1 / (sources in the set)", NUMBER, "0-1"),
    "chi2": Column("chi-square goodness-of-fit statistic of the counts of this choice across sources against equal "
                   "counts (repeated on every row of the choice)", NUMBER,
                   ">= 0; blank when the sources were shown in different numbers of sets, or there is one source"),
    "df": Column("degrees of freedom of the chi-square test (sources - 1)", INTEGER, COUNT),
    "p": Column("p-value of the equal-shares test of this choice", NUMBER, "0-1; blank when the test could not run"),
}

_PAIRWISE_COUNT = "judgements of the row's source or condition (see level) that it {what}"
PAIRWISE_WIN_RATES: dict[str, Column] = {
    "level": Column("what the row counts: a source (system x condition) against every other source, a condition "
                    "against every other condition (judgements between two sources of the same condition left "
                    "out), or one pair of conditions (condition against opponent)", TEXT, "source, condition, pair"),
    "model": Column("system of the source", TEXT, "the study's systems; blank on condition and pair rows"),
    "condition": Column("condition of the source, the condition, or the first condition of the pair", TEXT,
                        COLUMNS["condition"].allowed),
    "opponent": Column("the other condition of the pair (the baseline whenever it is in the pair)", TEXT,
                       "the study's conditions; blank on source and condition rows"),
    "comparisons": Column("pairwise judgements of the row (every verdict; a source against itself left out)",
                          INTEGER, COUNT),
    "wins": Column(_PAIRWISE_COUNT.format(what="won"), INTEGER, COUNT),
    "losses": Column(_PAIRWISE_COUNT.format(what="lost"), INTEGER, COUNT),
    "ties": Column("judgements of the row with the verdict tie", INTEGER, COUNT),
    "both_bad": Column("judgements of the row with the verdict both bad", INTEGER, COUNT),
    "decisive": Column("judgements of the row with a winner: wins + losses", INTEGER, COUNT),
    "win_rate": Column("wins / decisive (ties and both-bad verdicts left out)", NUMBER,
                       "0-1; blank when decisive is 0"),
    "ci_low": Column("lower bound of the 95% Wilson score interval of win_rate", NUMBER,
                     "0-1; blank when decisive is 0"),
    "ci_high": Column("upper bound of the 95% Wilson score interval of win_rate", NUMBER,
                      "0-1; blank when decisive is 0"),
    "win_rate_ties_half": Column("(wins + (ties + both_bad) / 2) / comparisons: a tie or a both-bad verdict counted "
                                 "as half a win", NUMBER, "0-1"),
    "n_participants": Column("participants with a judgement in the row", INTEGER, COUNT),
    "p": Column("two-sided exact binomial test of wins out of decisive against one half (pair rows)", NUMBER,
                "0-1; blank on source and condition rows and when decisive is 0"),
    "p_holm": Column("p Holm-adjusted across the pair rows", NUMBER, "0-1 and >= p; blank when p is blank"),
    "holm_family": Column("the family of tests Holm's correction ran over", TEXT,
                          "the binomial tests of the condition pairs; blank on source and condition rows"),
}

PAIRWISE_BT: dict[str, Column] = {
    "level": Column("what the strength is of", TEXT, "condition, source (system x condition)"),
    "model": Column("system of the source", TEXT, "the study's systems; blank on condition rows"),
    "strength": Column("Bradley-Terry log strength from the decisive pairwise judgements (ties and both-bad left "
                       "out), relative to the anchor: the difference of two strengths is the log-odds that the "
                       "first beats the second", NUMBER, "any real number; blank when not identified (see note)"),
    "ci_low": Column("lower bound of the 95% percentile bootstrap interval of strength (participants resampled "
                     "with replacement)", NUMBER, "any real number; blank when n_boot is 0 or not identified"),
    "ci_high": Column("upper bound of the 95% percentile bootstrap interval of strength (participants resampled "
                      "with replacement)", NUMBER, "any real number; blank when n_boot is 0 or not identified"),
    "p_beats_baseline": Column("implied probability of beating the baseline condition, 1 / (1 + exp(-strength)) (on "
                               "source rows: a baseline source of mean strength)", NUMBER,
                               "0-1; blank when the study names no baseline"),
    "p_ci_low": Column("ci_low mapped to a probability like p_beats_baseline", NUMBER,
                       "0-1; blank when p_beats_baseline or ci_low is blank"),
    "p_ci_high": Column("ci_high mapped to a probability like p_beats_baseline", NUMBER,
                        "0-1; blank when p_beats_baseline or ci_high is blank"),
    "decisive": Column("decisive judgements the condition or source took part in (against another item of its "
                       "level)", INTEGER, COUNT),
    "wins": Column("of those, the judgements it won", INTEGER, COUNT),
    "n_participants": Column("participants with a decisive judgement involving it", INTEGER, COUNT),
    "anchor": Column("what strength 0 is", TEXT, "<baseline> = 0 (condition rows), mean of the <baseline> sources "
                     "= 0 (source rows), mean 0 (no baseline)"),
    "alpha": Column("pseudo-wins added in each direction between every two items before the fit (regularisation)",
                    NUMBER, ">= 0"),
    "n_boot": Column("bootstrap resamples of participants", INTEGER, COUNT),
    "method": Column("estimation method", TEXT, "Bradley-Terry (choix I-LSR, <alpha> pseudo-wins each way), "
                     "percentile bootstrap over participants"),
}

PAIRWISE_POSITION_BIAS: dict[str, Column] = {
    "judgements": Column("pairwise judgements", INTEGER, COUNT),
    "decisive": Column("judgements with a winner (left or right)", INTEGER, COUNT),
    "left": Column("judgements that chose the left response (display position 1)", INTEGER, COUNT),
    "right": Column("judgements that chose the right response (display position 2)", INTEGER, COUNT),
    "ties": Column("judgements with the verdict tie", INTEGER, COUNT),
    "both_bad": Column("judgements with the verdict both bad", INTEGER, COUNT),
    "left_share": Column("left / decisive: 0.5 without a position bias (display order is randomised)", NUMBER,
                         "0-1; blank when decisive is 0"),
    "ci_low": Column("lower bound of the 95% Wilson score interval of left_share", NUMBER,
                     "0-1; blank when decisive is 0"),
    "ci_high": Column("upper bound of the 95% Wilson score interval of left_share", NUMBER,
                      "0-1; blank when decisive is 0"),
    "p": Column("two-sided exact binomial test of left out of decisive against one half", NUMBER,
                "0-1; blank when decisive is 0"),
    "tie_share": Column("ties / judgements", NUMBER, "0-1; blank when there are no judgements"),
    "both_bad_share": Column("both_bad / judgements", NUMBER, "0-1; blank when there are no judgements"),
    "n_participants": Column("participants with a judgement", INTEGER, COUNT),
}

AGREEMENT: dict[str, Column] = {
    "scenario": Column("scenario the agreement is computed over", TEXT, "all (every scenario), the study's scenario "
                       "ids"),
    "dimension": DESCRIPTIVES["dimension"],
    "measurement": Column("measurement level of the distance metric", TEXT, "ordinal, interval, ratio, nominal"),
    "alpha": Column("Krippendorff's alpha across raters (units = responses)", NUMBER,
                    "at most 1 (1 = perfect agreement, 0 = chance); blank when undefined"),
    "n_units": Column("responses rated by two or more raters (the pairable units)", INTEGER, COUNT),
    "n_raters": Column("raters (participants)", INTEGER, COUNT),
    "n_values": Column("ratings of the pairable units", INTEGER, COUNT),
}

RATER_LOO: dict[str, Column] = {
    "participant_id": Column("the rater's participant id (the pseudonym of participants.csv)", TEXT,
                             PARTICIPANT_ID.allowed),
    "n_items": Column("items (response x dimension) the rater shares with at least one other rater", INTEGER, COUNT),
    "spearman_r": Column("Spearman correlation of the rater's ratings with the mean of the other raters on the same "
                         "items", NUMBER, "-1 to 1; blank when undefined"),
    "p": Column("p-value of the Spearman correlation (descriptive: not a test family)", NUMBER,
                "0-1; blank when undefined"),
}

RATER_JUDGE: dict[str, Column] = {
    "level": Column("unit of the correlation", TEXT, "response (each response's mean human rating vs its gold "
                    "score), rater (mean over raters of each rater's own correlation with the gold scores)"),
    "method": Column("correlation coefficient", TEXT, "spearman, pearson"),
    "r": Column("the correlation (at level rater: the mean of the raters' correlations)", NUMBER,
                "-1 to 1; blank when undefined"),
    "p": Column("p-value of the correlation", NUMBER, "0-1; blank at level rater and when undefined"),
    "n": Column("responses (level response) or raters with a defined correlation (level rater)", INTEGER, COUNT),
}

# The two rating models share their columns; their terms differ, and only the
# mixed model has variance components (rows without a standard error).
_MODEL: dict[str, Column] = {
    "se": Column("standard error of coef", NUMBER, NON_NEGATIVE),
    "z": Column("Wald z: coef / se", NUMBER, ANY),
    "p": Column("two-sided Wald p-value of the term", NUMBER, "0-1; blank when not computable"),
    "ci_low": Column("lower bound of the 95% Wald interval of coef", NUMBER, ANY),
    "ci_high": Column("upper bound of the 95% Wald interval of coef", NUMBER, ANY),
    "n_obs": Column("ratings the model was fitted on (reference responses excluded; subsampled by participant "
                    "when large, see note)", INTEGER, COUNT),
    "n_participants": Column("participants in the fitted data", INTEGER, COUNT),
    "n_items": Column("responses (items) in the fitted data", INTEGER, COUNT),
}


def _blank_on_variance_rows(entry: Column) -> Column:
    """A variance component (var(...) row) has an estimate but no standard error, z, p or interval."""
    return entry._replace(allowed=entry.allowed.split(";")[0] + "; blank on the var(...) rows")


MIXED_MODEL: dict[str, Column] = {
    **_MODEL,
    "term": Column("term of the linear mixed model rating ~ condition * system (random intercepts for participant "
                   "and item)", TEXT, "Intercept (baseline condition of the alphabetically first system), "
                   "condition[<condition>], system[<system>], condition[..]:system[..], var(participant), "
                   "var(item), var(residual)"),
    "coef": Column("estimate of the term: a fixed effect on the rating scale, or a variance for var(...) rows",
                   NUMBER, "any real number (>= 0 for var(...) rows)"),
    **{column: _blank_on_variance_rows(_MODEL[column]) for column in ("se", "z", "p", "ci_low", "ci_high")},
}

ORDINAL_MODEL: dict[str, Column] = {
    **_MODEL,
    "term": Column("term of the cumulative-logit model rating ~ condition * system (SE clustered by participant)",
                   TEXT, "condition[<condition>], system[<system>], condition[..]:system[..], cut a/b (first "
                   "threshold), log-increment a/b (log of the gap to the previous threshold)"),
    "coef": Column("estimate of the term: log-odds of a higher rating (positive = higher ratings), or a threshold "
                   "parameter", NUMBER, ANY),
}

POSITION_BIAS: dict[str, Column] = {
    "n": Column("ratings at this display position", INTEGER, COUNT),
    "mean": Column("mean rating at this display position", NUMBER, ON_SCALE),
    "sd": Column("standard deviation (ddof=1) of the ratings at this position", NUMBER, ">= 0; blank when n < 2"),
    "test": Column("test that the mean rating does not depend on position (repeated on every row)", TEXT, "Friedman"),
    "statistic": Column("Friedman chi-square over the participants' per-position mean ratings (repeated on every "
                        "row)", NUMBER, NON_NEGATIVE),
    "df": Column("degrees of freedom of the test (positions - 1)", INTEGER, COUNT),
    "p": Column("p-value of the test (repeated on every row)", NUMBER, "0-1; blank when the test could not run"),
    "n_participants": Column("participants who saw every position (those the test uses)", INTEGER, COUNT),
}

_JUDGE = Column("name of the judge (an LLM, an automatic metric or an imported judge)", TEXT,
                "the study's judge names (lower case, digits, . _ -); the metrics: embedding_cosine, bertscore_f1, "
                "rouge_l, meteor")
_JUDGE_KIND = Column("kind of judge", TEXT, "llm, metric, other")

JUDGES: dict[str, Column] = {
    "judge": _JUDGE,
    "kind": _JUDGE_KIND,
    "n_ratings": Column("ratings the judge gave (response x dimension)", INTEGER, COUNT),
    "n_responses": Column("responses the judge rated", INTEGER, COUNT),
    "n_blocks": Column("blocks the judge answered", INTEGER, COUNT),
    "n_pairwise": Column("pairwise verdicts the judge gave (each order of a pair counts)", INTEGER, COUNT),
    "dimensions": Column("rating dimensions the judge rated, space-separated", TEXT, "the study's dimension keys"),
}

JUDGE_AGREEMENT: dict[str, Column] = {
    "judge": _JUDGE,
    "kind": _JUDGE_KIND,
    "dimension": Column("rating dimension compared (blank for the pairwise rows)", TEXT,
                        "the study's dimension keys; blank at levels pair and position"),
    "level": Column("what is compared", TEXT, "response (each response: judge's score vs the people's mean), "
                    "system (systems' means and the comparison's winners), rater (the judge as one more rater), "
                    "pair (pairwise verdicts vs the people's majority), position (the judge's left/right bias)"),
    "method": Column("the agreement measure", TEXT,
                     "spearman, kendall (tau-b), pearson, same_winner (share of systems with the same winner of "
                     "the comparison), same_study_winner (1 = same winner over all systems), alpha_people, "
                     "alpha_with_judge (Krippendorff's alpha without and with the judge), loo_spearman, "
                     "people_loo_spearman_median, cohen_kappa, left_share, order_consistency"),
    "estimate": Column("the measure's value", NUMBER, "-1 to 1 for correlations, alpha (may go below -1) and "
                       "kappa; 0-1 for shares; blank when not computable"),
    "ci_low": Column("lower bound of the 95% interval: percentile bootstrap over responses (correlations) or pairs "
                     "(kappa), Wilson (left_share), the lowest person's (people_loo_spearman_median)", NUMBER,
                     "as estimate; blank where the method has no interval"),
    "ci_high": Column("upper bound of the 95% interval (see ci_low)", NUMBER,
                      "as estimate; blank where the method has no interval"),
    "n": Column("what the estimate rests on: responses, systems, raters (alpha), persons, verdicts or pairs",
                INTEGER, COUNT),
    "p": Column("p-value: of the correlation (scipy), or the exact binomial test of left_share against 0.5",
                NUMBER, "0-1; blank for the other methods"),
}

JUDGE_RATER_LOO: dict[str, Column] = {
    "rater": Column("a person (participant id) or a judge (its name)", TEXT,
                    "participant ids of participants.csv, or the judges of judges.csv"),
    "rater_kind": Column("person, or the kind of judge", TEXT, "person, llm, metric, other"),
    "spearman_r": Column("Spearman correlation of the rater's ratings with the mean of the people other than them",
                         NUMBER, "-1 to 1; blank when undefined"),
    "n_items": Column("responses the rater shares with the other people", INTEGER, COUNT),
}

JUDGE_WIN_TABLE: dict[str, Column] = {"judge": _JUDGE, "kind": _JUDGE_KIND}
