from django.core.management.base import BaseCommand, CommandError

from judges.importers import ImportProblems, judgements_import
from surveys.models import Study


class Command(BaseCommand):
    help = ("Import judges' answers from a CSV (judge, block_id, response_id, dimension, value; or judge, block_id, "
            "left_response_id, right_response_id, preference). Every bad line is reported and nothing is written.")

    def add_arguments(self, parser):
        parser.add_argument("--study", required=True, help="the study's slug")
        parser.add_argument("file")

    def handle(self, *args, study: str, file: str, **options):
        found = Study.objects.filter(slug=study).first()
        if found is None:
            raise CommandError(f'no study "{study}"')
        try:
            with open(file, "rb") as handle:
                report = judgements_import(study=found, file=handle)
        except OSError as exc:
            raise CommandError(f"cannot read {file}: {exc.strerror}") from None
        except ImportProblems as exc:
            raise CommandError("nothing was imported:\n" + "\n".join(exc.problems)) from None
        self.stdout.write(report.summary)
