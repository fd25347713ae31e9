"""Researcher-side test data: users, scripted participants and finished runs.

The fixtures built from these (``owner``, ``other``, ``staff``, ``study``,
``other_study``, ``filled``, ``done_run``, ``owner_token`` ...) are declared
in ``tests/conftest.py``.
"""

from __future__ import annotations

import random
import re
from datetime import datetime, timedelta, timezone

from django.contrib.auth import get_user_model

from analysis.running import runs
from analysis.models import AnalysisRun
from bots.drive import BotRun, run_with_services
from bots.personas import persona_mix

PASSWORD = "correct horse battery staple"
# A fixed start keeps the bots' simulated times (and so the quality flags) reproducible.
BOT_START = datetime(2025, 3, 3, 9, 0, tzinfo=timezone.utc)
# The cheap analyses: enough for tables, figures (rating chart, win grid, maps) and
# exports, in about a second instead of the ~20 s of the mixed and ordinal models.
QUICK_ANALYSES = ("win_table", "region_means", "descriptives")


def make_user(username: str, *, is_staff: bool = False):
    return get_user_model().objects.create_user(username, f"{username}@example.org", PASSWORD, is_staff=is_staff)


def fill_with_bots(study, n: int, *, seed: int = 1, mix: dict[str, float] | None = None) -> list[BotRun]:
    """n scripted participants saved through the services (fast; no HTTP)."""
    rng = random.Random(seed)
    personas = persona_mix(n, rng, **({"mix": mix} if mix else {}))
    return [
        run_with_services(persona=p, study=study, seed=seed * 1000 + i, start=BOT_START + timedelta(minutes=7 * i))
        for i, p in enumerate(personas)
    ]


def finished_run(study, *, requested_by: str = "owner") -> AnalysisRun:
    """A run created the way the pages create it; tasks are eager, so it is done on return."""
    from analysis.tasks import run_analysis

    run = runs.analysis_run_create(study=study, requested_by=requested_by)
    # on_commit hooks do not fire inside pytest's test transaction: run the task directly.
    run_analysis.apply(args=[run.pk])
    run.refresh_from_db()
    assert run.status == AnalysisRun.Status.DONE, run.error
    return run


def narrow_analyses(monkeypatch, names) -> None:
    """Runs in this test compute only the registered analyses ``names`` (the exclusion flow always)."""
    from analysis import registry

    monkeypatch.setattr(registry, "ANALYSES", {name: registry.ANALYSES[name] for name in names})


def field(page: str, name: str) -> str:
    """The text of the dashboard element marked ``data-field="name"``."""
    match = re.search(rf'data-field="{re.escape(name)}">([^<]*)<', page)
    assert match, f"no data-field {name}"
    return match.group(1)
