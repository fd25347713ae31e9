"""Statistics for human-evaluation studies: tidy frames in, tidy frames out.

Every public function takes the retained ``ratings`` frame (one row per
rating; see ``docs/statistics.md``) and, where needed, the ``participants``
frame or a ``gold`` frame, and returns a *new* tidy DataFrame: one labelled row
per test or per cell. Nothing here does I/O, touches Django, or mutates its
inputs.

The functions live in one module per family (``primitives``, ``comparisons``,
``paired_dimensions``, ``demographics``, ``regional``, ``rankings``,
``best_worst``, ``pairwise``, ``reliability``, ``regression``, ``headline``); this package re-exports
them, so ``from analysis import stats`` and ``stats.win_table(...)`` work as they always did.

Conventions shared by all tables:

* a ``note`` column is always present; it is ``""`` when the analysis ran and
  otherwise says why a value is missing (too few participants, constant
  column, empty frame, missing columns, subsampling ...). Expected data
  problems never raise: each function checks for them and returns a row
  whose ``note`` explains the problem. Anything else is a bug and raises
  (``KeyError``, ``TypeError`` ...): nothing turns an exception into a table,
  so a broken analysis fails its run instead of hiding in a note.
* tables with several p-values carry ``p_holm`` (the values of statsmodels
  ``multipletests`` with ``method="holm"``, *not* its Holm-Sidak default) and a ``holm_family``
  column naming the family the correction ran over.
* tables carry ``n`` (or ``n_a``/``n_b``) so the reader can see what each
  number rests on.
"""

from __future__ import annotations



from analysis.stats.comparisons import (
    DESCRIPTIVES_COLUMNS, WILCOXON_COLUMNS, WIN_COLUMNS, WIN_SUMMARY_COLUMNS, win_summary_of_ratings, descriptives,
    paired_zs_ft, sensitivity, win_summary, win_table,
)
from analysis.stats.demographics import LEVELS, TTEST_COLUMNS, group_ttests, participant_groups
from analysis.stats.primitives import (
    ALPHA, CONFIDENCE, MISSING_ANSWERS, cohen_d, eta_squared, holm, mean_ci,
    rank_biserial,
)
from analysis.stats.rankings import (
    BRADLEY_TERRY_COLUMNS, FRIEDMAN_COLUMNS, POSITION_COLUMNS, RANK_SUMMARY_COLUMNS,
    bradley_terry, friedman_by_block, plackett_luce, position_bias, rank_summary,
)
from analysis.stats.regional import (
    ANOVA_COLUMNS, GAMES_HOWELL_COLUMNS, KRUSKAL_COLUMNS, REGION_MEANS_COLUMNS, WELCH_COLUMNS, region_means,
    regional_anova, regional_games_howell, regional_kruskal, regional_welch,
)
from analysis.stats.regression import MODEL_COLUMNS, mixed_model, ordinal_model
from analysis.stats.reliability import (
    ALPHA_COLUMNS, JUDGE_COLUMNS, RATER_LOO_COLUMNS, alpha_from_values, krippendorff_alpha, rater_judge_agreement,
    rater_loo_correlation,
)
from analysis.stats.best_worst import (
    BEST_WORST_COLUMNS, BEST_WORST_SHARES_COLUMNS, best_worst_scores, best_worst_shares,
)
from analysis.stats.paired_dimensions import (
    DIMENSION_WILCOXON_COLUMNS, PAIRING_LEVELS, TABLE_LEVELS, dimension_wilcoxon, valid_levels,
)
from analysis.stats.headline import (
    DEMOGRAPHICS_COLUMNS, REFERENCE_COLUMNS, DemographicQuestion, demographics_table, reference_vs_systems,
)
from analysis.stats.pairwise import (
    PAIRWISE_BT_COLUMNS, PAIRWISE_POSITION_COLUMNS, PAIRWISE_WIN_COLUMNS, pairwise_bradley_terry,
    pairwise_position_bias, pairwise_win_rates,
)

__all__ = [
    "ALPHA", "ALPHA_COLUMNS", "ANOVA_COLUMNS", "BEST_WORST_COLUMNS",
    "BRADLEY_TERRY_COLUMNS", "CONFIDENCE", "DESCRIPTIVES_COLUMNS", "FRIEDMAN_COLUMNS",
    "GAMES_HOWELL_COLUMNS", "JUDGE_COLUMNS", "KRUSKAL_COLUMNS", "LEVELS", "MISSING_ANSWERS",
    "MODEL_COLUMNS", "POSITION_COLUMNS", "RANK_SUMMARY_COLUMNS", "RATER_LOO_COLUMNS",
    "REGION_MEANS_COLUMNS", "TTEST_COLUMNS", "WELCH_COLUMNS", "WILCOXON_COLUMNS", "WIN_COLUMNS",
    "WIN_SUMMARY_COLUMNS", "alpha_from_values", "best_worst_scores", "bradley_terry",
    "cohen_d", "descriptives", "eta_squared", "friedman_by_block", "group_ttests", "holm", "krippendorff_alpha",
    "mean_ci", "mixed_model", "ordinal_model", "paired_zs_ft", "participant_groups", "plackett_luce",
    "position_bias", "rank_biserial", "rank_summary", "rater_judge_agreement", "rater_loo_correlation",
    "region_means", "regional_anova", "regional_games_howell", "regional_kruskal", "regional_welch",
    "sensitivity", "win_summary", "win_summary_of_ratings", "win_table",
    "BEST_WORST_SHARES_COLUMNS", "DIMENSION_WILCOXON_COLUMNS", "PAIRING_LEVELS", "TABLE_LEVELS", "valid_levels", "best_worst_shares",
    "dimension_wilcoxon", "PAIRWISE_BT_COLUMNS", "PAIRWISE_POSITION_COLUMNS", "PAIRWISE_WIN_COLUMNS",
    "pairwise_bradley_terry", "pairwise_position_bias", "pairwise_win_rates",
    "DEMOGRAPHICS_COLUMNS", "REFERENCE_COLUMNS", "DemographicQuestion", "demographics_table", "reference_vs_systems",
]
