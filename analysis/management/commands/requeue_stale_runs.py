from __future__ import annotations

from django.core.management.base import BaseCommand

from analysis.runs import runs_requeue


class Command(BaseCommand):
    help = (
        "Send again analysis and metrics runs still queued after --older-than seconds (their message was lost, e.g. to a "
        "broker outage) and running runs whose lease expired (their worker died). Safe to run from cron."
    )

    def add_arguments(self, parser):
        parser.add_argument("--older-than", type=float, default=60, help="seconds a run must have been queued")

    def handle(self, *args, older_than: float, **options):
        for label, sent in runs_requeue(older_than_seconds=older_than).items():
            self.stdout.write(f"re-sent {len(sent)} {label}(s){': ' + ', '.join(map(str, sent)) if sent else ''}")
