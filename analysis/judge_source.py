"""Where an analysis run finds the judges' answers (LLM judges, metrics, imported judgements).

The judges app (judges/, above analysis) registers its selectors here when it starts (``judges.apps``), so
analysis never imports it. With nothing registered, a study simply has no judges.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pandas as pd


@dataclass(frozen=True)
class JudgeSource:
    #: study id -> whether any judge answered in it.
    has_answers: Callable[[int], bool]
    #: study id -> the judges' ratings (``analysis.stats.judges`` columns).
    ratings_frame: Callable[[int], pd.DataFrame]
    #: study id -> the judges' pairwise choices.
    pairwise_frame: Callable[[int], pd.DataFrame]


_registered: list[JudgeSource] = []


def judge_source_register(source: JudgeSource) -> None:
    """Make ``source`` the one the runs read (registering again replaces it: a reloaded app)."""
    _registered[:] = [source]


def judge_source() -> JudgeSource | None:
    """The registered source, or None when no app provides judges."""
    return _registered[0] if _registered else None
