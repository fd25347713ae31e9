"""Where the statistics step plugs into an analysis run.

``analysis.tasks.run_analysis`` calls ``run_statistics`` after the quality
results of the run are persisted. For now it persists nothing more: the
integrator fills it with the calls into ``analysis.stats`` (win table,
t-tests, ANOVA, ...) and stores each tidy result with
``analysis.services.result_tables_replace(run=run, tables={...})``, so the
tables are keyed by run and a retried attempt overwrites them.
"""

from __future__ import annotations

import pandas as pd

from analysis.models import AnalysisRun


def run_statistics(run: AnalysisRun, ratings: pd.DataFrame, participants: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """Compute and persist the statistics tables of ``run``; returns them by name.

    ``ratings`` is ``analysis.frames.ratings_frame`` (every participant);
    ``participants`` is ``participants_frame`` plus the quality columns
    (sd, mae, fast_share, excluded_by, payable, reject_reason), so retained
    participants are ``participants[participants.excluded_by == ""]``.
    Must not mutate its inputs.
    """
    return {}
