"""Time whole analysis runs through real Celery workers (issue 19): the paper's tables first, then the part tasks.

Generates and imports a TIDE-shaped study of N participants (bench/generate.py,
as bench/bench_analysis.py does), starts ``--workers`` celery workers (the
command of ``bin/serve-production``, one process each) on the Redis broker of
``CELERY_BROKER_URL``, and starts runs the way the pages do
(``runs.analysis_run_create``). While a run computes, this process polls the
database as the results page does and records when the paper's tables are
there and when the run is done. Wall times are measured from the run's
``started_at`` (the claim): the time spent queued is printed apart. The first
run warms the workers up (imports of statsmodels and friends) and is not judged.

Then, with ``--compare``, the same run is computed in this process with no
broker (the paper's tables here, the others side by side in processes forked
here: ``analysis.running.side_by_side``), and every table of the two runs is
compared cell by cell.

Usage::

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/hev_bench CELERY_BROKER_URL=redis://127.0.0.1:6379/7 \\
        python bench/bench_fanout.py                              # 10,000 participants, 2 workers
    ... python bench/bench_fanout.py --participants 151 --compare # TIDE size
    ... python bench/bench_fanout.py --keep --workers 1          # reuse the import; one worker

Targets (PASS/FAIL): at TIDE size (<= 1,000 participants) the paper's tables
are in within 1 s of the run starting and the whole run takes <= 3 s; at
10,000 participants the whole run takes <= 30 s with 2 workers; an import
made by this script takes <= 30 s; the fanned-out tables equal the in-process ones.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import _stack, generate  # noqa: E402
from bench.bench_analysis import Report, clear_participants, load, run_import, setup_django, tide_study  # noqa: E402

SMALL = 1_000  # at most this many participants: the targets of a study of TIDE's size
PAPER_TARGET_S = 1.0
SMALL_RUN_TARGET_S = 3.0
LARGE_RUN_TARGET_S = 30.0
IMPORT_TARGET_S = 30.0
POLL_S = 0.02


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def prepare_data(args, report: Report):
    """The study with N participants imported (again unless --keep finds them there)."""
    from analysis.imports.importers import gold_import
    from surveys.models import Participant

    data = ROOT / "var" / "bench" / str(args.participants)
    paths = {name: data / f"{name}.csv" for name in ("participants", "ratings", "gold")}
    study = tide_study()
    have = Participant.objects.filter(study=study).count()
    if args.keep and have == args.participants:
        print(f"  (--keep: reusing the {have} participants in the database)")
        return study, None
    if not all(p.exists() for p in paths.values()):
        with report.step("generate CSVs (bench/generate.py)"):
            generate.write(data, args.participants, args.seed)
    clear_participants(study)
    run_import(report, study, paths, "default")
    with paths["gold"].open("rb") as gold_file, report.step("import gold (gold_import)"):
        gold_import(study=study, gold_file=gold_file)
    return study, report.get("import (responses_import)").seconds


def start_workers(n: int, database_url: str, broker_url: str, logs: Path) -> list[_stack.CeleryWorker]:
    env = _stack.production_env(database_url=database_url, broker_url=broker_url,
                                ANALYSIS_FRAME_CACHE_DIR=str(logs / "run-frames"))
    workers = [_stack.CeleryWorker(env, logs / f"worker{i}.log", name=f"fanout{i}").start() for i in range(n)]
    for worker in workers:
        _stack.wait_until(lambda w=worker: "ready." in w.log_path.read_text(errors="replace"), timeout=120,
                          what=f"{worker.name} to be ready")
    return workers


def observe_run(study, paper: set[str]) -> dict:
    """Start a run as the pages do and watch it land: seconds from its start to the paper's tables and to done."""
    from django.db import transaction

    from analysis.running import runs
    from analysis.models import AnalysisRun, ResultTable

    sent = time.time()
    with transaction.atomic():
        run = runs.analysis_run_create(study=study, requested_by="bench")
    paper_at = None
    deadline = time.monotonic() + 1800
    while time.monotonic() < deadline:
        row = AnalysisRun.objects.filter(pk=run.pk).values("status", "started_at", "finished_at").get()
        if paper_at is None and row["started_at"] is not None:
            landed = set(ResultTable.objects.filter(run_id=run.pk, name__in=paper).values_list("name", flat=True))
            if landed == paper:
                paper_at = time.time()
        if row["status"] in {"done", "failed"}:
            break
        time.sleep(POLL_S)
    run.refresh_from_db()
    if run.status != "done":
        raise SystemExit(f"run {run.pk} ended {run.status}: {run.error}")
    started = run.started_at.timestamp()
    return {"run": run, "queued": started - sent, "paper": (paper_at or time.time()) - started,
            "whole": (run.finished_at - run.started_at).total_seconds()}


