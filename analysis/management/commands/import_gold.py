from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from analysis.imports.importers import ImportProblems, gold_import
from surveys.models import Study


class Command(BaseCommand):
    help = "Import gold scores (gold.csv: response_id, gold_score). All or nothing."

    def add_arguments(self, parser):
        parser.add_argument("--study", required=True, help="study slug")
        parser.add_argument("gold", help="gold.csv")

    def handle(self, *args, study: str, gold: str, **options):
        target = Study.objects.filter(slug=study).first()
        if target is None:
            raise CommandError(f'no study "{study}"')
        try:
            with open(gold, "rb") as handle:  # decoded by the importer, which names a bad byte's line
                report = gold_import(study=target, gold_file=handle)
        except OSError as exc:
            raise CommandError(str(exc)) from None
        except ImportProblems as exc:
            for problem in exc.problems:
                self.stderr.write(problem)
            raise CommandError(f"nothing imported: {len(exc.problems)} problem(s)") from None
        self.stdout.write(f"gold scores: {report.scores_written} written, {report.scores_unchanged} unchanged")
