from __future__ import annotations

import time

from django.core.management.base import BaseCommand, CommandError

from analysis.models import AnalysisRun
from analysis.running.runs import analysis_run_create
from surveys.models import Study

FINISHED = {AnalysisRun.Status.DONE, AnalysisRun.Status.FAILED}


class Command(BaseCommand):
    help = "Queue an analysis run (quality rules, then statistics). Without a broker it runs right here."

    def add_arguments(self, parser):
        parser.add_argument("--study", required=True, help="study slug")
        parser.add_argument("--wait", action="store_true", help="poll the run until it is done or failed")
        parser.add_argument("--timeout", type=float, default=3600, help="seconds to wait at most (with --wait)")

    def handle(self, *args, study: str, wait: bool, timeout: float, **options):
        target = Study.objects.filter(slug=study).first()
        if target is None:
            raise CommandError(f'no study "{study}"')
        run = analysis_run_create(study=target, requested_by="manage.py run_analysis")
        run.refresh_from_db()
        self.stdout.write(f"run {run.pk}: {run.status}")
        if wait:
            deadline = time.monotonic() + timeout
            while run.status not in FINISHED:
                if time.monotonic() > deadline:
                    raise CommandError(f"run {run.pk} still {run.status} (step {run.step}) after {timeout:.0f}s")
                time.sleep(0.5)
                run.refresh_from_db()
            self.stdout.write(f"run {run.pk}: {run.status}")
        if run.status == AnalysisRun.Status.DONE:
            self.stdout.write(
                f"{run.n_participants} participant(s), {run.n_retained} retained; timings (s): {run.timings}"
            )
        elif run.status == AnalysisRun.Status.FAILED:
            raise CommandError(f"run {run.pk} failed: {run.error}")
