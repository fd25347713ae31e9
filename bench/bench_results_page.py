"""Time the results page in Chromium (issue 19): when its first figure is drawn, and when every figure is.

Serves the site with gunicorn and the production settings (as
bin/serve-production does) on the database of ``DATABASE_URL``, whose TIDE
study needs a finished run: ``bench/bench_fanout.py --participants 151``
leaves several, or ``--prepare`` imports a TIDE-sized study and computes a run
in this process. Signs in as a bench researcher and opens the results page of
the latest finished run ``--loads`` times, each in a fresh browser context
(nothing cached), at 1280 x 900. A MutationObserver installed before any of
the page's scripts records when each figure is drawn (its SVG is there; a
map's states too), in milliseconds since the navigation started. The bench
does not scroll: figures below the fold must be drawn all the same.

Usage::

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/hev_bench_tide python bench/bench_results_page.py
    DATABASE_URL=... python bench/bench_results_page.py --prepare --loads 5

Targets (PASS/FAIL, on the median load): first figure <= 1 s, every figure <= 3 s.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import _stack  # noqa: E402

FIRST_TARGET_MS = 1000
ALL_TARGET_MS = 3000
CHROMIUM = os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium")
USERNAME, PASSWORD = "bench-researcher", "bench-researcher-password"

# Runs before the page's own scripts: when did each figure get its SVG (and a map its states)?
RECORD_DRAWING = """
window.__drawn = {};
new MutationObserver(function () {
  document.querySelectorAll('.chart').forEach(function (el) {
    if (el.id in window.__drawn || !el.querySelector('svg.main-svg')) { return; }
    if (el.getAttribute('data-figure').indexOf('map_') === 0 && !el.querySelector('path.choroplethlocation')) { return; }
    window.__drawn[el.id] = performance.now();
  });
}).observe(document, { childList: true, subtree: true });
"""


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def finished_run(prepare: int | None):
    """The latest finished run of the TIDE study (computed here first with --prepare)."""
    from bench.bench_analysis import setup_django, tide_study

    setup_django()
    from analysis import runs, selectors

    study = tide_study()
    if prepare:
        import bench.bench_fanout as fanout_bench

        fanout_bench.prepare_data(argparse.Namespace(participants=prepare, keep=True, seed=0), fanout_bench.Report())
        run, _ = fanout_bench.in_process_run(study)
        return study, run
    run = selectors.analysis_run_latest_done(study=study)
    if run is None:
        raise SystemExit("no finished run of the TIDE study in this database: use --prepare")
    return study, run


def researcher_for(study) -> None:
    from django.contrib.auth import get_user_model

    user, _ = get_user_model().objects.get_or_create(username=USERNAME)
    user.set_password(PASSWORD)
    user.save()
    study.owners.add(user)


def one_load(browser, base_url: str, path: str) -> dict:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.goto(f"{base_url}/accounts/login/")
    page.fill("input[name=username]", USERNAME)
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit], input[type=submit]")
    page.wait_for_url(lambda url: "/accounts/login/" not in url)
    page.add_init_script(RECORD_DRAWING)
    page.goto(f"{base_url}{path}")
    total = page.locator(".chart").count()
    page.wait_for_function(f"() => Object.keys(window.__drawn).length >= {total}", timeout=60_000, polling=50)
    drawn = page.evaluate("() => window.__drawn")
    html = page.evaluate("() => document.documentElement.outerHTML.length")
    figures = page.evaluate("() => (document.getElementById('figures-data') || {textContent: ''}).textContent.length")
    context.close()
    return {"first": min(drawn.values()), "all": max(drawn.values()), "n": total, "html": html, "figures": figures}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loads", type=int, default=3)
    parser.add_argument("--prepare", type=int, nargs="?", const=151, default=None,
                        help="import N (151) participants and compute a run in this process first")
    args = parser.parse_args()
    database_url = os.environ.get("DATABASE_URL", "")
    if not database_url.startswith("postgres"):
        raise SystemExit("set DATABASE_URL=postgres://... (see the docstring)")
    study, run = finished_run(args.prepare)
    researcher_for(study)
    from playwright.sync_api import sync_playwright

    env = _stack.production_env(database_url=database_url)
    _stack.manage("collectstatic", "--noinput", env=env)
    logs = Path(tempfile.mkdtemp(prefix="bench-results-page-"))
    server = _stack.Gunicorn(env, free_port(), workers=2, log_path=logs / "gunicorn.log").start()
    path = f"/studies/{study.slug}/runs/{run.pk}/"
    print(f"results page of run {run.pk} ({run.n_participants} participants) in {CHROMIUM}; load {_load()}")
    loads = []
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True,
                                                 args=["--no-sandbox", "--disable-gpu"])
            for i in range(args.loads):
                began = time.perf_counter()
                result = one_load(browser, server.base_url, path)
                loads.append(result)
                print(f"  load {i + 1}: first figure {result['first']:.0f} ms, all {result['n']} figures "
                      f"{result['all']:.0f} ms (page {result['html'] / 1024:.0f} KiB, of which figures "
                      f"{result['figures'] / 1024:.0f} KiB; {time.perf_counter() - began:.1f} s with sign-in)")
            browser.close()
    finally:
        server.stop()
    first = statistics.median(r["first"] for r in loads)
    every = statistics.median(r["all"] for r in loads)
    print(f"\nmedian of {len(loads)} loads: first figure {first:.0f} ms, every figure {every:.0f} ms; load {_load()}")
    print(f"{verdict(first <= FIRST_TARGET_MS)}  first figure drawn {first:.0f} ms after navigation "
          f"(target <= {FIRST_TARGET_MS} ms)")
    print(f"{verdict(every <= ALL_TARGET_MS)}  every figure drawn {every:.0f} ms after navigation "
          f"(target <= {ALL_TARGET_MS} ms)")


def _load() -> str:
    return "{:.2f} {:.2f} {:.2f}".format(*os.getloadavg())


if __name__ == "__main__":
    main()
