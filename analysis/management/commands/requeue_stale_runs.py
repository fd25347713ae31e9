from __future__ import annotations

from django.core.management.base import BaseCommand

from analysis.running.runs import runs_and_parts_requeue


class Command(BaseCommand):
    help = (
        "Send again analysis and metrics runs still queued after --older-than seconds (their message was lost, e.g. to a "
        "broker outage), the parts of running runs that no worker began that long after they were sent, and running "
        "runs whose lease expired (their worker died). Safe to run from cron."
    )

    def add_arguments(self, parser):
        parser.add_argument("--older-than", type=float, default=60, help="seconds a run or part must have waited")

    def handle(self, *args, older_than: float, **options):
        sent = runs_and_parts_requeue(older_than_seconds=older_than)
        parts = sent.pop("parts")
        for label, ids in sent.items():
            self.stdout.write(f"re-sent {len(ids)} {label}(s){': ' + ', '.join(map(str, ids)) if ids else ''}")
        self.stdout.write(f"re-sent the parts of {len(parts)} run(s){': ' + ', '.join(map(str, parts)) if parts else ''}")
