"""The statistics step of an analysis run.

``analysis.tasks`` calls ``run_statistics`` after the run's quality results
are persisted. It computes every table of ``analysis.stats.ANALYSES`` on the
retained participants, the sensitivity variants (with and without the
straight-lining rule) and the rater-vs-judge agreement, times each analysis,
and stores the tables keyed by the run, so a retried attempt overwrites them.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pandas as pd
from django.conf import settings

from analysis import services, stats
from analysis.models import AnalysisRun

# The analyses whose conclusions the straight-lining rule could change.
SENSITIVITY_ANALYSES = ("win_table", "ttests", "anova")


def retained(ratings: pd.DataFrame, participants: pd.DataFrame, *, keep_rules: tuple[str, ...] = ()) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Ratings and participants of those retained, also keeping anyone excluded only by ``keep_rules``."""
    kept = participants[participants["excluded_by"].isin(("",) + keep_rules)]
    return ratings[ratings["participant_id"].isin(kept["participant_id"])], kept


def model_options(*, model_max_rows: int, bootstrap_samples: int) -> dict[str, dict[str, int]]:
    """Keyword arguments of the slow analyses; their result tables state any subsampling."""
    return {
        "mixed_model": {"max_rows": model_max_rows},
        "ordinal_model": {"max_rows": model_max_rows},
        "bradley_terry": {"n_boot": bootstrap_samples},
    }


def _call(name: str, ratings: pd.DataFrame, participants: pd.DataFrame, options: dict[str, dict[str, int]]) -> pd.DataFrame:
    inputs = {"ratings": ratings, "participants": participants}
    return stats.ANALYSES[name](*(inputs[i] for i in stats.ANALYSIS_INPUTS[name]), **options.get(name, {}))


def compute_statistics(
    ratings: pd.DataFrame,
    participants: pd.DataFrame,
    gold: pd.DataFrame,
    *,
    options: dict[str, dict[str, int]] | None = None,
    timings: dict[str, float] | None = None,
) -> dict[str, pd.DataFrame]:
    """Every statistics table for one run, by export name (pure: frames in, frames out)."""
    timings = {} if timings is None else timings
    options = options or {}
    kept_ratings, kept_participants = retained(ratings, participants)
    tables: dict[str, pd.DataFrame] = {}

    def timed(name: str, compute: Callable[[], pd.DataFrame]) -> None:
        began = time.perf_counter()
        tables[name] = compute()
        timings[name] = round(time.perf_counter() - began, 3)

    for name in stats.ANALYSES:
        timed(name, lambda name=name: _call(name, kept_ratings, kept_participants, options))
    loose_ratings, loose_participants = retained(ratings, participants, keep_rules=("straightlining",))
    for name in SENSITIVITY_ANALYSES:
        # The looser participant set is a superset, so it serves both variants' demographic lookups.
        extra = (loose_participants,) if "participants" in stats.ANALYSIS_INPUTS[name] else ()
        timed(f"sensitivity_{name}", lambda name=name, extra=extra: stats.sensitivity(
            stats.ANALYSES[name], kept_ratings, loose_ratings, *extra))
    timed("rater_judge", lambda: stats.rater_judge_agreement(kept_ratings, gold))
    return tables


def run_statistics(
    run: AnalysisRun, ratings: pd.DataFrame, participants: pd.DataFrame, gold: pd.DataFrame
) -> dict[str, float]:
    """Compute and persist the statistics tables of ``run``; returns the time of each analysis.

    ``participants`` is ``participants_frame`` plus the quality columns, so the
    retained participants are those whose ``excluded_by`` is empty.
    """
    timings: dict[str, float] = {}
    options = model_options(
        model_max_rows=settings.ANALYSIS_MODEL_MAX_ROWS, bootstrap_samples=settings.ANALYSIS_BOOTSTRAP_SAMPLES
    )
    tables = compute_statistics(ratings, participants, gold, options=options, timings=timings)
    services.result_tables_replace(run=run, tables=tables)
    return timings
