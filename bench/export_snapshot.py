"""Every export file of an analysis run, written from a fresh database filled with deterministic data.

Made to compare the exports before and after a change (two checkouts, the same
script, ``diff -r``)::

    .venv/bin/python bench/export_snapshot.py OUT_DIR
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/hev_snapshot .venv/bin/python bench/export_snapshot.py OUT_DIR
    bench/compare_exports.sh BASE_REV        # this script at BASE_REV and here, then diff -r

What it does, in a database of its own (SQLite: a temporary file; PostgreSQL:
the database named by ``DATABASE_URL`` is DROPPED and created again):

1. loads ``fixtures/tide.json``, ``counselor.json`` and ``most_least.json``
   (``load_study``), plus a second copy of TIDE under the slug ``tide-planted``;
2. fills the three demo studies with scripted participants
   (``simulate_participants``, a fixed seed per study: honest, speeders,
   straight-liners, attention failers, early exits, random clickers);
3. fills ``tide-planted`` with the planted test data of ``tests/support/quality_data.py``
   (participants.csv, ratings.csv and gold.csv through ``import_responses`` and
   ``import_gold``, plus the live planted participants with attention checks
   between their blocks);
4. runs an analysis of each study in this process (``run_analysis``, no broker);
5. downloads, as the study's owner through the real views, the "everything"
   zip of the latest finished run (participants.csv, ratings.csv, every result
   table, codebook.csv) and identifiers.csv, into ``OUT_DIR/<study slug>/``.

Only the project's management commands, models and views are used, so this
file runs unchanged on older checkouts (``compare_exports.sh`` copies it into
one).

Made deterministic rather than stripped:

- each study's pseudonym key (random at creation) is set from its slug, so
  pseudonyms and the per-study response orders repeat;
- while the bots run, ``secrets`` draws from each study's seed: the participant
  ids of open links and invited raters, and the block-order seed of everyone who
  enrols through the pages;
- the bots' simulated clock starts from a fixed instant (``simulate_participants``
  spreads start times back from ``django.utils.timezone.now``, fixed while it runs);
- each run's finish time (the zip's README names it) is set to that instant too;
- the bots, the participants' block orders and the statistics' subsamples and
  bootstraps use fixed seeds; model subsamples and bootstrap counts are set
  here (small, for speed: the same on both sides of a comparison);
- ``PYTHONHASHSEED=0`` and one BLAS thread, so no set order or parallel
  floating-point sum can differ between two runs.

Nothing is normalised: two runs of the same code give byte-identical files.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import os
import random
import sys
import tempfile
import zipfile
from collections.abc import Callable
from datetime import datetime, timezone
from io import BytesIO, StringIO
from typing import Any
from pathlib import Path
from unittest import mock

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ["tide.json", "counselor.json", "most_least.json"]
PLANTED_SLUG = "tide-planted"
# Bots per demo study (the counselor and most-least studies recruit 40 completions at most).
BOTS = {"tide": 60, "counselor": 40, "most-least": 40}
SEEDS = {"tide": 11, "counselor": 12, "most-least": 13}
FIXED_NOW = datetime(2025, 3, 10, 12, 0, tzinfo=timezone.utc)
OWNER = "snapshot-owner"

_PINNED_ENV = {
    "PYTHONHASHSEED": "0",
    "OMP_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "ANALYSIS_MODEL_MAX_ROWS": "3000",
    "ANALYSIS_BOOTSTRAP_SAMPLES": "30",
}


def _pin_environment() -> None:
    """Re-run this script under the pinned environment (the hash seed is read at interpreter start)."""
    wanted = {**os.environ, **_PINNED_ENV}
    wanted.pop("CELERY_BROKER_URL", None)  # tasks run in this process, in order
    if any(os.environ.get(k) != v for k, v in _PINNED_ENV.items()) or "CELERY_BROKER_URL" in os.environ:
        os.execve(sys.executable, [sys.executable, *sys.argv], wanted)


def _setup_django(database_url: str) -> None:
    sys.path.insert(0, str(ROOT))
    os.chdir(ROOT)
    os.environ["DJANGO_SETTINGS_MODULE"] = "config.settings"
    os.environ["DATABASE_URL"] = database_url
    if database_url.startswith("postgres"):
        from bench._stack import recreate_postgres_database

        recreate_postgres_database(database_url)
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def _load_studies(folder: Path) -> None:
    from django.core.management import call_command

    planted = json.loads((ROOT / "fixtures" / "tide.json").read_text())
    planted["slug"] = PLANTED_SLUG
    planted_path = folder / "tide-planted.json"
    planted_path.write_text(json.dumps(planted))
    call_command("load_study", *[str(ROOT / "fixtures" / name) for name in FIXTURES], str(planted_path),
                 open=True, stdout=StringIO())

    from surveys.models import Study

    for study in Study.objects.all():
        # Random at creation; pseudonyms and response orders are drawn from it.
        Study.objects.filter(pk=study.pk).update(pseudonym_key=hashlib.sha256(study.slug.encode()).hexdigest())


def _seeded_secrets(seed: int) -> dict[str, Callable[..., Any]]:
    """Stand-ins for the ``secrets`` functions, repeating from ``seed``: the ids of open-link and invited
    participants are drawn from them, and so are the block orders of everyone who enrols through the pages."""
    rng = random.Random(seed)

    def token_hex(nbytes: int = 32) -> str:
        return rng.randbytes(nbytes).hex()

    def token_urlsafe(nbytes: int = 32) -> str:
        return base64.urlsafe_b64encode(rng.randbytes(nbytes)).rstrip(b"=").decode("ascii")

    return {"token_hex": token_hex, "token_urlsafe": token_urlsafe, "randbits": rng.getrandbits}


def _fill_with_bots() -> None:
    from django.core.management import call_command

    with mock.patch("django.utils.timezone.now", return_value=FIXED_NOW):
        for slug, n in BOTS.items():
            out = StringIO()
            with mock.patch.multiple("secrets", **_seeded_secrets(SEEDS[slug])):
                call_command("simulate_participants", study=slug, n=n, seed=SEEDS[slug], stdout=out)
            print(out.getvalue().strip(), flush=True)


def _fill_with_planted_data(folder: Path) -> None:
    from django.core.management import call_command

    from surveys.models import Study
    from tests.support.quality_data import live_participants_create, planted_files, planted_population

    people = planted_population()
    files = planted_files(people)
    paths = {}
    for name, text in (("participants", files.participants_csv), ("ratings", files.ratings_csv),
                       ("gold", files.gold_csv)):
        paths[name] = folder / f"{name}.csv"
        paths[name].write_text(text, encoding="utf-8")
    out = StringIO()
    call_command("import_responses", study=PLANTED_SLUG, participants=str(paths["participants"]),
                 ratings=str(paths["ratings"]), stdout=out)
    call_command("import_gold", str(paths["gold"]), study=PLANTED_SLUG, stdout=out)
    live_participants_create(Study.objects.get(slug=PLANTED_SLUG), people)
    print(out.getvalue().strip(), flush=True)


def _analyse(slug: str) -> None:
    from django.core.management import call_command

    from analysis.models import AnalysisRun

    out = StringIO()
    call_command("run_analysis", study=slug, stdout=out)
    # The zip's README names the time the run finished: the wall clock, unless pinned here.
    AnalysisRun.objects.filter(study__slug=slug).update(finished_at=FIXED_NOW)
    print(f"{slug}: {out.getvalue().strip().splitlines()[0]}", flush=True)


def _download(client, url: str) -> bytes:
    response = client.get(url)
    if response.status_code != 200:
        raise SystemExit(f"GET {url}: {response.status_code}")
    return b"".join(response.streaming_content) if response.streaming else response.content


def _write_exports(slug: str, client, out_dir: Path) -> list[str]:
    folder = out_dir / slug
    folder.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(BytesIO(_download(client, f"/studies/{slug}/exports/everything.zip"))) as archive:
        names = archive.namelist()
        for name in names:
            (folder / name).write_bytes(archive.read(name))
    (folder / "identifiers.csv").write_bytes(_download(client, f"/studies/{slug}/exports/identifiers.csv?confirm=1"))
    return [*names, "identifiers.csv"]


def snapshot(out_dir: Path) -> None:
    from django.contrib.auth import get_user_model
    from django.test import Client

    from surveys.models import Study

    with tempfile.TemporaryDirectory() as folder:
        _load_studies(Path(folder))
        _fill_with_bots()
        _fill_with_planted_data(Path(folder))
    slugs = sorted(Study.objects.values_list("slug", flat=True))
    owner = get_user_model().objects.create_user(OWNER, f"{OWNER}@example.org", "unused")
    for study in Study.objects.all():
        study.owners.add(owner)
    client = Client()
    client.force_login(owner)
    for slug in slugs:
        _analyse(slug)
        names = _write_exports(slug, client, out_dir)
        print(f"{slug}: wrote {len(names)} files", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out_dir", type=Path, help="folder for <study slug>/<file>.csv (created)")
    args = parser.parse_args()
    _pin_environment()
    out_dir = args.out_dir.resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    url = os.environ.get("DATABASE_URL", "")
    if url:
        _setup_django(url)
        snapshot(out_dir)
        return
    with tempfile.TemporaryDirectory() as folder:
        _setup_django(f"sqlite:///{Path(folder) / 'snapshot.sqlite3'}")
        snapshot(out_dir)


if __name__ == "__main__":
    main()
