"""Print a study's audit trail as CSV: ``manage.py audit --study SLUG`` (columns at, actor, address,
action, object, detail); ``--accounts`` prints the rows without a study (sign-ins)."""

from __future__ import annotations

import csv

from django.core.management.base import BaseCommand, CommandError

from audit import selectors
from surveys.models import Study


class Command(BaseCommand):
    help = "Print a study's audit trail as CSV (at, actor, address, action, object, detail)."

    def add_arguments(self, parser) -> None:
        which = parser.add_mutually_exclusive_group(required=True)
        which.add_argument("--study", help="the study's slug")
        which.add_argument("--accounts", action="store_true", help="the rows without a study: sign-ins")
        parser.add_argument("--action", default="", help='only this action, or a prefix ending in "." ("export.")')

    def handle(self, *args, study: str | None, accounts: bool, action: str, **options) -> None:
        # A deleted study's trail stays readable: the rows keep the slug, so an unknown slug with rows is fine.
        slug = "" if accounts else study
        events = selectors.audit_events_of(study_slug=slug, action=action)
        if not accounts and not Study.objects.filter(slug=slug).exists() and not events.exists():
            raise CommandError(f'No study "{slug}" and no audit rows for it.')
        writer = csv.writer(self.stdout, lineterminator="\n")
        for row in selectors.audit_csv_rows(events):
            writer.writerow(row)
