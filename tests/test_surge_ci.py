"""A short surge for CI: 60 participants take the whole TIDE survey over HTTP
against bin/serve-production (gunicorn + PostgreSQL, plus a celery worker when
a broker is configured), then every acknowledged answer is reconciled against
the database. Runs when DATABASE_URL names PostgreSQL (the stack gets its own
database next to the test one); skipped on SQLite-only runs unless
REQUIRE_SERVICES=1."""

from __future__ import annotations

import os
import sys
import time
from urllib.parse import urlsplit

import pytest

from tests.support.external_services import require_service
from tests.support.paths import ROOT

sys.path.insert(0, str(ROOT))

from bench import _stack, surge  # noqa: E402

pytestmark = pytest.mark.slow(reason="the surge benchmark's participants over HTTP")
N = int(os.environ.get("SURGE_CI_PARTICIPANTS", 60))


@pytest.fixture
def stack_url():
    url = os.environ.get("DATABASE_URL", "")
    require_service(url.startswith(("postgres://", "postgresql://")),
                    "the CI surge runs on PostgreSQL (set DATABASE_URL=postgres://...)")
    parts = urlsplit(url)
    return parts._replace(path=parts.path + "_surge").geturl()


def test_a_short_surge_loses_and_duplicates_nothing(stack_url, tmp_path, django_db_blocker):
    broker = os.environ.get("CELERY_BROKER_URL")
    env = _stack.production_env(database_url=stack_url, broker_url=broker)
    _stack.prepare_site(env)
    stack = _stack.ServeProduction(env, 8136, workers=3, celery=bool(broker), log_path=tmp_path / "stack.log").start()
    try:
        began = time.perf_counter()
        results, recorder = surge.run_bots(base_url=stack.base_url, n=N, ramp=5, think_scale=0.005, seed=1)
        summary = surge.summarize(results, recorder, time.perf_counter() - began, 0.0)
    finally:
        stack.stop()
    with django_db_blocker.unblock():
        rec = surge.reconcile(results, using=surge.database_alias(stack_url, alias="surge_ci"))
    print(summary["latency"], summary["throughput_rps"])
    assert summary["errors"] == 0, summary["error_kinds"] or summary["bot_errors"]
    assert summary["outcomes"].get("completed", 0) >= N * 0.8
    assert rec.clean, rec.details[:10]
    assert rec.acknowledged_ratings == rec.stored_ratings > 0
    # Shared CI runners are noisy: a loose bound here; bench/surge.py checks the 300 ms target.
    assert summary["latency"]["POST answer (block/check)"]["p95_ms"] < 5000
