from decimal import Decimal, InvalidOperation

from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from judges import services
from judges.models import Judge, JudgeRun
from judges.tasks import judge_run
from surveys.models import Study


class Command(BaseCommand):
    help = ("Run an LLM judge over every block of a study (endpoint, model and key from JUDGE_API_URL, JUDGE_MODEL, "
            "JUDGE_API_KEY), or resume a run with --resume RUN_ID.")

    def add_arguments(self, parser):
        parser.add_argument("--study", help="the study's slug")
        parser.add_argument("--judge", help="the judge's name (registered as an LLM judge if new)")
        parser.add_argument("--model", default="", help="the model to ask (default JUDGE_MODEL)")
        parser.add_argument("--rpm", type=int, default=60, help="requests per minute at most")
        parser.add_argument("--cost-cap", default="1", help="stop once the run has cost this much")
        parser.add_argument("--one-order", action="store_true", help="pairwise: do not ask again with sides swapped")
        parser.add_argument("--resume", type=int, help="resume this run instead of creating one")
        parser.add_argument("--here", action="store_true", help="run in this process instead of a worker")

    def handle(self, *args, **o):
        if o["resume"]:
            run = JudgeRun.objects.filter(pk=o["resume"]).first()
            if run is None:
                raise CommandError(f"no judge run {o['resume']}")
        else:
            study = Study.objects.filter(slug=o["study"] or "").first()
            if study is None or not o["judge"]:
                raise CommandError("give --study SLUG and --judge NAME (or --resume RUN_ID)")
            try:
                with transaction.atomic():  # bad input writes nothing, not even the judge
                    cap = Decimal(o["cost_cap"])
                    services.judges_declared_register(study=study)
                    judge = services.judge_register(study=study, name=o["judge"], kind=Judge.Kind.LLM,
                                                    model=o["model"])
                    run = services.judge_run_create(judge=judge, requests_per_minute=o["rpm"], cost_cap=cap,
                                                    both_orders=not o["one_order"])
            except (InvalidOperation, ValueError) as exc:
                raise CommandError(str(exc) or "invalid cost cap") from None
        if o["here"]:
            while (done := services.judge_run_execute(run_id=run.pk, max_calls=None)) is not None \
                    and done.status == JudgeRun.Status.RUNNING:
                pass
            run.refresh_from_db()
            self.stdout.write(f"judge run {run.pk}: {run.status} {run.error}".rstrip())
        else:
            judge_run.delay(run.pk)
            self.stdout.write(f"judge run {run.pk} sent to the workers")
