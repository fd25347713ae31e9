"""Capacity: raise the number of concurrent clients step by step until the p95
latency passes 1 s or errors appear; report the sustained requests per second
of survey pages (participants answering with no think time) and of a trivial
view (/healthz: no database, no template) on the same stack, and their ratio.

Usage::

    python bench/capacity.py                          # steps 2,4,8,16,32,64; 20 s each
    python bench/capacity.py --steps 4,8,16 --seconds 10
"""

from __future__ import annotations

import argparse
import http.client
import os
import random
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import _stack, surge  # noqa: E402

DEFAULT_DB = "postgres://postgres@127.0.0.1:5432/hev_launch_capacity"


def healthz_step(base_url: str, clients: int, seconds: float) -> tuple[float, float, int]:
    """(requests/s, p95 s, errors) of `clients` threads hammering /healthz."""
    host, port = base_url.split("//")[1].split(":")
    latencies: list[float] = []
    errors = [0]
    deadline = time.perf_counter() + seconds

    def loop():
        while time.perf_counter() < deadline:
            began = time.perf_counter()
            try:
                conn = http.client.HTTPConnection(host, int(port), timeout=30)
                conn.request("GET", "/healthz")
                ok = conn.getresponse().read() == b"ok"
                conn.close()
            except OSError:
                ok = False
            if ok:
                latencies.append(time.perf_counter() - began)
            else:
                errors[0] += 1

    threads = [threading.Thread(target=loop) for _ in range(clients)]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - started
    return len(latencies) / wall, surge.percentile(latencies, 95), errors[0]


def survey_step(base_url: str, clients: int, seconds: float, seed: int) -> tuple[float, float, int]:
    """(requests/s, p95 s, errors) of `clients` bots taking the survey without pauses, over `seconds`."""
    recorder = surge.Recorder()
    stop_at = recorder.t0 + seconds
    holder: dict = {}

    def run():
        holder["results"], _ = surge.run_bots(base_url=base_url, n=clients, ramp=0, think_scale=0, seed=seed,
                                              recorder=recorder, mix={"honest": 1.0})

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(timeout=seconds)
    # Count only the window; bots still running finish in the background (daemon thread).
    window = [s for s in recorder.samples if s.started + s.seconds <= seconds]
    ok = [s.seconds for s in window if 0 < s.status < 400]
    errors = len(window) - len(ok)
    return len(ok) / seconds, surge.percentile(ok, 95), errors


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", default="2,4,8,16,32,64")
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--database-url", default=DEFAULT_DB)
    parser.add_argument("--port", type=int, default=8133)
    parser.add_argument("--workers", type=int, default=0)
    args = parser.parse_args(argv)
    env = _stack.production_env(database_url=args.database_url)
    _stack.prepare_site(env)
    server = _stack.Gunicorn(env, args.port, workers=args.workers, log_path=Path("/tmp/hev_launch_capacity.log"))
    server.start()
    surge.django_setup(env)  # the bots parse pages with bots.pages
    best = {"survey": 0.0, "healthz": 0.0}
    print(f"capacity on {os.cpu_count()} cores, gunicorn workers: {args.workers or 'config default'}; "
          f"load average {os.getloadavg()[0]:.1f} (the load generator shares the cores)")
    print(f"{'view':8} {'clients':>7} {'req/s':>8} {'p95 ms':>8} {'errors':>6}")
    try:
        for name, step in (("healthz", healthz_step), ("survey", survey_step)):
            for clients in [int(c) for c in args.steps.split(",")]:
                extra = (random.randrange(10**6),) if name == "survey" else ()
                rps, p95, errors = step(server.base_url, clients, args.seconds, *extra)
                print(f"{name:8} {clients:7d} {rps:8.1f} {p95 * 1000:8.0f} {errors:6d}", flush=True)
                if p95 > 1.0 or errors:
                    break
                best[name] = max(best[name], rps)
    finally:
        server.stop()
    ratio = best["survey"] / best["healthz"] if best["healthz"] else float("nan")
    print(f"sustained (p95 <= 1 s, no errors): survey pages {best['survey']:.1f} req/s, "
          f"/healthz {best['healthz']:.1f} req/s, ratio {ratio:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
