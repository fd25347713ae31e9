"""How one analysis run is split between tasks, and the frames its tasks share.

A run's own task computes the quality rules and the paper's tables first
(``paper`` in the registry), so they are on the results page at once. The
other tables are computed by *part* tasks: each analysis marked ``own_task``
(slow at scale: models, bootstraps) alone, the quick ones together. Any
worker on any machine may take a part, so N workers divide a run's wall time.

The parts need the run's frames. The run's task leaves them in a file keyed
by run and attempt: for a million ratings, writing or reading it takes tens of
milliseconds, against seconds to build the frames from the database again. A
part on a machine without the file rebuilds them (``analysis.running.runs``).
"""

from __future__ import annotations

import logging
import os
import pickle
import tempfile
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
from django.conf import settings

from analysis.registry import Analysis

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Plan:
    """The paper's analyses (computed by the run's own task) and the table names of each part task."""

    paper: tuple[Analysis, ...]
    parts: tuple[tuple[str, ...], ...]

    @property
    def table_names(self) -> list[str]:
        return [a.name for a in self.paper] + [name for part in self.parts for name in part]


def statistics_plan(analyses: Iterable[Analysis], *, seconds: Mapping[str, float] | None = None) -> Plan:
    """Split ``analyses`` (in their registry order) into the paper's and the parts, longest part first.

    ``seconds`` are the tables' times in an earlier run of the study, if any:
    the parts are sent longest first, so the run's wall time is not that of a
    long part started last. Without them the slow analyses come first, one
    part each, and the quick ones, together, last.
    """
    chosen = list(analyses)
    rest = [a for a in chosen if not a.paper]
    quick = tuple(a.name for a in rest if not a.own_task)
    parts = [(a.name,) for a in rest if a.own_task] + ([quick] if quick else [])
    if seconds:
        parts.sort(key=lambda part: -sum(seconds.get(name, 0.0) for name in part))  # stable: ties keep order
    return Plan(paper=tuple(a for a in chosen if a.paper), parts=tuple(parts))


# --------------------------------------------------------------------------- the frames the parts share


def _folder() -> Path:
    return Path(settings.ANALYSIS_FRAME_CACHE_DIR)


def frames_path(*, run_id: int, attempt: int) -> Path:
    return _folder() / f"run-{run_id}-attempt-{attempt}.pickle"


def frames_store(*, run_id: int, attempt: int, frames: Mapping[str, pd.DataFrame]) -> None:
    """Leave the attempt's frames for its part tasks (atomically: a reader sees the whole file or none).

    Pickle keeps every dtype (categories, nullable integers, times) exactly.
    Unpickling runs code, so only this deployment's processes may write the
    folder: it is created private to the user the workers run as.
    """
    folder = _folder()
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    _remove_stale(folder)
    handle, temporary = tempfile.mkstemp(dir=folder, suffix=".partial")
    try:
        with os.fdopen(handle, "wb") as out:
            pickle.dump(dict(frames), out, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(temporary, frames_path(run_id=run_id, attempt=attempt))
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def frames_load(*, run_id: int, attempt: int) -> dict[str, pd.DataFrame] | None:
    """The frames the attempt's task left on this machine, or None (another machine, or already discarded)."""
    try:
        with frames_path(run_id=run_id, attempt=attempt).open("rb") as source:
            stored = pickle.load(source)  # noqa: S301 - our own private folder, see frames_store
    except FileNotFoundError:
        return None
    return stored


def frames_discard(*, run_id: int, attempt: int) -> None:
    """Remove the attempt's frames once its run is finished (a no-op on another machine)."""
    frames_path(run_id=run_id, attempt=attempt).unlink(missing_ok=True)


def _remove_stale(folder: Path) -> None:
    """Files older than a run may live: their run finished on another machine or its worker died."""
    oldest = time.time() - float(settings.ANALYSIS_RUN_LEASE_SECONDS) * 2
    for path in folder.iterdir():
        try:
            if path.stat().st_mtime < oldest:
                path.unlink()
        except FileNotFoundError:
            continue  # another worker removed it first
