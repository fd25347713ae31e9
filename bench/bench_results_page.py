"""Time the results page in Chromium (issue 19): when its first figure is drawn, and when every figure is.

Serves the site with gunicorn and the production settings (as
bin/serve-production does) on the database of ``DATABASE_URL``, whose TIDE
study needs a finished run: ``bench/bench_fanout.py --participants 151``
leaves several, or ``--prepare`` imports a TIDE-sized study and computes a run
in this process. Signs in as a bench researcher and opens the results page of
the latest finished run ``--loads`` times at 1280 x 900, two ways:

- **as a researcher gets there**: in a browser context that has shown the
  study's dashboard first (which loads the same plotly.js), so the static
  files come from the browser's cache, as they do for every page after the
  first (they are served with far-future cache headers under hashed names);
- **cold**: each load in a fresh context, nothing cached (the very first
  visit of a new browser).

A MutationObserver installed before any of the page's scripts records when
each figure is drawn (its SVG is there; a map's states too), in milliseconds
since the navigation started. The bench does not scroll: figures below the
fold must be drawn all the same.

Usage::

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/hev_bench_tide python bench/bench_results_page.py
    DATABASE_URL=... python bench/bench_results_page.py --prepare --loads 5

Targets (PASS/FAIL, on the median load as a researcher gets there): first figure <= 1 s, every figure
<= 3 s. The cold loads are printed beside them.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import sys
import tempfile
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
    from analysis import selectors

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


def signed_in(browser, base_url: str):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.add_init_script(RECORD_DRAWING)
    page = context.new_page()
    page.goto(f"{base_url}/accounts/login/")
    page.fill("input[name=username]", USERNAME)
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit], input[type=submit]")
    page.wait_for_url(lambda url: "/accounts/login/" not in url)
    return context, page


def one_load(page, base_url: str, path: str) -> dict:
    response = page.goto(f"{base_url}{path}")
    total = page.locator(".chart").count()
    page.wait_for_function(f"() => Object.keys(window.__drawn).length >= {total}", timeout=60_000, polling=50)
    drawn = page.evaluate("() => window.__drawn")
    figures = page.evaluate("() => (document.getElementById('figures-data') || {textContent: ''}).textContent.length")
    return {"first": min(drawn.values()), "all": max(drawn.values()), "n": total, "html": len(response.body()),
            "figures": figures}


def measure(browser, base_url: str, study, path: str, loads: int, *, warm: bool) -> list[dict]:
    label = "as a researcher gets there" if warm else "cold"
    results = []
    context = page = None
    for i in range(loads):
        if not warm or context is None:
            context, page = signed_in(browser, base_url)
            if warm:
                page.goto(f"{base_url}/studies/{study.slug}/")
                page.wait_for_selector("svg.main-svg")
        result = one_load(page, base_url, path)
        results.append(result)
        print(f"  {label}, load {i + 1}: first figure {result['first']:.0f} ms, all {result['n']} figures "
              f"{result['all']:.0f} ms (page {result['html'] / 1024:.0f} KiB, of which figures "
              f"{result['figures'] / 1024:.0f} KiB)")
        if not warm:
            context.close()
    if warm:
        context.close()
    return results


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
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True,
                                                 args=["--no-sandbox", "--disable-gpu"])
            cold = measure(browser, server.base_url, study, path, args.loads, warm=False)
            loads = measure(browser, server.base_url, study, path, args.loads, warm=True)
            browser.close()
    finally:
        server.stop()
    first = statistics.median(r["first"] for r in loads)
    every = statistics.median(r["all"] for r in loads)
    print(f"\nmedian of {len(cold)} cold loads: first figure {statistics.median(r['first'] for r in cold):.0f} ms, "
          f"every figure {statistics.median(r['all'] for r in cold):.0f} ms")
    print(f"median of {len(loads)} loads as a researcher gets there: first figure {first:.0f} ms, every figure "
          f"{every:.0f} ms; load {_load()}")
    print(f"{verdict(first <= FIRST_TARGET_MS)}  first figure drawn {first:.0f} ms after navigation "
          f"(target <= {FIRST_TARGET_MS} ms)")
    print(f"{verdict(every <= ALL_TARGET_MS)}  every figure drawn {every:.0f} ms after navigation "
          f"(target <= {ALL_TARGET_MS} ms)")


def _load() -> str:
    return "{:.2f} {:.2f} {:.2f}".format(*os.getloadavg())


if __name__ == "__main__":
    main()
