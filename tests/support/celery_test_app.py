"""The project's Celery app with knobs for the real-worker tests (``celery -A tests.support.celery_test_app worker``).

Environment variables, read only here:
TEST_VISIBILITY_TIMEOUT  seconds before Redis hands an unacknowledged message to another worker
TEST_RUN_LEASE_SECONDS   ``settings.ANALYSIS_RUN_LEASE_SECONDS`` in this worker
TEST_STATISTICS_DELAY    seconds the statistics step sleeps, so a test can kill the worker mid-run
"""

from __future__ import annotations

import os
import time

import django

from config.celery import app

django.setup()

from django.conf import settings  # noqa: E402

from analysis import pipeline  # noqa: E402

if os.environ.get("TEST_VISIBILITY_TIMEOUT"):
    app.conf.broker_transport_options = {
        **(app.conf.broker_transport_options or {}),
        "visibility_timeout": float(os.environ["TEST_VISIBILITY_TIMEOUT"]),
    }
if os.environ.get("TEST_RUN_LEASE_SECONDS"):
    settings.ANALYSIS_RUN_LEASE_SECONDS = float(os.environ["TEST_RUN_LEASE_SECONDS"])
if os.environ.get("TEST_STATISTICS_DELAY"):
    _real_statistics = pipeline.compute_statistics
    _delay = float(os.environ["TEST_STATISTICS_DELAY"])

    def _slow_statistics(*args, **kwargs):
        time.sleep(_delay)
        return _real_statistics(*args, **kwargs)

    pipeline.compute_statistics = _slow_statistics

__all__ = ["app"]
