"""The statistics step of an analysis run, as a pure function: frames in, tables out.

Every table comes from ``analysis.registry``: the plain analyses on the
retained participants, then the sensitivity variants (the same analysis with
and without the straight-lining rule). A table whose function raises is not
turned into a quiet row: its error is returned in ``failures`` so the run
records it and the results page shows it. Expected data problems (too few
participants, a constant column) are not errors: the analysis returns a table
whose ``note`` says why.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from analysis import registry, stats
from analysis.design import Design
from analysis.registry import Analysis

logger = logging.getLogger(__name__)

# The looser participant set of the sensitivity variants keeps those excluded only by this rule.
SENSITIVITY_RULE = "straightlining"


@dataclass
class Statistics:
    """The outcome of the statistics step: tables by name, the error of each table that failed, seconds per table."""

    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    failures: dict[str, str] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)


def retained(ratings: pd.DataFrame, participants: pd.DataFrame, *, keep_rules: tuple[str, ...] = ()) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Ratings and participants of those retained, also keeping anyone excluded only by ``keep_rules``."""
    kept = participants[participants["excluded_by"].isin(("",) + keep_rules)]
    return ratings[ratings["participant_id"].isin(kept["participant_id"])], kept


def options_from_settings(analyses: Iterable[Analysis]) -> dict[str, dict[str, Any]]:
    """Keyword arguments of every analysis that has options, read from the settings (the pipeline's default)."""
    return {a.name: registry.options_from_settings(a) for a in analyses if a.options}


def with_design_options(options: Mapping[str, dict[str, Any]], design: Design) -> dict[str, dict[str, Any]]:
    """``options`` plus, for every analysis that takes any, the keywords its entry asks of the design."""
    merged = {name: dict(values) for name, values in options.items()}
    for analysis in registry.ANALYSES.values():
        if analysis.design_options:
            merged.setdefault(analysis.name, {}).update(design.options_for(analysis.design_options))
    return merged


@dataclass(frozen=True)
class Inputs:
    """The frames of the retained participants, and of the looser set of the sensitivity variants."""

    kept: Mapping[str, pd.DataFrame]
    loose: Mapping[str, pd.DataFrame]


#: Frames of people's answers besides the ratings, narrowed to the participants the quality rules keep; the
#: others (gold, the judges' answers) are not people's and are handed on whole.
_PEOPLES_FRAMES = ("pairwise",)


def statistics_inputs(frames: Mapping[str, pd.DataFrame]) -> Inputs:
    """Split the run's frames (by name, ``analysis.running.frame_builders``) once for every analysis: the retained
    participants, and the looser set of the sensitivity variants (``participants`` carries ``excluded_by``)."""
    ratings, participants = frames["ratings"], frames["participants"]
    split = {}
    for label, keep_rules in (("kept", ()), ("loose", (SENSITIVITY_RULE,))):
        people_ratings, people = retained(ratings, participants, keep_rules=keep_rules)
        narrowed = {name: frame if frame.empty else frame[frame["participant_id"].isin(people["participant_id"])]
                    for name, frame in frames.items() if name in _PEOPLES_FRAMES}
        split[label] = {**frames, "ratings": people_ratings, "participants": people, **narrowed}
    return Inputs(kept=split["kept"], loose=split["loose"])


def compute_table(analysis: Analysis, inputs: Inputs, options: Mapping[str, dict[str, Any]]) -> pd.DataFrame:
    """One table; raises whatever the analysis raises."""
    frames, loose = inputs.kept, inputs.loose
    if analysis.sensitivity_of is None:
        return analysis.function(*(frames[i] for i in analysis.inputs), **options.get(analysis.name, {}))
    base = registry.base_of(analysis)
    # The looser participant set is a superset, so it serves both variants' demographic lookups.
    extra = [loose[i] for i in base.inputs[1:]]
    return stats.sensitivity(base.function, frames["ratings"], loose["ratings"], *extra,
                             **options.get(base.name, {}))


def compute_statistics(
    frames: Mapping[str, pd.DataFrame],
    *,
    analyses: Iterable[Analysis] | None = None,
    options: Mapping[str, dict[str, Any]] | None = None,
    design: Design | None = None,
) -> Statistics:
    """Every statistics table of one run (pure: frames in, tables out).

    ``frames`` holds the run's frames by name (``analysis.running.frame_builders``: at least those the chosen
    analyses name); ``participants`` carries the quality columns (``excluded_by``). ``design`` (the study's,
    ``analysis.design``) chooses the analyses that apply to the study and fills their design keywords
    (baseline, treatment, subgroups...); ``analyses`` overrides the choice (default without a design: every
    registered one), ``options`` the values the registry reads from the settings.
    """
    if analyses is None:
        analyses = registry.statistics_analyses(design=None if design is None else design.features)
    chosen = list(analyses)
    options = options_from_settings(registry.ANALYSES.values()) if options is None else options
    if design is not None:
        options = with_design_options(options, design)
    inputs = statistics_inputs(frames)
    result = Statistics()
    for analysis in chosen:
        began = time.perf_counter()
        try:
            result.tables[analysis.name] = compute_table(analysis, inputs, options)
        except Exception as exc:  # noqa: BLE001 - one broken analysis must not hide the others; it is recorded
            logger.exception("analysis %s failed", analysis.name)
            result.failures[analysis.name] = f"{type(exc).__name__}: {exc}"
        result.timings[analysis.name] = round(time.perf_counter() - began, 3)
    return result
