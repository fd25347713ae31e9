"""Capacity of the production stack: how many participant requests per second it serves at p95 <= 250 ms.

For each number of clients, on one server in one run: first /healthz (no database, no template), then the
survey. Every client loops for the whole window: a survey client answers its survey with no pauses and,
when it is done, starts again as a new participant, so the offered load is the same from the first second
to the last. A row is sustained when its p95 is at most 250 ms with no errors; the ratio compares the survey
with /healthz at the same number of clients in the same run. Every row also shows the queries per request of
the pages served (block GET and answer POST), counted in-process on the same code and database by one bot
driven through Django's test Client (the count does not depend on the load), the load generator's own CPU
(``client``, in cores) and the server's CPU per request (``ms/req``: gunicorn and PostgreSQL), which moves
less than req/s with what else the machine does.

Usage::

    python bench/capacity.py                          # steps 4,8,16,32; 20 s each
    python bench/capacity.py --steps 4,8,16 --seconds 10

The machine's other work slows it too: print ``uptime`` beside each figure.
"""

from __future__ import annotations

import argparse
import http.client
import os
import random
import statistics
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import _stack, surge  # noqa: E402

DEFAULT_DB = "postgres://postgres@127.0.0.1:5432/hev_launch_capacity"
P95_TARGET = 0.250  # seconds: a row is sustained at or under it, with no errors
# Transaction control is not counted as a query (as in tests/test_capacity_queries.py).
_CONTROL = ("SAVEPOINT", "RELEASE SAVEPOINT", "ROLLBACK", "BEGIN", "COMMIT")


@dataclass(frozen=True)
class Step:
    rps: float
    p95: float
    errors: int
    # The load generator's own CPU (cores' worth, its process time over the wall time): what it took from the server.
    client_cores: float = float("nan")
    # The server's CPU (gunicorn and PostgreSQL) per request served in the step, in milliseconds: what a request
    # costs, less sensitive than req/s to what else the machine does; 2 cores / this = the ceiling in req/s.
    server_ms: float = float("nan")

    @property
    def sustained(self) -> bool:
        return self.p95 <= P95_TARGET and self.errors == 0


