"""Backups of one study, end to end: every export byte-identical after dump_study and restore_study.

    .venv/bin/python bench/backup_roundtrip.py WORK_DIR \
        [--target-url postgres://postgres@127.0.0.1:5432/hev_restore] [--source-url URL]

1. In the source database (default: a fresh SQLite file), ``bench/export_snapshot.py``'s data (four studies:
   scripted participants, planted imports, an analysis run each) and its exports, into WORK_DIR/before/;
   then ``manage.py dump_study`` of each study into WORK_DIR/dumps/.
2. In a fresh target database (default: another SQLite file; a PostgreSQL URL is DROPPED and created
   again), ``manage.py restore_study`` of each dump, then the same exports into WORK_DIR/after/.
3. Every file of before/ and after/ compared byte for byte; prints the figures, exits 1 on a difference.

Each side runs in a process of its own (one Django set-up per database), under export_snapshot's pinned
environment. Prints the seconds of each dump and restore (a figure, not a target).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from io import StringIO
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import export_snapshot  # noqa: E402


def _source(work: Path) -> None:
    from django.core.management import call_command

    from surveys.models import Study

    export_snapshot.snapshot(work / "before")
    (work / "dumps").mkdir(exist_ok=True)
    for slug in sorted(Study.objects.values_list("slug", flat=True)):
        started = time.perf_counter()
        out = StringIO()
        call_command("dump_study", slug, str(work / "dumps" / f"{slug}.jsonl"), stdout=out)
        print(f"dump {out.getvalue().strip()} in {time.perf_counter() - started:.2f}s", flush=True)


def _target(work: Path) -> None:
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.test import Client

    owner = get_user_model().objects.create_user(export_snapshot.OWNER, "owner@example.org", "unused")
    slugs = []
    for dump in sorted((work / "dumps").glob("*.jsonl")):
        started = time.perf_counter()
        out = StringIO()
        call_command("restore_study", str(dump), stdout=out)
        print(f"restore {out.getvalue().strip()} in {time.perf_counter() - started:.2f}s", flush=True)
        slugs.append(dump.stem)
    client = Client()
    client.force_login(owner)
    for slug in slugs:
        export_snapshot._write_exports(slug, client, work / "after")


def compare(before: Path, after: Path) -> list[str]:
    """The files that differ, or exist on one side only (relative paths)."""
    names = {p.relative_to(before) for p in before.rglob("*") if p.is_file()}
    names |= {p.relative_to(after) for p in after.rglob("*") if p.is_file()}
    return sorted(str(n) for n in names
                  if not (before / n).is_file() or not (after / n).is_file()
                  or (before / n).read_bytes() != (after / n).read_bytes())


def _phase(phase: str, work: Path, url: str) -> None:
    env = {**os.environ, "DATABASE_URL": url}
    subprocess.run([sys.executable, __file__, str(work), "--phase", phase], env=env, check=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("work", type=Path)
    parser.add_argument("--source-url", default="")
    parser.add_argument("--target-url", default="")
    parser.add_argument("--phase", choices=["source", "target"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    work = args.work.resolve()
    if args.phase:
        export_snapshot._pin_environment()
        export_snapshot._setup_django(os.environ["DATABASE_URL"])
        (_source if args.phase == "source" else _target)(work)
        return
    work.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as folder:
        _phase("source", work, args.source_url or f"sqlite:///{Path(folder) / 'source.sqlite3'}")
        _phase("target", work, args.target_url or f"sqlite:///{Path(folder) / 'target.sqlite3'}")
    differ = compare(work / "before", work / "after")
    files = sum(1 for p in (work / "before").rglob("*") if p.is_file())
    if differ:
        print(f"{len(differ)} of {files} export files differ after the restore: {', '.join(differ[:10])}")
        raise SystemExit(1)
    print(f"all {files} export files byte-identical after the restore")


if __name__ == "__main__":
    main()
