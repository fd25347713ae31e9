"""The one list of a run's result tables.

Every table an analysis run persists is declared here once: its name (= the
table's name = its CSV file ``<name>.csv`` = its API name), the function that
computes it and the frames it takes, its title and section on the results
page, the figure drawn from it, whether a sensitivity variant (without the
straight-lining rule) is computed, the settings its options come from, the
study designs it applies to, and the line describing the file in the codebook.

The pipeline, the results page, the exports, the zip, the codebook and the API
read only this module. Adding an analysis is one function in ``analysis.stats``,
one ``Analysis`` below, and its tests (docs/statistics.md, "How to add an
analysis"). The ``pairwise`` input is the judgements of pairwise blocks
(``analysis.frames.pairwise_frame``), empty for other studies.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
from django.conf import settings

from analysis import stats, table_columns
from analysis.stats import judges as judge_stats

#: The frames an analysis may name in its ``inputs`` (``analysis.running.frame_builders`` builds each by name).
INPUTS = ("ratings", "participants", "gold", "pairwise", "judges", "judge_pairwise")

#: Features of a study's design an analysis can need (see ``Analysis.needs``).
FEATURES = frozenset({"ratings", "ranking", "best_worst", "pairwise", "comparison", "references", "subgroups", "regions",
                      "gold", "judges", "demographics", "reference_judged"})

#: Results-page sections, in page order: key -> heading.
SECTIONS: dict[str, str] = {
    "quality": "Who was kept",
    "ratings": "Ratings",
    "groups": "Subgroups",
    "regions": "Regions",
    "rankings": "Rankings and choices",
    "raters": "Raters",
    "models": "Models",
    "judges": "Judges",
    "sensitivity": "Sensitivity to the straight-lining rule",
}


@dataclass(frozen=True)
class Analysis:
    """One result table of an analysis run.

    ``function`` is None for the tables the quality step writes (the exclusion
    flow); every other table is computed by the statistics step as
    ``function(*frames named by inputs, **options)`` on the retained participants.
    ``options`` maps a keyword argument of the function to the Django setting
    it is read from at run time. ``design_options`` names keyword arguments
    filled from the study's design (``analysis.design.Design.options``: e.g.
    ``baseline``, ``treatment``, ``references``, ``subgroups``). ``needs`` names
    the design features the analysis applies to: a run computes it only for a
    study that has them all. ``paper`` tables are computed and shown first;
    ``own_task`` marks an analysis slow at scale, which a run computes in a
    Celery task of its own (``analysis.running.fanout``) so that workers share the run.
    """

    name: str
    title: str
    section: str
    description: str
    function: Callable[..., pd.DataFrame] | None = None
    inputs: tuple[str, ...] = ("ratings",)
    figures: tuple[str, ...] = ()
    sensitivity_of: str | None = None
    options: Mapping[str, str] = field(default_factory=dict)
    design_options: tuple[str, ...] = ()
    needs: frozenset[str] = frozenset({"ratings"})
    paper: bool = False
    own_task: bool = False
    #: The table's own columns with their codebook meanings (``analysis.table_columns``), and the shared
    #: column names it gives another meaning; a sensitivity variant reads its base table's.
    columns: Mapping[str, table_columns.Column] = field(default_factory=dict)

    @property
    def filename(self) -> str:
        return f"{self.name}.csv"

    @property
    def computed_by_statistics(self) -> bool:
        return self.function is not None or self.sensitivity_of is not None


def _sensitivity(base: str, title: str, description: str, needs: Iterable[str]) -> Analysis:
    return Analysis(
        name=f"sensitivity_{base}", title=title, section="sensitivity", description=description,
        # The left-out rule (straight-lining) flags no one without gold scores: the variant would equal its base.
        sensitivity_of=base, needs=frozenset(needs) | {"gold"}, paper=True,
    )


#: Every result table, in results-page order (never narrowed; exports and the codebook list these).
REGISTERED: tuple[Analysis, ...] = (
    Analysis("filter_flow", "Exclusion flow", "quality",
             "the exclusion flow: per quality rule, how many it excluded, how many remain, how many it flags alone",
             needs=frozenset(), paper=True, columns=table_columns.FILTER_FLOW),
    Analysis("demographics_table", "Demographics of the retained participants", "quality",
             "the retained participants' answers to the study's demographic questions: count and percentage per "
             "answer, mean, SD, min and max of number answers, and the 'Prefer not to answer' row",
             stats.demographics_table, inputs=("participants",), design_options=("demographic_questions",),
             needs=frozenset({"demographics"}), paper=True, columns=table_columns.DEMOGRAPHICS_TABLE),
    Analysis("filter_flow_by_subgroup", "Exclusion flow per subgroup", "quality",
             "the exclusion flow split by the groups of each subgroup comparison the study declares",
             needs=frozenset({"subgroups"}), paper=True, columns=table_columns.FILTER_FLOW_BY_SUBGROUP),
    Analysis("win_table", "Win table (baseline vs treatment, reference points)", "ratings",
             "per system and scenario: mean rating of the baseline and the treatment condition, the winner, "
             "the reference's points", stats.win_table, figures=("win_grid",),
             design_options=("baseline", "treatment", "references"), needs=frozenset({"ratings", "comparison"}),
             paper=True, columns=table_columns.WIN_TABLE),
    Analysis("win_summary", "Win table summary per scenario", "ratings",
             "per scenario: how many systems each condition won", stats.win_summary_of_ratings,
             design_options=("baseline", "treatment", "references"), needs=frozenset({"ratings", "comparison"}),
             columns=table_columns.WIN_SUMMARY),
    Analysis("descriptives", "Descriptives: mean, SD, n, 95% CI", "ratings",
             "mean, SD, n and 95% CI of the ratings per system, condition, scenario and dimension",
             stats.descriptives, figures=("rating_means",), columns=table_columns.DESCRIPTIVES),
    Analysis("ttests", "Group comparisons (Welch t-tests, Holm within grouping x level)", "groups",
             "Welch t-tests between demographic groups per system, at participant and rating level",
             stats.group_ttests, inputs=("ratings", "participants"), design_options=("subgroups",),
             needs=frozenset({"ratings", "subgroups"}), paper=True, columns=table_columns.TTESTS),
    Analysis("anova", "Regional one-way ANOVA", "regions", "one-way ANOVA of the ratings across regions",
             stats.regional_anova, inputs=("ratings", "participants"), needs=frozenset({"ratings", "regions"}),
             paper=True, columns=table_columns.ANOVA),
    Analysis("welch_anova", "Regional Welch ANOVA", "regions", "Welch's ANOVA across regions (unequal variances)",
             stats.regional_welch, inputs=("ratings", "participants"), needs=frozenset({"ratings", "regions"}),
             own_task=True, columns=table_columns.WELCH_ANOVA),
    Analysis("games_howell", "Games-Howell follow-ups", "regions", "Games-Howell pairwise comparisons of regions",
             stats.regional_games_howell, inputs=("ratings", "participants"),
             needs=frozenset({"ratings", "regions"}), own_task=True, columns=table_columns.GAMES_HOWELL),
    Analysis("kruskal", "Kruskal-Wallis", "regions", "Kruskal-Wallis test across regions",
             stats.regional_kruskal, inputs=("ratings", "participants"), needs=frozenset({"ratings", "regions"}),
             columns=table_columns.KRUSKAL),
    Analysis("region_means", "Mean rating per region (the maps)", "regions",
             "mean rating per region and scenario, with the top region and whether its lead is significant",
             stats.region_means, inputs=("ratings", "participants"), figures=("map_",),
             needs=frozenset({"ratings", "regions"}), columns=table_columns.REGION_MEANS),
    Analysis("wilcoxon", "Paired baseline vs treatment per system (Wilcoxon signed-rank)", "ratings",
             "Wilcoxon signed-rank tests of the paired baseline and treatment ratings", stats.paired_zs_ft,
             design_options=("baseline", "treatment"), needs=frozenset({"ratings", "comparison"}),
             columns=table_columns.WILCOXON),
    Analysis("reference_vs_systems", "The reference against the other responses (binomial test, 95% Wilson CI)",
             "rankings", "per reference condition: how often it was picked most and least (best-worst), ranked "
             "first (ranking) or rated higher than another response of its block (ratings, per dimension), "
             "against chance, with an exact binomial test and a Wilson CI; Holm across the rows",
             stats.reference_vs_systems, design_options=("references",), needs=frozenset({"reference_judged"}),
             paper=True, columns=table_columns.REFERENCE_VS_SYSTEMS),
    Analysis("rank_summary", "Mean ranks", "rankings", "mean rank per system and condition", stats.rank_summary,
             needs=frozenset({"ranking"}), columns=table_columns.RANK_SUMMARY),
    Analysis("friedman", "Friedman test per block", "rankings", "Friedman test of the ranks within each block",
             stats.friedman_by_block, needs=frozenset({"ranking"}), columns=table_columns.FRIEDMAN),
    Analysis("bradley_terry", "Plackett-Luce strength per system", "rankings",
             "Plackett-Luce strength (log worth) per system and condition with bootstrap CIs",
             stats.bradley_terry, figures=("strength",), options={"n_boot": "ANALYSIS_BOOTSTRAP_SAMPLES"},
             needs=frozenset({"ranking"}), own_task=True, columns=table_columns.BRADLEY_TERRY),
    Analysis("best_worst", "Best-worst scores", "rankings",
             "best-worst scores per source from most/least choices, with bootstrap CIs", stats.best_worst_scores,
             options={"n_boot": "ANALYSIS_BOOTSTRAP_SAMPLES"}, needs=frozenset({"best_worst"}),
             columns=table_columns.BEST_WORST),
    Analysis("best_worst_shares", "Share of most and least choices per source (95% Wilson CI)", "rankings",
             "per source, the share of the choice sets showing it in which it was picked most and least, "
             "with Wilson CIs and a test of equal shares", stats.best_worst_shares, figures=("best_worst_shares",),
             needs=frozenset({"best_worst"}), columns=table_columns.BEST_WORST_SHARES),
    Analysis("pairwise_win_rates", "Pairwise win rates (95% Wilson CI) and exact tests per pair of conditions",
             "rankings", "per source and per condition: wins, losses, ties and both-bad verdicts in the pairwise "
             "judgements, the win rate among decisive ones with its Wilson CI, and per pair of conditions an exact "
             "binomial test of wins against losses", stats.pairwise_win_rates, inputs=("pairwise",),
             design_options=("baseline",), needs=frozenset({"pairwise"}), paper=True,
             columns=table_columns.PAIRWISE_WIN_RATES),
    Analysis("pairwise_bradley_terry", "Bradley-Terry strengths from the pairwise judgements", "rankings",
             "Bradley-Terry log strengths per condition and per source from the decisive pairwise judgements, "
             "anchored to the baseline condition, with participant-bootstrap CIs and the implied probability of "
             "beating the baseline", stats.pairwise_bradley_terry, inputs=("pairwise",),
             figures=("pairwise_strength",), options={"n_boot": "ANALYSIS_BOOTSTRAP_SAMPLES"},
             design_options=("baseline",), needs=frozenset({"pairwise"}), paper=True,
             columns=table_columns.PAIRWISE_BT),
    Analysis("pairwise_position_bias", "Left/right position bias of the pairwise judgements", "rankings",
             "the share of decisive pairwise judgements that chose the left response, with its Wilson CI and an "
             "exact binomial test against one half; the shares of ties and both-bad verdicts",
             stats.pairwise_position_bias, inputs=("pairwise",), needs=frozenset({"pairwise"}),
             columns=table_columns.PAIRWISE_POSITION_BIAS),
    Analysis("agreement", "Krippendorff's alpha", "raters", "Krippendorff's alpha per scenario and dimension",
             stats.krippendorff_alpha, columns=table_columns.AGREEMENT),
    Analysis("rater_loo", "Rater vs leave-one-out mean", "raters",
             "each rater's Spearman correlation with the mean of the other raters", stats.rater_loo_correlation,
             own_task=True, columns=table_columns.RATER_LOO),
    Analysis("rater_judge", "Raters vs the LLM judge (gold scores)", "raters",
             "agreement of the human ratings with the gold (LLM-judge) scores", stats.rater_judge_agreement,
             inputs=("ratings", "gold"), needs=frozenset({"ratings", "gold"}), own_task=True,
             columns=table_columns.RATER_JUDGE),
    Analysis("mixed_model", "Mixed-effects model", "models",
             "linear mixed model of the ratings (condition x system, random participant and item effects)",
             stats.mixed_model, options={"max_rows": "ANALYSIS_MODEL_MAX_ROWS"},
             design_options=("baseline", "treatment"), needs=frozenset({"ratings", "comparison"}), own_task=True,
             columns=table_columns.MIXED_MODEL),
    Analysis("ordinal_model", "Ordinal (cumulative logit) model", "models",
             "cumulative-logit model of the ratings (condition x system)", stats.ordinal_model,
             options={"max_rows": "ANALYSIS_MODEL_MAX_ROWS"}, design_options=("baseline", "treatment"),
             needs=frozenset({"ratings", "comparison"}), own_task=True, columns=table_columns.ORDINAL_MODEL),
    Analysis("position_bias", "Position bias", "ratings", "mean rating by display position and a flatness test",
             stats.position_bias, figures=("position_bias",), columns=table_columns.POSITION_BIAS),
    Analysis("dimension_wilcoxon",
             "Baseline vs treatment per dimension (Wilcoxon signed-rank, paired by rater and by item)",
             "ratings", "per rating dimension, the baseline vs the treatment condition paired by rater x block, by "
             "rater means (left out when participants judge a share of the blocks) and by item (each block's "
             "means over its raters): Wilcoxon signed-rank, Holm across dimensions, medians and effect sizes",
             stats.dimension_wilcoxon, design_options=("baseline", "treatment", "complete_blocks"),
             needs=frozenset({"ratings", "comparison"}), columns=table_columns.DIMENSION_WILCOXON),
    # Judges beside people (judges/, analysis/stats/judges.py): the judges' answers are the ``judges`` (ratings)
    # and ``judge_pairwise`` frames; the automatic metrics come in as judges of kind "metric".
    Analysis("judges", "Judges", "judges", "each judge (LLM, automatic metric or imported), its kind and how much "
             "it answered", judge_stats.judge_summary, inputs=("judges", "judge_pairwise"),
             needs=frozenset({"judges"}), columns=table_columns.JUDGES),
    Analysis("judge_agreement", "Judges against the people", "judges",
             "one row per judge x dimension x level x method: correlations with the people's mean per response "
             "(bootstrap CIs over responses), Kendall tau of the systems and the same winner, Krippendorff's alpha "
             "with and without the judge, leave-one-out correlation, Cohen's kappa with the people's majority and "
             "position bias (pairwise)", judge_stats.judge_agreement,
             inputs=("ratings", "judges", "pairwise", "judge_pairwise"), figures=("judge_agreement", "judge_levels"),
             options={"n_boot": "ANALYSIS_BOOTSTRAP_SAMPLES"}, design_options=("baseline", "treatment"),
             needs=frozenset({"judges"}), columns=table_columns.JUDGE_AGREEMENT),
    Analysis("judge_rater_loo", "Each person and each judge against the people's mean", "judges",
             "every person's and every judge's Spearman correlation with the mean of the people other than them",
             judge_stats.judge_rater_loo, inputs=("ratings", "judges"), figures=("judge_loo",),
             needs=frozenset({"ratings", "judges"}), columns=table_columns.JUDGE_RATER_LOO),
    Analysis("judge_win_table", "Win table computed from each judge", "judges",
             "the study's win table (baseline vs treatment per system and scenario) with each judge as the rater",
             judge_stats.judge_win_table, inputs=("judges",), design_options=("baseline", "treatment", "references"),
             needs=frozenset({"ratings", "comparison", "judges"}), columns=table_columns.JUDGE_WIN_TABLE),
    _sensitivity("ttests", "Sensitivity: t-tests with and without the straight-lining rule",
                 "ttests.csv computed with and without the straight-lining rule", ("ratings", "subgroups")),
    _sensitivity("win_table", "Sensitivity: win table with and without the straight-lining rule",
                 "win_table.csv computed with and without the straight-lining rule", ("ratings", "comparison")),
    _sensitivity("anova", "Sensitivity: regional ANOVA with and without the straight-lining rule",
                 "anova.csv computed with and without the straight-lining rule", ("ratings", "regions")),
)

#: The result tables a run computes, by name. Tests narrow it to keep runs quick.
ANALYSES: dict[str, Analysis] = {analysis.name: analysis for analysis in REGISTERED}


_BY_NAME = dict(ANALYSES)


def base_of(variant: Analysis) -> Analysis:
    """The analysis a sensitivity variant reruns (looked up in the full list, even where tests narrow ANALYSES)."""
    base = _BY_NAME[variant.sensitivity_of]
    if base.function is None:
        raise LookupError(f"{variant.name} reruns {base.name}, which the statistics step does not compute")
    return base


def statistics_analyses(*, design: Iterable[str] | None = None) -> list[Analysis]:
    """The analyses the statistics step computes, for a study with ``design`` (None: every one).

    Plain analyses come first: a sensitivity variant reuses its base's function.
    """
    features = None if design is None else frozenset(design)
    chosen = [a for a in ANALYSES.values()
              if a.computed_by_statistics and (features is None or a.needs <= features)]
    return sorted(chosen, key=lambda a: a.sensitivity_of is not None)


def options_from_settings(analysis: Analysis) -> dict[str, Any]:
    """The keyword arguments of ``analysis`` read from the settings its entry names."""
    return {keyword: getattr(settings, setting) for keyword, setting in analysis.options.items()}


def figure_sources() -> list[tuple[str, str]]:
    """(figure key, table name) of every figure the results page draws, in page order."""
    return [(figure, a.name) for a in REGISTERED for figure in a.figures]


def figure_source(key: str) -> Analysis | None:
    """The analysis whose table a results-page figure is drawn from (keys ending in ``_`` are prefixes)."""
    for analysis in REGISTERED:
        for figure in analysis.figures:
            if key == figure or (figure.endswith("_") and key.startswith(figure)):
                return analysis
    return None


def sections(names: Iterable[str]) -> list[tuple[str, str, list[Analysis]]]:
    """The results-page sections holding ``names``: (key, heading, analyses in page order)."""
    present = set(names)
    grouped = []
    for key, heading in SECTIONS.items():
        members = [a for a in REGISTERED if a.section == key and a.name in present]
        if members:
            grouped.append((key, heading, members))
    return grouped
