"""Shared data for the researcher-side tests (API, permissions, pages, exports).

``owner`` owns the TIDE study, ``other`` owns a different study, ``staff`` is
staff; ``filled`` adds scripted participants and ``done_run`` a finished run.
Import the fixtures into a test module::

    from tests.researcher_data import *  # noqa: F401,F403  (pytest fixtures)
"""

from __future__ import annotations

import random
from datetime import datetime, timedelta, timezone

import pytest
from django.contrib.auth import get_user_model
from rest_framework.authtoken.models import Token

# Imported before any test narrows stats.ANALYSES: the export registry is built from it at import.
import analysis.exports  # noqa: F401
from analysis import services
from analysis.models import AnalysisRun
from bots.drive import BotRun, run_with_services
from bots.personas import persona_mix
from tests.conftest import load_fixture

PASSWORD = "correct horse battery staple"
# A fixed start keeps the bots' simulated times (and so the quality flags) reproducible.
BOT_START = datetime(2025, 3, 3, 9, 0, tzinfo=timezone.utc)

__all__ = ["owner", "other", "staff", "study", "other_study", "filled", "done_run", "owner_token",
           "fill_with_bots", "finished_run", "quick_stats", "PASSWORD", "QUICK_ANALYSES"]


def make_user(username: str, *, is_staff: bool = False):
    return get_user_model().objects.create_user(username, f"{username}@example.org", PASSWORD, is_staff=is_staff)


@pytest.fixture
def owner(db):
    return make_user("owner")


@pytest.fixture
def other(db):
    return make_user("other")


@pytest.fixture
def staff(db):
    return make_user("staff", is_staff=True)


@pytest.fixture
def study(tide, owner):
    tide.owners.add(owner)
    return tide


@pytest.fixture
def other_study(most_least, other):
    most_least.owners.add(other)
    return most_least


def fill_with_bots(study, n: int, *, seed: int = 1, mix: dict[str, float] | None = None) -> list[BotRun]:
    """n scripted participants saved through the services (fast; no HTTP)."""
    rng = random.Random(seed)
    personas = persona_mix(n, rng, **({"mix": mix} if mix else {}))
    return [
        run_with_services(persona=p, study=study, seed=seed * 1000 + i, start=BOT_START + timedelta(minutes=7 * i))
        for i, p in enumerate(personas)
    ]


@pytest.fixture
def filled(study):
    fill_with_bots(study, 12)
    return study


def finished_run(study, *, requested_by: str = "owner") -> AnalysisRun:
    """A run created the way the pages create it; tasks are eager, so it is done on return."""
    from analysis.tasks import run_analysis

    run = services.analysis_run_create(study=study, requested_by=requested_by)
    # on_commit hooks do not fire inside pytest's test transaction: run the task directly.
    run_analysis.apply(args=[run.pk])
    run.refresh_from_db()
    assert run.status == AnalysisRun.Status.DONE, run.error
    return run


# The cheap analyses: enough for tables, figures (rating chart, win grid, maps) and
# exports, in about a second instead of the ~20 s of the mixed and ordinal models.
QUICK_ANALYSES = ("win_table", "region_means", "descriptives")


@pytest.fixture
def quick_stats(monkeypatch):
    from analysis import pipeline, stats

    monkeypatch.setattr(stats, "ANALYSES", {name: stats.ANALYSES[name] for name in QUICK_ANALYSES})
    monkeypatch.setattr(pipeline, "SENSITIVITY_ANALYSES", ("win_table",))


@pytest.fixture
def done_run(filled, quick_stats):
    return finished_run(filled)


@pytest.fixture
def owner_token(owner) -> str:
    return Token.objects.create(user=owner).key
