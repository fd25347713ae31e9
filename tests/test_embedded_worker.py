"""The embedded default (bin/run) computes runs in the background: a celery worker on a
broker that needs no server (message files in a folder), next to a SQLite file.

Starting a run answers at once with a queued run; the worker then computes it. Needs no
PostgreSQL or Redis, so it runs in both passes; marked ``worker`` as it starts one.
"""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path

import pytest

from tests.support.paths import FIXTURES, ROOT

sys.path.insert(0, str(ROOT))
from bench import _stack  # noqa: E402

pytestmark = [pytest.mark.worker, pytest.mark.slow(reason="starts a real celery worker")]


def _run_status(database: Path, run_id: int) -> tuple[str, str]:
    with sqlite3.connect(database) as db:
        return db.execute("SELECT status, error FROM analysis_analysisrun WHERE id = ?", (run_id,)).fetchone()


def test_a_run_started_in_the_embedded_default_is_queued_at_once_and_computed_by_the_worker(tmp_path):
    database = tmp_path / "db.sqlite3"
    env = _stack.production_env(database_url=f"sqlite:///{database}", broker_url="filesystem://",
                                CELERY_FILESYSTEM_FOLDER=str(tmp_path / "queue"), DEBUG="true",
                                ANALYSIS_MODEL_MAX_ROWS="500", ANALYSIS_BOOTSTRAP_SAMPLES="10")
    _stack.manage("migrate", "--noinput", env=env)
    _stack.manage("load_study", "--open", str(FIXTURES / "counselor.json"), env=env)
    _stack.manage("simulate_participants", "--study", "counselor", "--n", "6", "--seed", "1", env=env)
    started = _stack.manage("run_analysis", "--study", "counselor", env=env)
    run_id = int(started.stdout.split()[1].rstrip(":"))
    assert started.stdout.strip().endswith("queued"), started.stdout  # nothing was computed in this process
    assert _run_status(database, run_id)[0] == "queued"
    assert any((tmp_path / "queue").iterdir())  # the message waits in the folder

    worker = _stack.CeleryWorker(env, log_path=tmp_path / "worker.log").start()
    try:
        _stack.wait_until(lambda: _run_status(database, run_id)[0] in {"done", "failed"}, timeout=240,
                          what="the worker to finish the run")
    finally:
        worker.stop()
    assert _run_status(database, run_id) == ("done", ""), (tmp_path / "worker.log").read_text()[-3000:]
