"""Time ``manage.py new_study --load`` on 2,000 prompts x 4 systems (issue 25's target: at most 10 s).

Generates the outputs file (8,000 rows, CSV) and a template with a sample-free design (and, once the
definition knows ``allocation``, 20 blocks per participant and r = 5), then runs the command as a researcher
would (a fresh process: Django's start-up counts) and prints the wall time with PASS/FAIL. It also checks
that the same file gives a byte-identical definition twice.

Usage::

    python bench/bench_new_study.py                    # SQLite file var/bench_new_study.sqlite3
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/hev_bench python bench/bench_new_study.py
    python bench/bench_new_study.py --prompts 500 --runs 3
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
os.environ.setdefault("DATABASE_URL", f"sqlite:///{ROOT / 'var' / 'bench_new_study.sqlite3'}")

TARGET_SECONDS = 10.0
SLUG = "bench-outputs"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=2000)
    parser.add_argument("--systems", type=int, default=4)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()

    import django

    django.setup()
    from django.core.management import call_command

    from surveys.definition import StudyDefinition
    from surveys.models import Block, Item, Study
    from tests.support.outputs_files import csv_bytes, outputs_rows, template_bytes

    (ROOT / "var").mkdir(exist_ok=True)
    call_command("migrate", verbosity=0)
    systems = tuple(f"system-{i}" for i in range(1, args.systems + 1))
    extra = {"slug": SLUG, "recruitment": {"mode": "open", "target_completions": 2000}}
    if "allocation" in StudyDefinition.model_fields:
        extra["allocation"] = {"blocks_per_participant": 20, "judgements_per_block": 5}
        # The target follows from the allocation (5 x blocks / 20); a larger one is refused.
        extra["recruitment"] = {"mode": "open"}
    work = Path(tempfile.mkdtemp(prefix="bench_new_study_"))
    outputs, template = work / "outputs.csv", work / "template.json"
    outputs.write_bytes(csv_bytes(outputs_rows(args.prompts, systems)))
    template.write_bytes(template_bytes(**extra))
    print(f"{args.prompts:,} prompts x {len(systems)} systems = {args.prompts * len(systems):,} rows "
          f"({outputs.stat().st_size / 1e6:.1f} MB); allocation: {extra.get('allocation', 'not in the schema yet')}; "
          f"database: {django.db.connection.vendor}; load average {os.getloadavg()[0]:.1f}")

    def remove_study() -> None:
        # Items and blocks protect what they point at: they go first.
        for model in (Item, Block, Study):
            model.objects.filter(**({"slug": SLUG} if model is Study else {"study__slug": SLUG})).delete()

    times = []
    for run in range(args.runs):
        remove_study()
        command = [sys.executable, str(ROOT / "manage.py"), "new_study", "--outputs", str(outputs), "--template",
                   str(template), "--out", str(work / f"definition-{run}.json"), "--load"]
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run(command, check=True, capture_output=True, env=os.environ)
        times.append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
        print(f"run {run + 1}: new_study + load {times[-1]:.2f} s wall, {cpu:.2f} s CPU of the command")
    study = Study.objects.get(slug=SLUG)
    blocks, items = study.blocks.count(), study.items.count()
    remove_study()
    identical = len({(work / f"definition-{run}.json").read_bytes() for run in range(args.runs)}) == 1
    best, worst = min(times), max(times)
    print(f"loaded {blocks:,} blocks, {items:,} items; best {best:.2f} s, worst {worst:.2f} s")
    ok_time = worst <= TARGET_SECONDS and blocks == args.prompts and items == args.prompts * len(systems)
    print(f"new_study + load <= {TARGET_SECONDS:g} s (worst of {args.runs}): {'PASS' if ok_time else 'FAIL'}")
    print(f"same file, byte-identical definition on every run: {'PASS' if identical else 'FAIL'}")
    print(json.dumps({"best_s": round(best, 2), "worst_s": round(worst, 2), "load": os.getloadavg()[0]}))
    return 0 if ok_time and identical else 1


if __name__ == "__main__":
    sys.exit(main())