def in_process_run(study) -> tuple[object, float]:
    """The same run computed in this process with no broker (its other tables side by side in forked processes)."""
    from django.conf import settings

    from analysis.running import runs
    from analysis.models import AnalysisRun
    from config.celery import app

    settings.CELERY_TASK_ALWAYS_EAGER = app.conf.task_always_eager = True
    run = AnalysisRun.objects.create(study=study, thresholds=study.quality_thresholds, requested_by="bench in-process")
    began = time.perf_counter()
    claim = runs.run_claim(kind=runs.ANALYSIS, run_id=run.pk)
    runs.run_execute(kind=runs.ANALYSIS, run_id=run.pk, attempt=claim.attempt)
    seconds = time.perf_counter() - began
    run.refresh_from_db()
    return run, seconds


def differing_tables(mine, theirs) -> list[str]:
    from analysis.models import ResultTable

    def tables(run):
        return {t.name: (t.columns, t.rows) for t in ResultTable.objects.filter(run=run)}

    a, b = tables(mine), tables(theirs)
    return sorted(name for name in a.keys() | b.keys() if a.get(name) != b.get(name))


def print_parts(run) -> None:
    timings = run.timings
    main = [k for k in ("frames", "quality", "persist", "statistics", "fan-out") if k in timings]
    print("    run's own task: " + ", ".join(f"{k} {timings[k]:.2f}" for k in main))
    slow = sorted(((v, k.removeprefix("statistics.")) for k, v in timings.items() if k.startswith("statistics.")),
                  reverse=True)
    print("    tables (s): " + ", ".join(f"{name} {seconds:.2f}" for seconds, name in slow[:10]))
    frames = [v for k, v in timings.items() if k.startswith("part.")]
    if frames:
        print(f"    parts read their frames in {min(frames):.3f}-{max(frames):.3f} s each")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--participants", type=int, default=10_000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--runs", type=int, default=2, help="measured runs after the warm-up run")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keep", action="store_true", help="reuse the participants already imported")
    parser.add_argument("--compare", action="store_true", help="also compute the run in-process and compare")
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    database_url, broker_url = os.environ.get("DATABASE_URL", ""), os.environ.get("CELERY_BROKER_URL", "")
    if not database_url.startswith("postgres") or not broker_url.startswith("redis"):
        raise SystemExit("set DATABASE_URL=postgres://... and CELERY_BROKER_URL=redis://... (see the docstring)")
    setup_django()
    import redis

    from analysis import registry

    redis.Redis.from_url(broker_url).flushdb()  # the bench's own Redis database: no message of an older run
    print(f"{args.participants} participants, {args.workers} worker(s), {os.cpu_count()} cores; load {load()}")
    report = Report()
    study, import_s = prepare_data(args, report)
    from analysis.design import study_design

    # The paper's tables this study's runs compute (a study without pairwise choices has no pairwise tables).
    features = study_design(study.pk).features
    paper = {a.name for a in registry.statistics_analyses(design=features) if a.paper} | {"filter_flow"}
    logs = Path(tempfile.mkdtemp(prefix="bench-fanout-"))
    workers = start_workers(args.workers, database_url, broker_url, logs)
    observed = []
    try:
        for i in range(args.runs + 1):
            result = observe_run(study, paper)
            label = "warm-up" if i == 0 else f"run {i}"
            print(f"  {label}: paper tables in {result['paper']:.2f} s, whole run {result['whole']:.2f} s "
                  f"(queued {result['queued']:.2f} s before a worker took it); load {load()}")
            print_parts(result["run"])
            if i:
                observed.append(result)
    finally:
        for worker in workers:
            worker.stop()
    print(f"  worker logs: {logs}")

    small = args.participants <= SMALL
    whole = max(r["whole"] for r in observed)
    paper_s = max(r["paper"] for r in observed)
    print(f"\nmeasured runs: whole {statistics.median(r['whole'] for r in observed):.2f} s median, "
          f"{whole:.2f} s slowest; paper tables {paper_s:.2f} s slowest; load at end {load()}")
    if import_s is not None:
        print(f"{verdict(import_s <= IMPORT_TARGET_S)}  import {import_s:.1f} s (target <= {IMPORT_TARGET_S:.0f} s)")
    if small:
        print(f"{verdict(paper_s <= PAPER_TARGET_S)}  paper tables on the page {paper_s:.2f} s after the run "
              f"started (target <= {PAPER_TARGET_S:.0f} s)")
    target = SMALL_RUN_TARGET_S if small else LARGE_RUN_TARGET_S
    print(f"{verdict(whole <= target)}  whole run {whole:.2f} s with {args.workers} worker(s) "
          f"(target <= {target:.0f} s)")
    if args.compare:
        mine = observed[-1]["run"]
        theirs, seconds = in_process_run(study)
        print(f"  in-process run (no broker, the other tables side by side here): {seconds:.2f} s")
        print_parts(theirs)
        different = differing_tables(mine, theirs)
        print(f"{verdict(not different)}  the fanned-out tables equal the in-process run's"
              + (f" (differ: {', '.join(different)})" if different else ""))


if __name__ == "__main__":
    main()