def server_cpu_seconds() -> float:
    """CPU seconds used so far by the server's processes: gunicorn's and PostgreSQL's, with the children
    they have reaped (a gunicorn worker replaced after max_requests, a closed database connection), so that
    the difference over a step is what the server spent on it, whatever exited meanwhile."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                command = f.read().replace(b"\0", b" ")
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:  # exited meanwhile: its time is in its parent's children's time
            continue
        if b"gunicorn" in command or command.startswith(b"postgres") or b"bin/postgres" in command:
            total += sum(int(value) for value in fields[11:15])  # utime, stime, cutime, cstime
    return total / ticks


class _WindowOver(Exception):
    """Raised between two pages once the window has closed: the client stops where it is."""


def healthz_step(base_url: str, clients: int, seconds: float) -> Step:
    """`clients` threads asking for /healthz back to back for `seconds`."""
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
    return Step(len(latencies) / (time.perf_counter() - started), surge.percentile(latencies, 95), errors[0])


def survey_step(base_url: str, clients: int, seconds: float, seed: int) -> Step:
    """`clients` honest bots answering with no pauses for `seconds`, each starting a new survey when one ends."""
    from bots.drive import drive, new_external_id
    from bots.personas import persona_mix

    TimedTransport, _ = surge.timed_transport_class()
    recorder = surge.Recorder()
    deadline = recorder.t0 + seconds
    honest = persona_mix(1, random.Random(seed), {"honest": 1.0})[0]

    def stop_when_over(_seconds: float) -> None:
        if time.perf_counter() >= deadline:
            raise _WindowOver

    def client(i: int) -> None:
        rng = random.Random(seed * 100003 + i)
        while time.perf_counter() < deadline:
            try:
                drive(TimedTransport(base_url, recorder), persona=honest, slug=surge.SLUG,
                      external_id=new_external_id(rng), rng=rng, advance=stop_when_over)
            except _WindowOver:
                return
            except Exception:  # noqa: BLE001 - the failed request is in the recorder as an error
                continue

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    cpu_began, server_began = time.process_time(), server_cpu_seconds()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    client_cores = (time.process_time() - cpu_began) / (time.perf_counter() - recorder.t0)
    server_ms = (server_cpu_seconds() - server_began) * 1000 / max(len(recorder.samples), 1)
    # Only requests that ended inside the window (the last ones of each client may end just after it).
    window = [s for s in recorder.samples if s.started + s.seconds <= seconds]
    ok = [s.seconds for s in window if 0 < s.status < 400]
    return Step(len(ok) / seconds, surge.percentile(ok, 95), len(window) - len(ok), client_cores, server_ms)


def queries_per_request() -> dict[str, float]:
    """Data queries (transaction control left out) per block GET and per answer POST of one honest bot,
    in-process through Django's test Client on the stack's database."""
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    from bots.drive import drive, new_external_id
    from bots.personas import persona_mix
    from bots.transports import ClientTransport

    counts: dict[str, list[int]] = {"GET page": [], "POST page": []}

    class Counting(ClientTransport):
        def request(self, method, path, data=None):
            with CaptureQueriesContext(connection) as captured:
                response = super().request(method, path, data)
            if path.endswith("/page/"):
                data_queries = [q for q in captured if not q["sql"].lstrip().upper().startswith(_CONTROL)]
                counts[f"{method} page"].append(len(data_queries))
            return response

    rng = random.Random(7)
    honest = persona_mix(1, rng, {"honest": 1.0})[0]
    drive(Counting(Client(HTTP_HOST="127.0.0.1")), persona=honest, slug=surge.SLUG,
          external_id=new_external_id(rng), rng=rng)
    # The median: the process's first page also reads the study's dimensions and questions (once).
    return {kind: (statistics.median(values) if values else float("nan")) for kind, values in counts.items()}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", default="4,8,16,32")
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--database-url", default=DEFAULT_DB)
    parser.add_argument("--port", type=int, default=8133)
    parser.add_argument("--workers", type=int, default=0)
    args = parser.parse_args(argv)
    env = _stack.production_env(database_url=args.database_url)
    _stack.prepare_site(env)
    server = _stack.Gunicorn(env, args.port, workers=args.workers, log_path=Path("/tmp/hev_launch_capacity.log"))
    server.start()
    # The bots parse pages with bots.pages; the query count runs in-process, over plain http like the stack.
    os.environ["SECURE_SSL_REDIRECT"] = env["SECURE_SSL_REDIRECT"]
    surge.django_setup(env)
    queries = queries_per_request()
    print(f"capacity on {os.cpu_count()} cores, gunicorn workers: {args.workers or 'config default'}; "
          f"load average {os.getloadavg()[0]:.1f} (the load generator shares the cores)")
    print(f"queries per request: block GET {queries['GET page']:.1f}, answer POST {queries['POST page']:.1f} "
          "(median over one bot's survey, in-process; transaction control not counted)")
    print(f"{'clients':>7} {'healthz/s':>10} {'p95 ms':>7} {'survey/s':>9} {'p95 ms':>7} {'errors':>6} "
          f"{'ratio':>6} {'q/GET':>6} {'q/POST':>6} {'client':>6} {'ms/req':>6} {'load':>5}  sustained")
    best: tuple[int, Step, float] | None = None
    try:
        for clients in [int(c) for c in args.steps.split(",")]:
            healthz = healthz_step(server.base_url, clients, args.seconds)
            survey = survey_step(server.base_url, clients, args.seconds, random.randrange(10**6))
            ratio = survey.rps / healthz.rps if healthz.rps else float("nan")
            print(f"{clients:7d} {healthz.rps:10.1f} {healthz.p95 * 1000:7.0f} {survey.rps:9.1f} "
                  f"{survey.p95 * 1000:7.0f} {survey.errors:6d} {ratio:6.3f} {queries['GET page']:6.1f} "
                  f"{queries['POST page']:6.1f} {survey.client_cores:6.2f} {survey.server_ms:6.1f} {os.getloadavg()[0]:5.1f}  "
                  f"{'yes' if survey.sustained else 'no'}",
                  flush=True)
            if survey.sustained and (best is None or survey.rps > best[1].rps):
                best = (clients, survey, ratio)
    finally:
        server.stop()
    if best is None:
        print(f"sustained (p95 <= {P95_TARGET * 1000:.0f} ms, no errors): no step")
    else:
        print(f"sustained (p95 <= {P95_TARGET * 1000:.0f} ms, no errors): survey {best[1].rps:.1f} req/s at "
              f"{best[0]} clients, ratio to /healthz in the same run {best[2]:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
