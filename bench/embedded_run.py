"""The embedded default (bin/run's worker, SQLite, the filesystem broker): how long a researcher waits from
Start to the first tables and to the whole run, at TIDE size (150 participants, bench/generate.py).

The worker is started exactly as bin/run starts it (one process per core, heavy libraries imported as it
starts: analysis.warmup) and is given time to be ready; then runs are started one after the other. Start is
the run's created_at (written when the run is queued), first tables the moment the run's first result table
is seen, done its finished_at; the database is looked at every 10 ms.

Usage::

    python bench/embedded_run.py                 # 3 runs, 150 participants
    python bench/embedded_run.py --runs 5 --participants 300

The machine's other work slows it too: the load average is printed beside every figure.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import _stack  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def _when(text: str | None) -> float | None:
    return datetime.fromisoformat(text).timestamp() if text else None


def _worker(env: dict[str, str], log: Path, pool: str) -> subprocess.Popen:
    # bin/run's worker line (without beat: nothing here needs its schedule).
    concurrency = f"--concurrency={os.cpu_count() or 2}" if pool == "prefork" else "--concurrency=1"
    return subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "config", "worker", f"--pool={pool}", concurrency,
         "--loglevel=INFO", "--without-gossip", "--without-mingle", "--logfile", str(log)],
        cwd=ROOT, env=env, stdout=open(log.with_suffix(".out"), "wb"), stderr=subprocess.STDOUT,
    )


def _timings(database: Path, run_id: int, timeout: float = 120) -> tuple[float, float, str]:
    """(Start -> first table, Start -> done, status) of one run, from the database."""
    first_seen = None
    deadline = time.monotonic() + timeout
    with sqlite3.connect(database) as db:
        while time.monotonic() < deadline:
            status, created, finished = db.execute(
                "SELECT status, created_at, finished_at FROM analysis_analysisrun WHERE id = ?", (run_id,)).fetchone()
            if first_seen is None and db.execute(
                    "SELECT 1 FROM analysis_resulttable WHERE run_id = ? LIMIT 1", (run_id,)).fetchone():
                first_seen = time.time()
            if status in {"done", "failed"}:
                start = _when(created) if "+" in created else _when(created + "+00:00")
                end = _when(finished) if "+" in finished else _when(finished + "+00:00")
                return (first_seen or end) - start, end - start, status
            time.sleep(0.01)
    raise TimeoutError(f"run {run_id} did not finish in {timeout} s")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--participants", type=int, default=150)
    # For a comparison with the worker before issue 31: --pool solo --polling-ms 1000.
    parser.add_argument("--pool", choices=["prefork", "solo"], default="prefork")
    parser.add_argument("--polling-ms", type=int, default=50)
    args = parser.parse_args(argv)
    folder = Path(tempfile.mkdtemp(prefix="hev_embedded_run_"))
    database = folder / "db.sqlite3"
    env = _stack.production_env(database_url=f"sqlite:///{database}", broker_url="filesystem://",
                                CELERY_FILESYSTEM_FOLDER=str(folder / "queue"), DEBUG="true",
                                CELERY_FILESYSTEM_POLLING_MS=str(args.polling_ms))
    _stack.manage("migrate", "--noinput", env=env)
    _stack.manage("load_study", "--open", "fixtures/tide.json", env=env)
    subprocess.run([sys.executable, "bench/generate.py", "--participants", str(args.participants),
                    "--out", str(folder / "csv")], cwd=ROOT, check=True, capture_output=True)
    _stack.manage("import_responses", "--study", "tide", "--participants", str(folder / "csv/participants.csv"),
                  "--ratings", str(folder / "csv/ratings.csv"), env=env)
    log = folder / "worker.log"
    worker = _worker(env, log, args.pool)
    try:
        # "ready." goes to the log file (prefork) or to standard output (solo).
        _stack.wait_until(lambda: any(p.exists() and "ready." in p.read_text() for p in (log, log.with_suffix(".out"))),
                          timeout=300, what="the worker")
        print(f"embedded run at {args.participants} participants on {os.cpu_count()} cores "
              f"(worker: {args.pool}, filesystem broker polled every {args.polling_ms} ms); the machine is shared: "
              "see the load")
        print(f"{'run':>3} {'first tables s':>14} {'done s':>7} {'status':>7} {'load':>5}")
        for n in range(1, args.runs + 1):
            started = _stack.manage("run_analysis", "--study", "tide", env=env)
            run_id = int(started.stdout.split()[1].rstrip(":"))
            first, done, status = _timings(database, run_id)
            print(f"{n:3d} {first:14.2f} {done:7.2f} {status:>7} {os.getloadavg()[0]:5.1f}", flush=True)
    finally:
        worker.terminate()
        worker.wait(timeout=30)
    return 0


if __name__ == "__main__":
    sys.exit(main())
