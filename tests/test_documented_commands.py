"""Every command README.md and docs/*.md show works as written on this tree.

Each ``manage.py`` command is found in the text: its name must exist and its
arguments must parse with the command's own parser. Those that only read or
write the database (loading studies, rater links, analysis runs, exports,
tokens) then run for real, in the order each document shows them, against a
test database holding the demo studies. The others (Prolific's API, bots by the
hundred, files to import, ``check --deploy`` with production variables,
catalogues written into locale/) are checked by their parser only. Every
``bin/``, ``bench/``, ``fixtures/`` and ``tests/`` file the documents name exists, and
``bin/run`` answers ``--help``.
"""

from __future__ import annotations

import re
import shlex
import subprocess

import pytest
from django.core.management import call_command, get_commands, load_command_class
from django.core.management.base import CommandError

from tests.support.paths import FIXTURES
from tests.support.researcher import fill_with_bots, make_user

ROOT = FIXTURES.parent
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# manage.py, its command, and its arguments up to the end of the code (a backtick, a table
# cell, a shell comment or the line's end).
COMMAND = re.compile(r"manage\.py ([a-z_]+)([^`|#\n]*)")
RUN_FOR_REAL = {"load_study", "rater_links", "run_analysis", "export", "drf_create_token", "requeue_stale_runs"}
# What the documents leave to the reader, filled in here.
PLACEHOLDERS = {"SLUG": "tide", "ACTION": "sync", "FILE": "bonuses.csv"}


def documented_commands(path) -> list[tuple[str, list[str]]]:
    """(command, arguments) for every ``manage.py`` command of the document, in its order."""
    found = []
    for name, rest in COMMAND.findall(path.read_text()):
        rest = re.sub(r"<[^>]*>", "ar", rest)  # <locale, e.g. ar>
        rest = re.sub(r"\[([^\]]*)\]", r"\1", rest)  # optional parts, e.g. [--wait]
        found.append((name, shlex.split(rest.strip().rstrip(",:;"))))
    return found


def _fill(args: list[str], out_dir) -> list[str]:
    return [str(out_dir) if arg == "DIR" else PLACEHOLDERS.get(arg, arg) for arg in args]


def _parse(name: str, args: list[str]) -> None:
    command = load_command_class(get_commands()[name], name)
    parser = command.create_parser("manage.py", name)
    parser.format_help()
    if args:
        parser.parse_args(args)  # a CommandError names the argument that does not parse


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda path: path.name)
def test_every_documented_manage_py_command_exists_and_its_arguments_parse(document, tmp_path):
    commands = documented_commands(document)
    unknown = sorted({name for name, _ in commands} - set(get_commands()))
    assert not unknown, f"{document.name} names commands that do not exist: {unknown}"
    for name, args in commands:
        try:
            _parse(name, _fill(args, tmp_path))
        except CommandError as exc:
            pytest.fail(f"{document.name}: manage.py {name} {shlex.join(args)}: {exc}")


def test_the_documents_show_the_commands_this_test_runs():
    """The extraction finds the commands the issue was about (a regex that found nothing would pass)."""
    readme = documented_commands(ROOT / "README.md")
    assert ("rater_links", ["--study", "counselor", "--names", "Ann,Bo"]) in readme
    assert ("run_analysis", ["--study", "tide", "--wait"]) in readme
    quality = documented_commands(ROOT / "docs" / "quality.md")
    assert ("run_analysis", ["--study", "tide", "--wait", "--timeout", "3600"]) in quality


@pytest.mark.slow(reason="loads the four demo studies and runs the documented commands for real")
# Committed as a command's are: a run starts when its creation commits (on_commit), which --wait waits for.
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("document", [d for d in DOCUMENTS if {n for n, a in documented_commands(d) if a} & RUN_FOR_REAL],
                         ids=lambda path: path.name)
def test_the_documented_database_commands_run_as_written_on_the_demo(document, tmp_path, quick_stats, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)  # the documents run manage.py from the repository root
    for fixture in ("tide", "counselor", "most_least", "pairwise"):
        call_command("load_study", "--open", str(FIXTURES / f"{fixture}.json"))  # launched, as setup_demo does
    fill_with_bots(_study("tide"), 12)
    make_user("alice")
    ran = []
    for name, args in documented_commands(document):
        if name not in RUN_FOR_REAL or not args:  # a bare name in prose names the command; it is no command line
            continue
        args = _fill(args, tmp_path)
        try:
            call_command(name, *args)
        except CommandError as exc:
            pytest.fail(f"{document.name}: manage.py {name} {shlex.join(args)} failed: {exc}")
        ran.append(name)
    assert ran
    if "export" in ran:
        assert (tmp_path / "participants.csv").stat().st_size > 0
    if document.name == "study-definition.md":
        assert "Bo\tnot started" in capsys.readouterr().out  # --list after --names "Ann,Bo,Chen"


def _study(slug: str):
    from surveys.models import Study

    return Study.objects.get(slug=slug)


def test_every_script_the_documents_name_exists():
    script = re.compile(r"(?<![\w./])(bin/[\w-]+|(?:bench|fixtures|tests)/[\w-]+\.py)")  # not .venv/bin/python
    named = {m for path in DOCUMENTS for m in script.findall(path.read_text())}
    assert {"bin/run", "bin/test", "bin/screenshots", "bench/surge.py", "tests/test_browser_a11y.py"} <= named
    missing = sorted(path for path in named if not (ROOT / path).exists())
    assert not missing, missing


def test_bin_run_tells_how_to_choose_its_port_and_refuses_a_bad_one():
    run = ROOT / "bin" / "run"
    usage = subprocess.run([run, "--help"], capture_output=True, text=True, timeout=30)
    assert usage.returncode == 0 and "bin/run [PORT]" in usage.stdout and "PORT=8001 bin/run" in usage.stdout
    for argv, env in (([run, "80x"], {}), ([run], {"PORT": "70000"})):
        refused = subprocess.run(argv, capture_output=True, text=True, timeout=30, env={"PATH": "/usr/bin:/bin", **env})
        assert refused.returncode == 2
        assert "the port must be a number from 1 to 65535" in refused.stderr
