"""``manage.py restore_study FILE``: a study written by ``dump_study``, in one transaction (surveys.backup)."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from surveys import backup


class Command(BaseCommand):
    help = "Restore a study from a dump_study file; refuses (writing nothing) a damaged or newer file."

    def add_arguments(self, parser) -> None:
        parser.add_argument("file")

    def handle(self, *args, file: str, **options) -> None:
        try:
            result = backup.study_restore(path=file)
        except backup.RestoreRefused as exc:
            raise CommandError(f"nothing was restored: {exc}") from None
        self.stdout.write(f"{result.slug}: {sum(result.rows.values())} rows restored")
        if result.owners_missing:
            self.stdout.write(f"owners without an account here (not attached): {', '.join(sorted(set(result.owners_missing)))}")
