"""Stream the cleaned ratings export of a large study and measure speed and memory.

The study is TIDE with 10,000 imported participants x 24 blocks x 5 responses =
1.2 million ratings (generated CSVs through ``analysis.imports.importers.responses_import``,
the same path as a researcher's upload) and a finished run that retains everyone.
The export then goes through the real view (Django test Client, streaming
response) and every chunk is read and discarded. The targets (issue 19, item 7):
at least 100,000 rows/s, and the exporting process stays at or under 300 MB
(300 x 10^6 bytes) peak RSS; each gets a PASS/FAIL line, with the load average
(the machine is shared: figures under load are slower).

Data are prepared once (in a child process, so the import's own memory does not
count against the export) and reused by later runs.

Usage::

    python bench/bench_export.py                      # SQLite file var/bench_export.sqlite3
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/hev_bench python bench/bench_export.py
    python bench/bench_export.py --participants 1000  # smaller study
    python bench/bench_export.py --fresh              # empty the database and prepare again

The database is the benchmark's own: ``--fresh`` (and a change of size) empties
it. PostgreSQL: create it first, e.g. ``createdb -h 127.0.0.1 -U postgres hev_bench``.
"""

from __future__ import annotations

import argparse
import csv
import os
import random
import resource
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
os.environ.setdefault("DATABASE_URL", f"sqlite:///{ROOT / 'var' / 'bench_export.sqlite3'}")

BLOCKS = 24
RESPONSES = 5
SLUG = "tide"
USER = "bench-researcher"
START = datetime(2025, 3, 3, 9, 0, tzinfo=timezone.utc)


def setup_django() -> None:
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def write_csvs(folder: Path, n: int, seed: int = 0) -> tuple[Path, Path]:
    """participants.csv and ratings.csv of DESIGN 3.1 for n participants who answered every block."""
    rng = random.Random(seed)
    participants, ratings = folder / "participants.csv", folder / "ratings.csv"
    with participants.open("w", newline="") as p_file, ratings.open("w", newline="") as r_file:
        p_out, r_out = csv.writer(p_file), csv.writer(r_file)
        p_out.writerow(["participant_id", "started_at", "finished_at", "attention_passed", "age", "sex", "gender",
                        "race", "hispanic", "education", "employment", "state"])
        r_out.writerow(["participant_id", "block_id", "response_id", "position", "rating", "rank",
                        "block_started_at", "block_submitted_at"])
        positions = list(range(1, RESPONSES + 1))
        for i in range(n):
            pid = f"{i:024x}"
            started = START + timedelta(minutes=i)
            p_out.writerow([pid, started.isoformat(), (started + timedelta(minutes=35)).isoformat(), "true",
                            "", "", "", "", "", "", "", ""])
            blocks = list(range(1, BLOCKS + 1))
            rng.shuffle(blocks)
            for order, block in enumerate(blocks):
                shown = started + timedelta(seconds=60 + 80 * order)
                submitted = (shown + timedelta(seconds=45)).isoformat()
                rng.shuffle(positions)
                ranks = positions[:]
                rng.shuffle(ranks)
                for k in range(1, RESPONSES + 1):
                    r_out.writerow([pid, f"Q{block}", f"Q{block}-R{k}", positions[k - 1], rng.randint(1, 5),
                                    ranks[k - 1], shown.isoformat(), submitted])
    return participants, ratings


def prepare(n: int) -> None:
    """Load TIDE, import n participants and create a finished run retaining all of them."""
    setup_django()
    from django.contrib.auth import get_user_model
    from django.utils import timezone as dj_timezone

    from analysis.imports.importers import responses_import
    from analysis.models import AnalysisRun, ParticipantResult
    from surveys.definition import parse_definition, read_definition_file
    from surveys.loader import study_load
    from surveys.models import Participant

    study = study_load(definition=parse_definition(read_definition_file(ROOT / "fixtures" / "tide.json"))).study
    user, _ = get_user_model().objects.get_or_create(username=USER)
    study.owners.add(user)
    with tempfile.TemporaryDirectory() as folder:
        began = time.perf_counter()
        participants, ratings = write_csvs(Path(folder), n)
        print(f"prepare: wrote the CSVs in {time.perf_counter() - began:.1f} s", flush=True)
        began = time.perf_counter()
        with participants.open("rb") as p_file, ratings.open("rb") as r_file:
            report = responses_import(study=study, participants_file=p_file, ratings_file=r_file)
        print(f"prepare: imported {report.ratings_created:,} ratings in {time.perf_counter() - began:.1f} s", flush=True)
    run = AnalysisRun.objects.create(study=study, status=AnalysisRun.Status.DONE, finished_at=dj_timezone.now(),
                                     step="done", requested_by="bench", n_participants=n, n_retained=n)
    ParticipantResult.objects.bulk_create(
        [ParticipantResult(run=run, participant_id=pk, duration_minutes=35.0)
         for pk in Participant.objects.filter(study=study).values_list("pk", flat=True)],
        batch_size=5000,
    )
    # Fresh planner statistics, as autovacuum would gather them some time after a big import. Without
    # them PostgreSQL believes the tables are nearly empty and picks nested loops over 1.2 M rows.
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")


