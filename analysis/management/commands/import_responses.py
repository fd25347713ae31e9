from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from analysis.imports.importers import ImportProblems, responses_import
from surveys.models import Study


class Command(BaseCommand):
    help = "Import participants.csv and ratings.csv collected elsewhere (DESIGN 3.1). All or nothing."

    def add_arguments(self, parser):
        parser.add_argument("--study", required=True, help="study slug")
        parser.add_argument("--participants", required=True, help="participants.csv")
        parser.add_argument("--ratings", required=True, help="ratings.csv")

    def handle(self, *args, study: str, participants: str, ratings: str, **options):
        target = Study.objects.filter(slug=study).first()
        if target is None:
            raise CommandError(f'no study "{study}"')
        try:
            # As bytes: the importer decodes them and names the line of a byte that is not UTF-8.
            with open(participants, "rb") as p_file, open(ratings, "rb") as r_file:
                report = responses_import(study=target, participants_file=p_file, ratings_file=r_file)
        except OSError as exc:
            raise CommandError(str(exc)) from None
        except ImportProblems as exc:
            for problem in exc.problems:
                self.stderr.write(problem)
            raise CommandError(f"nothing imported: {len(exc.problems)} problem(s)") from None
        self.stdout.write(
            f"imported {report.participants_created} participant(s) "
            f"({report.participants_skipped} already present, skipped), {report.visits_created} blocks, "
            f"{report.ratings_created} ratings in {report.seconds:.1f}s"
        )
