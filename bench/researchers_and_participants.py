"""Participants answering while researchers run an analysis and download everything (issue 31, target 2).

On the production stack (``bin/serve-production``: gunicorn, PostgreSQL, Redis, one celery worker), with the
TIDE study holding 150 imported participants and one finished run:

1. **participants alone**: ``--participants`` honest bots (120) start over 10 s and answer with think times
   (``--think-scale``, 0.1: a block in 2-12 s); the answer POSTs are timed;
2. **with researchers**: the same number of new bots, and 10 s after the first one starts, a researcher
   starts an analysis run (``POST /studies/tide/runs/``) and four researchers download
   ``everything.zip`` at the same moment. A download turned away (503, "another export is being prepared")
   is asked again after its ``Retry-After``, as a researcher clicks again.

Printed: answer POST p50/p95/p99 and errors in each phase (in phase 2, of the answers sent while the run or a
download was in progress), the run's time, each download's time and the times it was turned away.
Target: answer p95 <= 300 ms and no errors in phase 2.

    python bench/researchers_and_participants.py [--participants 120 --think-scale 0.1]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import sys
import threading
import time
import urllib.parse
from dataclasses import dataclass
from http.cookies import SimpleCookie
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import _stack, surge  # noqa: E402

DEFAULT_DB = "postgres://postgres@127.0.0.1:5432/hev_launch_researchers"
DEFAULT_BROKER = "redis://127.0.0.1:6379/9"
USERNAME, PASSWORD = "bench-researcher", "bench-researcher-password-31"
P95_TARGET = 0.300


@dataclass
class Download:
    seconds: float = 0.0
    turned_away: int = 0
    size: int = 0
    status: int = 0
    ended: float = 0.0  # seconds since the participants' recorder began


class Researcher:
    """A signed-in researcher over plain HTTP with a cookie jar (the stack's cookies are marked Secure, which
    urllib's jar would keep back over http://127.0.0.1)."""

    def __init__(self, base_url: str) -> None:
        parts = urllib.parse.urlsplit(base_url)
        self.host, self.port = parts.hostname, parts.port
        self.cookies: dict[str, str] = {}

    def request(self, method: str, path: str, fields: dict[str, str] | None = None,
                timeout: float = 300) -> tuple[int, http.client.HTTPMessage, bytes]:
        connection = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        headers = {"Cookie": "; ".join(f"{k}={v}" for k, v in self.cookies.items()),
                   "Referer": f"http://{self.host}:{self.port}{path}"}
        body = None
        if method == "POST":
            body = urllib.parse.urlencode({**(fields or {}), "csrfmiddlewaretoken": self.cookies.get("csrftoken", "")})
            headers["Content-Type"] = "application/x-www-form-urlencoded"
        try:
            connection.request(method, path, body=body, headers=headers)
            response = connection.getresponse()
            content = response.read()
            for header in response.headers.get_all("Set-Cookie") or []:
                for name, morsel in SimpleCookie(header).items():
                    self.cookies[name] = morsel.value
            return response.status, response.headers, content
        finally:
            connection.close()

    def sign_in(self) -> None:
        self.request("GET", "/accounts/login/")
        status, _, _ = self.request("POST", "/accounts/login/", {"username": USERNAME, "password": PASSWORD})
        if status != 302:
            raise SystemExit(f"the researcher could not sign in ({status})")

    def start_run(self) -> int:
        status, headers, _ = self.request("POST", f"/studies/{surge.SLUG}/runs/")
        if status != 302:
            raise SystemExit(f"the run could not be started ({status})")
        return int(re.search(r"/runs/(\d+)/", headers["Location"]).group(1))

    def run_status(self, run_id: int) -> str:
        _, _, content = self.request("GET", f"/studies/{surge.SLUG}/runs/{run_id}.json", timeout=30)
        return json.loads(content)["status"]

    def download_everything(self, t0: float) -> Download:
        outcome = Download()
        began = time.perf_counter()
        while True:
            status, headers, content = self.request("GET", f"/studies/{surge.SLUG}/exports/everything.zip")
            if status != 503:
                outcome.status, outcome.size = status, len(content)
                break
            outcome.turned_away += 1
            time.sleep(float(headers.get("Retry-After") or 5))
        outcome.seconds = time.perf_counter() - began
        outcome.ended = time.perf_counter() - t0
        return outcome


def prepare(env: dict[str, str], participants: int) -> None:
    """The TIDE study open to any number, with `participants` imported participants and one finished run."""
    import argparse as _argparse

    _stack.prepare_site(env)
    surge.django_setup(env)
    from django.contrib.auth import get_user_model

    import bench.bench_fanout as fanout_bench

    study, _ = fanout_bench.prepare_data(_argparse.Namespace(participants=participants, keep=False, seed=0),
                                         fanout_bench.Report())
    user, _ = get_user_model().objects.get_or_create(username=USERNAME)
    user.set_password(PASSWORD)
    user.save()
    study.owners.add(user)
    fanout_bench.in_process_run(study)
    study.__class__.objects.filter(pk=study.pk).update(target_completions=None, is_open=True)


def answers(recorder: surge.Recorder, window: tuple[float, float] | None = None) -> tuple[list[float], int]:
    chosen = [s for s in recorder.samples if s.kind == "answer"
              and (window is None or window[0] <= s.started + s.seconds and s.started <= window[1])]
    ok = [s.seconds for s in chosen if 0 < s.status < 400]
    return ok, len(chosen) - len(ok)


def line(label: str, latencies: list[float], errors: int) -> str:
    return (f"{label}: {len(latencies)} answers, p50 / p95 / p99 {surge.percentile(latencies, 50) * 1000:.0f} / "
            f"{surge.percentile(latencies, 95) * 1000:.0f} / {surge.percentile(latencies, 99) * 1000:.0f} ms, "
            f"{errors} errors")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--participants", type=int, default=120)
    parser.add_argument("--think-scale", type=float, default=0.1)
    parser.add_argument("--imported", type=int, default=150, help="participants imported for the analysis")
    parser.add_argument("--downloads", type=int, default=4)
    parser.add_argument("--database-url", default=DEFAULT_DB)
    parser.add_argument("--broker-url", default=DEFAULT_BROKER)
    parser.add_argument("--port", type=int, default=8137)
    args = parser.parse_args(argv)

    env = _stack.production_env(database_url=args.database_url, broker_url=args.broker_url)
    print(f"preparing {args.database_url} ({args.imported} imported participants, one finished run) ...", flush=True)
    prepare(env, args.imported)
    stack = _stack.ServeProduction(env, args.port, log_path=Path("/tmp/hev_researchers.log")).start()
    print(f"load average {os.getloadavg()[0]:.2f} at the start; {os.cpu_count()} cores", flush=True)
    try:
        _, recorder_alone = surge.run_bots(base_url=stack.base_url, n=args.participants, ramp=10,
                                           think_scale=args.think_scale, seed=11)
        latencies, errors = answers(recorder_alone)
        print(line("participants alone", latencies, errors), flush=True)

        researchers = [Researcher(stack.base_url) for _ in range(max(args.downloads, 1))]
        for researcher in researchers:
            researcher.sign_in()
        recorder = surge.Recorder()
        downloads: list[Download] = []
        run_times: dict[str, float] = {}

        def researchers_at_work() -> None:
            time.sleep(10)
            run_times["began"] = time.perf_counter() - recorder.t0
            run_id = researchers[0].start_run()
            threads = [threading.Thread(target=lambda r=r: downloads.append(r.download_everything(recorder.t0)))
                       for r in researchers[: args.downloads]]
            for thread in threads:
                thread.start()
            while researchers[0].run_status(run_id) not in {"done", "failed"}:
                time.sleep(0.25)
            run_times["ended"] = time.perf_counter() - recorder.t0
            run_times["status"] = researchers[0].run_status(run_id)
            for thread in threads:
                thread.join()

        work = threading.Thread(target=researchers_at_work)
        work.start()
        surge.run_bots(base_url=stack.base_url, n=args.participants, ramp=10, think_scale=args.think_scale,
                       seed=12, recorder=recorder)
        work.join()
    finally:
        stack.stop()
    busy = (run_times["began"], max([run_times["ended"], *(d.ended for d in downloads)]))
    latencies, errors = answers(recorder, busy)
    print(f"analysis run: {run_times['ended'] - run_times['began']:.1f} s ({run_times['status']})")
    for number, d in enumerate(downloads, 1):
        print(f"download {number}: status {d.status}, {d.size / 1e6:.1f} MB in {d.seconds:.1f} s, "
              f"turned away {d.turned_away} time(s)")
    print(line(f"with researchers ({busy[0]:.0f}-{busy[1]:.0f} s)", latencies, errors))
    passed = surge.percentile(latencies, 95) <= P95_TARGET and errors == 0
    print(f"target answer p95 <= {P95_TARGET * 1000:.0f} ms and no errors while researchers work: "
          f"{'PASS' if passed else 'FAIL'}; load average {os.getloadavg()[0]:.2f} at the end")
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
