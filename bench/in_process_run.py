"""A whole analysis run at TIDE size computed in-process (no broker: the tasks run where they are sent),
on SQLite, after the warm-up a worker does as it starts (``analysis.warmup``): issue 31's "≤ 1.5 s beyond
start-up".

A fresh SQLite database gets the TIDE study and 150 generated participants (bench/generate.py); then this
process imports the heavy libraries, as a worker does as it starts, and computes ``--runs`` runs one after
the other, as ``run_analysis`` does without a broker. Each run is timed from its claim to its finish (the
run's own timings say where it went: frames, quality, the paper's tables, the slowest others). The parts
are computed side by side on the machine's cores (``analysis.running.side_by_side``);
``ANALYSIS_PROCESSES=1`` computes them one after the other, as before.

Usage::

    python bench/in_process_run.py                 # 4 runs, 150 participants
    ANALYSIS_PROCESSES=1 python bench/in_process_run.py --runs 3

The load average is printed beside every figure.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TARGET_S = 1.5


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=4)
    parser.add_argument("--participants", type=int, default=150)
    args = parser.parse_args(argv)
    folder = Path(tempfile.mkdtemp(prefix="hev_in_process_run_"))
    os.environ.update(DATABASE_URL=f"sqlite:///{folder / 'db.sqlite3'}", DJANGO_SETTINGS_MODULE="config.settings")
    os.environ.pop("CELERY_BROKER_URL", None)
    subprocess.run([sys.executable, "bench/generate.py", "--participants", str(args.participants),
                    "--out", str(folder / "csv")], cwd=ROOT, check=True, capture_output=True)
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", "--noinput", verbosity=0)
    call_command("load_study", "--open", str(ROOT / "fixtures" / "tide.json"), verbosity=0)
    call_command("import_responses", "--study", "tide", "--participants", str(folder / "csv/participants.csv"),
                 "--ratings", str(folder / "csv/ratings.csv"), verbosity=0)
    warnings.simplefilter("ignore")
    import logging

    logging.disable(logging.INFO)  # each part's landing is logged; the figures are printed below
    from analysis import warmup
    from analysis.running import side_by_side
    from bench import bench_fanout as fanout_bench
    from surveys.models import Study

    warmup.warm_up()
    study = Study.objects.get(slug="tide")
    print(f"in-process run at {args.participants} participants, SQLite, {os.cpu_count()} cores, parts in "
          f"{side_by_side.processes_available()} process(es); load {os.getloadavg()[0]:.2f}")
    seconds = []
    for n in range(1, args.runs + 1):
        run, took = fanout_bench.in_process_run(study)
        seconds.append(took)
        if run.status != "done":
            raise SystemExit(f"run {run.pk} ended {run.status}: {run.error}")
        steps = ", ".join(f"{k} {run.timings[k]:.2f}" for k in ("frames", "quality", "persist", "statistics")
                          if k in run.timings)
        slowest = sorted(((v, k.removeprefix("statistics.")) for k, v in run.timings.items()
                          if k.startswith("statistics.")), reverse=True)[:3]
        print(f"run {n}: {seconds[-1]:.2f} s ({steps}; slowest {', '.join(f'{k} {v:.2f}' for v, k in slowest)}); "
              f"load {os.getloadavg()[0]:.2f}", flush=True)
    worst = max(seconds)
    print(f"{'PASS' if worst <= TARGET_S else 'FAIL'}: whole run in-process {min(seconds):.2f}-{worst:.2f} s "
          f"(target <= {TARGET_S} s beyond start-up)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
