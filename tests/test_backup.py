"""Backups of one study (issue 27, item 5): dump_study / restore_study round trip; refusals write nothing."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.apps import apps
from django.core.management import CommandError, call_command

from bench import export_snapshot
from bench.backup_roundtrip import compare
from surveys import backup, withdrawal
from surveys.models import Participant, Study
from tests.support.external_services import require_service
from tests.support.paths import ROOT
from tests.support.researcher import fill_with_bots, make_user
from tests.support.shared import in_process_tasks, rows_kept_until_exit
from tests.support.studies import load_fixture
from tests.test_withdrawal import announced, small_run  # noqa: F401 (a fixture)

pytestmark = pytest.mark.django_db


def _counts() -> dict[str, int]:
    return {label: apps.get_model(label).objects.count() for label, _ in backup.STUDY_MODELS}


def _delete_study(study: Study) -> None:
    """Every row of the study, children first (the content's foreign keys protect it from a plain delete)."""
    for label, path in reversed(backup.STUDY_MODELS):
        apps.get_model(label).objects.filter(**{path: study.pk}).delete()


def _rewrite(path: Path, edit) -> None:
    """Apply ``edit`` to the file's lines and seal it again with a correct checksum (a well-formed file)."""
    lines = [json.loads(line) for line in path.read_text().splitlines()][:-1]
    lines = edit(lines)
    body = "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines)
    trailer = {"checksum": hashlib.sha256(body.encode()).hexdigest(), "lines": len(lines)}
    path.write_text(body + json.dumps(trailer) + "\n")


@pytest.fixture
def dumped(small_run, tmp_path, owner_client):
    """TIDE with participants, a run and a withdrawal, its exports, and its dump."""
    study = small_run.study
    withdrawal.participant_withdraw(participant_id=Participant.objects.filter(study=study).last().pk,
                                    channel="participant")
    exports = export_snapshot._write_exports(study.slug, owner_client, tmp_path / "before")
    path = tmp_path / "study.jsonl"
    with announced() as heard:
        call_command("dump_study", study.slug, str(path), stdout=open(os.devnull, "w"))
    assert [(h["action"], h["object"]) for h in heard] == [("study.dump", study.slug)]
    return study, path, exports


@pytest.fixture(scope="module")
def _shared_rows_small_dump(django_db_setup, django_db_blocker, tmp_path_factory):
    """TIDE (owned by "owner") with three scripted participants (no run), and its dump: built once for the
    module's refusal tests (each runs in a savepoint of it, tests/support/shared.py; conftest's collection
    hook runs them after the others, so no other test's "owner" meets this one)."""
    with rows_kept_until_exit(django_db_blocker), in_process_tasks():
        study = load_fixture("tide.json")
        study.owners.add(make_user("owner"))
        fill_with_bots(study, 3)
        path = tmp_path_factory.mktemp("small_dump") / "small.jsonl"
        call_command("dump_study", study.slug, str(path), stdout=open(os.devnull, "w"))
        yield study.pk, path.read_bytes()


@pytest.fixture
def small_dump(_shared_rows_small_dump, tmp_path):
    """TIDE with three scripted participants (no run), and its dump: enough for the refusals. The dump is
    this test's own copy (tests rewrite it)."""
    study_pk, dump = _shared_rows_small_dump
    path = tmp_path / "small.jsonl"
    path.write_bytes(dump)
    return Study.objects.get(pk=study_pk), path, []


def test_every_model_with_study_rows_is_dumped_or_declared_not_per_study_or_derived():
    dumped_models = {label for label, _ in backup.STUDY_MODELS}
    for app in ("surveys", "analysis", "prolific", "judges"):
        for model in apps.get_app_config(app).get_models():
            assert model._meta.label in dumped_models | backup.NOT_PER_STUDY | backup.DERIVED, model._meta.label


def test_a_dump_restored_after_the_study_was_deleted_gives_byte_identical_exports(dumped, owner_client, tmp_path):
    study, path, exports = dumped
    counts = _counts()
    _delete_study(study)
    assert not Study.objects.filter(slug=study.slug).exists()
    with announced() as heard:
        call_command("restore_study", str(path), stdout=open(os.devnull, "w"))
    assert [h["action"] for h in heard] == ["study.restore"]
    assert _counts() == counts
    restored = Study.objects.get(slug=study.slug)
    assert list(restored.owners.values_list("username", flat=True)) == ["owner"]
    export_snapshot._write_exports(study.slug, owner_client, tmp_path / "after")
    assert len(exports) > 5
    assert compare(tmp_path / "before" / study.slug, tmp_path / "after" / study.slug) == []


def test_a_damaged_or_cut_short_file_is_refused_and_writes_nothing(small_dump, tmp_path):
    study, path, _ = small_dump
    _delete_study(study)
    before = _counts()
    data = path.read_bytes()
    damaged = tmp_path / "damaged.jsonl"
    assert b'"status": "completed"' in data
    damaged.write_bytes(data.replace(b'"status": "completed"', b'"status": "exited"', 1))
    cut = tmp_path / "cut.jsonl"
    cut.write_bytes(data[: len(data) // 2])
    garbage = tmp_path / "garbage.jsonl"
    garbage.write_bytes(b"\xff\xfe not json")
    for bad, words in ((damaged, "damaged"), (cut, "not a readable study dump|damaged"),
                       (garbage, "not a readable study dump")):
        with pytest.raises(CommandError, match=f"nothing was restored: .*({words})"):
            call_command("restore_study", str(bad))
        assert _counts() == before


def test_a_file_from_a_newer_schema_or_format_is_refused(small_dump):
    study, path, _ = small_dump
    _delete_study(study)
    before = _counts()

    def newer_schema(lines):
        lines[0]["schema"]["surveys"] = "9999_from_the_future"
        return lines

    _rewrite(path, newer_schema)
    with pytest.raises(backup.RestoreRefused, match="newer schema"):
        backup.study_restore(path=path)

    def newer_format(lines):
        lines[0]["schema"]["surveys"] = backup.schema_versions()["surveys"]
        lines[0]["format_version"] = backup.FORMAT_VERSION + 1
        return lines

    _rewrite(path, newer_format)
    with pytest.raises(backup.RestoreRefused, match="newer than this version reads"):
        backup.study_restore(path=path)
    assert _counts() == before


def test_a_row_that_fails_half_way_rolls_the_whole_restore_back(small_dump):
    study, path, _ = small_dump
    _delete_study(study)
    before = _counts()

    def bad_rating(lines):
        rating = next(line for line in lines if line.get("model") == "surveys.rating")
        rating["fields"]["dimension"] = 10 ** 9  # no such dimension
        return lines

    _rewrite(path, bad_rating)
    with pytest.raises(backup.RestoreRefused, match="surveys_rating"):
        backup.study_restore(path=path)
    assert _counts() == before


def test_a_restore_over_an_existing_study_or_taken_ids_is_refused(small_dump, tmp_path):
    study, path, _ = small_dump
    before = _counts()
    with pytest.raises(backup.RestoreRefused, match="exists already"):
        backup.study_restore(path=path)

    def renamed(lines):
        lines[1]["fields"]["slug"] = "another-slug"
        lines[0]["study"] = "another-slug"
        return lines

    _rewrite(path, renamed)
    with pytest.raises(backup.RestoreRefused, match="ids of surveys.Study rows in the file are taken"):
        backup.study_restore(path=path)
    assert _counts() == before


def test_dump_study_refuses_an_unknown_study(tmp_path):
    with pytest.raises(CommandError, match='no study "nope"'):
        call_command("dump_study", "nope", str(tmp_path / "x.jsonl"))
    assert not list(tmp_path.iterdir())


@pytest.mark.slow(reason="the whole export snapshot (four studies, 180 scripted participants, four analysis runs) "
                         "in two databases: about two minutes on a two-core machine")
def test_sqlite_to_postgresql_round_trip_gives_byte_identical_exports(tmp_path):
    url = os.environ.get("BACKUP_TARGET_URL", "postgres://postgres@127.0.0.1:5432/hev_backup_roundtrip")
    try:
        import psycopg

        psycopg.connect(url.rsplit("/", 1)[0] + "/postgres", connect_timeout=3).close()
        available = True
    except Exception:  # noqa: BLE001 - any failure to connect means no server to test against
        available = False
    require_service(available, "PostgreSQL is not reachable for the restore target")
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "backup_roundtrip.py"), str(tmp_path),
                           "--target-url", url], env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "byte-identical" in done.stdout
    assert compare(tmp_path / "before", tmp_path / "after") == []
    assert len(list((tmp_path / "dumps").glob("*.jsonl"))) == 4