def drop() -> None:
    """Empty the benchmark database (it is the benchmark's own: every table is emptied)."""
    url = os.environ["DATABASE_URL"]
    if url.startswith("sqlite:"):
        path = Path(url.removeprefix("sqlite://"))
        for leftover in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
            leftover.unlink(missing_ok=True)
        return
    setup_django()
    from django.core.management import call_command

    call_command("flush", interactive=False, verbosity=0)


class RssSampler(threading.Thread):
    """Samples this process's resident memory every 50 ms (ru_maxrss gives the peak too)."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.peak_kib = 0
        self.running = True

    def run(self) -> None:
        page_kib = os.sysconf("SC_PAGE_SIZE") // 1024
        while self.running:
            with open("/proc/self/statm") as statm:
                self.peak_kib = max(self.peak_kib, int(statm.read().split()[1]) * page_kib)
            time.sleep(0.05)


TARGET_ROWS_PER_SECOND = 100_000
TARGET_PEAK_RSS_BYTES = 300 * 10**6


def export(expected_ratings: int) -> bool:
    """Stream ratings.csv through the view; print the figures and a PASS/FAIL line per target. True: both pass."""
    setup_django()
    from django.db import connection
    from django.test import Client
    from django.contrib.auth import get_user_model

    client = Client()
    client.force_login(get_user_model().objects.get(username=USER))
    # The first request imports the URLconf and the views (pandas, plotly, scipy...): not the export's cost.
    assert client.get("/studies/").status_code == 200
    sampler = RssSampler()
    sampler.start()
    before_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    load_before = os.getloadavg()[0]
    began = time.perf_counter()
    response = client.get(f"/studies/{SLUG}/exports/ratings.csv")
    assert response.status_code == 200 and response.streaming, response.status_code
    size = lines = 0
    for chunk in response.streaming_content:  # read and discard, as a download would
        size += len(chunk)
        lines += chunk.count(b"\n")
    seconds = time.perf_counter() - began
    load_after = os.getloadavg()[0]
    sampler.running = False
    sampler.join()
    rows = lines - 1
    rate = rows / seconds
    peak_bytes = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    load = f"load average {load_before:.2f} before, {load_after:.2f} after (2 cores)"
    print(f"database: {connection.vendor}")
    print(f"rows: {rows:,} ({size / 2**20:.0f} MiB of CSV) in {seconds:.1f} s = {rate:,.0f} rows/s; {load}")
    print(f"peak RSS: {peak_bytes / 2**20:.0f} MiB = {peak_bytes / 1e6:.0f} MB (after loading Django and the views, "
          f"before the export: {before_kib / 1024:.0f} MiB; sampled during it: {sampler.peak_kib / 1024:.0f} MiB)")
    speed_ok, memory_ok = rate >= TARGET_ROWS_PER_SECOND, peak_bytes <= TARGET_PEAK_RSS_BYTES
    print(f"{'PASS' if speed_ok else 'FAIL'} speed: {rate:,.0f} rows/s (target >= {TARGET_ROWS_PER_SECOND:,}); {load}")
    print(f"{'PASS' if memory_ok else 'FAIL'} memory: peak RSS {peak_bytes / 1e6:.0f} MB "
          f"(target <= {TARGET_PEAK_RSS_BYTES / 1e6:.0f} MB); {load}")
    if rows != expected_ratings:
        raise SystemExit(f"expected {expected_ratings:,} rows, got {rows:,}")
    return speed_ok and memory_ok


def rating_count() -> int:
    setup_django()
    from surveys.models import Rating

    return Rating.objects.filter(placement__visit__participant__study__slug=SLUG).count()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--participants", type=int, default=10_000)
    parser.add_argument("--fresh", action="store_true", help="drop the benchmark study and prepare it again")
    parser.add_argument("--step", choices=["all", "prepare", "drop", "count"], default="all", help=argparse.SUPPRESS)
    args = parser.parse_args()
    expected = args.participants * BLOCKS * RESPONSES
    if args.step == "prepare":
        return prepare(args.participants)
    if args.step == "drop":
        return drop()
    if args.step == "count":
        return print(rating_count())
    if args.step == "all":
        me = [sys.executable, __file__, "--participants", str(args.participants)]
        if args.fresh:
            subprocess.run([*me, "--step", "drop"], check=True)
        # Counting in a child keeps this process's memory for the export alone.
        have = int(subprocess.run([*me, "--step", "count"], check=True, capture_output=True, text=True).stdout.strip())
        if have != expected:
            if have:
                subprocess.run([*me, "--step", "drop"], check=True)
            subprocess.run([*me, "--step", "prepare"], check=True)
    export(expected)


if __name__ == "__main__":
    main()
