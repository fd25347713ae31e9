"""The embedded default under concurrency: 30 participants at once on SQLite
(no DATABASE_URL) with 4 gunicorn workers. Passes with no "database is locked"
(neither an error response nor a line in the server log) and a clean
reconciliation of every acknowledged answer against the database.

Usage::

    python bench/sqlite_embedded.py            # 30 participants, a fresh SQLite file in /tmp
    python bench/sqlite_embedded.py --n 50 --think-scale 0.02
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import _stack, surge  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=30)
    parser.add_argument("--think-scale", type=float, default=0.01)
    parser.add_argument("--port", type=int, default=8135)
    parser.add_argument("--workers", type=int, default=4)
    args = parser.parse_args(argv)
    folder = Path(tempfile.mkdtemp(prefix="hev_launch_sqlite_"))
    url = f"sqlite:///{folder / 'db.sqlite3'}"
    env = _stack.production_env(database_url=url)
    _stack.prepare_site(env, collectstatic=True)
    log = folder / "gunicorn.log"
    server = _stack.Gunicorn(env, args.port, workers=args.workers, log_path=log).start()
    try:
        surge.django_setup(env)
        began = time.perf_counter()
        results, recorder = surge.run_bots(base_url=server.base_url, n=args.n, ramp=1, think_scale=args.think_scale,
                                           seed=5)
        summary = surge.summarize(results, recorder, time.perf_counter() - began, 0.0)
    finally:
        server.stop()
    rec = surge.reconcile(results)
    locked = log.read_text(errors="replace").lower().count("database is locked")
    print(f"SQLite embedded: {args.n} participants, {args.workers} gunicorn workers, {summary['requests']} requests "
          f"in {summary['wall_s']:.0f} s; outcomes {summary['outcomes']}; errors {summary['errors']} "
          f"{summary['error_kinds'] or ''}")
    for name, row in summary["latency"].items():
        print(f"  {name:28} p50 {row['p50_ms']:.0f} ms  p95 {row['p95_ms']:.0f} ms  p99 {row['p99_ms']:.0f} ms")
    print(f"reconciliation: {rec.acknowledged_ratings} acknowledged, {rec.stored_ratings} stored; lost {rec.lost}, "
          f"duplicated {rec.duplicated}, mismatched {rec.mismatched}, unexpected {rec.unexpected}")
    targets = [('0 "database is locked"', locked == 0 and summary["errors"] == 0), ("reconciliation clean", rec.clean)]
    for name, ok in targets:
        print(f"{'PASS' if ok else 'FAIL'}  {name}")
    return 0 if all(ok for _, ok in targets) else 1


if __name__ == "__main__":
    sys.exit(main())
