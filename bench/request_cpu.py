"""The CPU a participant's request costs in one process, and the share of it the garbage collector takes.

On a machine whose speed wanders by a fifth from one minute to the next, ``bench/capacity.py`` cannot see a
change of a few per cent; this measures the thing itself. One process loads the production settings and every
view (as a gunicorn worker does after gunicorn's ``when_ready``), then drives honest bots through Django's
test Client, one handler for all of them (as one worker), on the capacity study's database, and reports the
handler's CPU per request and the time spent in collections, per request, with the collector as a gunicorn
worker forked before 2026-12-02 had it and as ``config/gunicorn.conf.py``'s ``pre_fork`` leaves it
(``gc.freeze()``: what was loaded is out of the collector's reach). The two set-ups alternate, each in a fresh
process, ``--rounds`` times.

Usage::

    python bench/request_cpu.py                 # 3 rounds of 8 bots a set-up
    python bench/request_cpu.py --rounds 5 --bots 12

The database is the one ``bench/capacity.py`` prepares (run it once first); the load average is printed
beside every figure.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import _stack, surge  # noqa: E402
from bench.capacity import DEFAULT_DB  # noqa: E402


def measure(bots: int, freeze: bool, database_url: str) -> dict[str, float]:
    """In this process: warm up, then drive ``bots`` honest bots; CPU and collection time per request."""
    env = _stack.production_env(database_url=database_url)
    os.environ["SECURE_SSL_REDIRECT"] = env["SECURE_SSL_REDIRECT"]
    surge.django_setup(env)
    from django.core.handlers.base import BaseHandler
    from django.test import Client
    from django.urls import get_resolver

    from bots.drive import drive, new_external_id
    from bots.personas import persona_mix
    from bots.transports import ClientTransport

    get_resolver().url_patterns  # every view imported, as gunicorn's when_ready does before forking
    handled = {"cpu": 0.0, "requests": 0}
    plain_get_response = BaseHandler.get_response

    def timed_get_response(self, request):
        started = time.process_time()
        try:
            return plain_get_response(self, request)
        finally:
            handled["cpu"] += time.process_time() - started
            handled["requests"] += 1

    BaseHandler.get_response = timed_get_response
    rng = random.Random()
    client = Client(HTTP_HOST="127.0.0.1")  # one handler for every bot, as in a worker

    def drive_bots(n: int) -> None:
        for persona in persona_mix(n, rng, {"honest": 1.0}):
            client.cookies.clear()
            drive(ClientTransport(client), persona=persona, slug=surge.SLUG, external_id=new_external_id(rng), rng=rng)

    drive_bots(2)  # warm: the prepared statements, the study's content, the templates
    if freeze:
        gc.freeze()
    collecting = {"seconds": 0.0, "collections": 0, "started": 0.0}

    def on_collection(phase: str, info: dict) -> None:
        if phase == "start":
            collecting["started"] = time.perf_counter()
        else:
            collecting["seconds"] += time.perf_counter() - collecting["started"]
            collecting["collections"] += 1

    gc.callbacks.append(on_collection)
    handled.update(cpu=0.0, requests=0)
    drive_bots(bots)
    requests = handled["requests"]
    return {"requests": requests, "cpu_ms": 1000 * handled["cpu"] / requests,
            "gc_ms": 1000 * collecting["seconds"] / requests, "collections": collecting["collections"],
            "tracked": len(gc.get_objects())}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--bots", type=int, default=8)
    parser.add_argument("--database-url", default=DEFAULT_DB)
    parser.add_argument("--one", choices=["plain", "frozen"], help=argparse.SUPPRESS)  # a child's own set-up
    args = parser.parse_args(argv)
    if args.one:
        print(json.dumps(measure(args.bots, args.one == "frozen", args.database_url)))
        return 0
    print("set-up   requests  handler CPU ms/req  in collections ms/req  collections  load")
    for _ in range(args.rounds):
        for setup in ("plain", "frozen"):
            load = os.getloadavg()[0]
            out = subprocess.run([sys.executable, __file__, "--one", setup, "--bots", str(args.bots),
                                  "--database-url", args.database_url],
                                 check=True, capture_output=True, text=True, cwd=ROOT).stdout
            figures = json.loads(out.strip().splitlines()[-1])
            print(f"{setup:8s} {figures['requests']:9d} {figures['cpu_ms']:19.2f} {figures['gc_ms']:22.3f} "
                  f"{figures['collections']:12d} {load:5.1f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
