"""``manage.py dump_study SLUG FILE``: one study, every row of it, in one file (surveys.backup)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from surveys import backup


class Command(BaseCommand):
    help = "Write one study (content, participants, answers, runs, Prolific records) to FILE, with a checksum."

    def add_arguments(self, parser) -> None:
        parser.add_argument("slug")
        parser.add_argument("file", help="the dump to write (JSON lines; replaced if it exists)")

    def handle(self, *args, slug: str, file: str, **options) -> None:
        target = Path(file)
        # Written beside the target and renamed at the end: a dump cut short never replaces a good one.
        handle, temporary = tempfile.mkstemp(dir=target.parent.resolve(), prefix=f".{target.name}.", suffix=".part")
        try:
            with os.fdopen(handle, "wb") as out:
                rows = backup.study_dump(slug=slug, out=out)
            os.replace(temporary, target)
        except LookupError as exc:
            raise CommandError(str(exc)) from None
        finally:
            if os.path.exists(temporary):
                os.unlink(temporary)
        self.stdout.write(f"{slug}: {rows} rows written to {target}")
