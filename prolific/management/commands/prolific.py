from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from prolific import selectors, services
from prolific.client import ProlificError
from surveys.models import Study
from web.signals import announce_action

ACTIONS = ("create", "publish", "pause", "resume", "sync", "approve", "bonus", "group")


class Command(BaseCommand):
    help = ("The study's round trip with Prolific (token in PROLIFIC_API_TOKEN): create the draft, publish, pause, "
            "resume, sync submissions, approve/reject from the latest run (--yes to act), pay bonuses from a CSV "
            "(participant pseudonym or Prolific id, amount), add completed and rejected participants to a group.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--study", required=True, help="the study's slug")
        parser.add_argument("action", choices=ACTIONS)
        parser.add_argument("file", nargs="?", help="bonus: the CSV file")
        parser.add_argument("--reward-cents", type=int, default=0, help="create: the reward in cents (pence)")
        parser.add_argument("--minutes", type=int, help="create: estimated minutes (default: the study's)")
        parser.add_argument("--yes", action="store_true", help="approve: act on the list shown")
        parser.add_argument("--pay-again", action="append", default=[], metavar="PROLIFIC_ID",
                            help="bonus: pay this participant although they already have a bonus in this study "
                                 "(once per person)")

    def handle(self, *args, **options) -> None:
        study = Study.objects.filter(slug=options["study"]).first()
        if study is None:
            raise CommandError(f'no study "{options["study"]}"')
        action = options["action"]
        panel = selectors.panel_study_of(study=study)
        if action != "create" and panel is None:
            raise CommandError(f'study "{study.slug}" has no study on Prolific: run "create" first')
        try:
            message = getattr(self, f"_{action}")(study, panel, options)
        except (services.PanelRefused, ProlificError) as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(message)
        self._audit(study, action, options, message)

    @staticmethod
    def _audit(study, action: str, options, message: str) -> None:
        """The same trail as the pages' (actor None: the command's user is no account of the site)."""
        if action == "approve" and not options["yes"]:
            return  # only listed, nothing done
        panel = selectors.panel_study_of(study=study)
        names = ("prolific.approve", "prolific.reject") if action == "approve" else (f"prolific.{action}",)
        for name in names:
            announce_action(actor=None, study=study, action=name, object=panel.prolific_id if panel else "",
                            detail=f"manage.py prolific: {message}")

    def _create(self, study, panel, options) -> str:
        panel = services.panel_study_create(study=study, reward_cents=options["reward_cents"],
                                            estimated_minutes=options["minutes"], base_url=settings.SITE_URL)
        return f"draft {panel.prolific_id} created on Prolific ({panel.places} places); publish it when ready"

    def _transition(self, panel, action) -> str:
        return f"{panel.study.slug} is {services.panel_study_transition(panel=panel, action=action).status} on Prolific"

    def _publish(self, study, panel, options) -> str:
        return self._transition(panel, "publish")

    def _pause(self, study, panel, options) -> str:
        return self._transition(panel, "pause")

    def _resume(self, study, panel, options) -> str:
        return self._transition(panel, "resume")

    def _sync(self, study, panel, options) -> str:
        summary = services.panel_submissions_sync(panel=panel)
        return (f"{summary.submissions} submissions, {summary.changed} changed, "
                f"{summary.released} returned, timed out or rejected")

    def _approve(self, study, panel, options) -> str:
        plan = selectors.review_plan(panel=panel)
        for row in plan.rows:
            self.stdout.write(f"{row.decision}\t{row.pseudonym or '-'}\t{row.submission_id}\t{row.why}")
        if not options["yes"]:
            return (f"{len(plan.of('approve'))} to approve, {len(plan.of('reject'))} to reject: "
                    "run again with --yes to do it")
        done = services.review_apply(panel=panel, confirmed_fingerprint=plan.fingerprint)
        return f"{done.approved} approved, {done.rejected} rejected on Prolific"

    def _bonus(self, study, panel, options) -> str:
        if not options["file"]:
            raise CommandError("give the CSV file: prolific --study SLUG bonus FILE")
        try:
            data = Path(options["file"]).read_bytes()
        except OSError as exc:
            raise CommandError(f"cannot read {options['file']}: {exc.strerror}") from None
        payment = services.bonuses_pay(panel=panel, data=data, pay_again=set(options["pay_again"]))
        return f"{payment.participants} bonuses paid, {payment.total_amount} in all (Prolific id {payment.prolific_id})"

    def _group(self, study, panel, options) -> str:
        added = services.group_update(panel=panel)
        return f"{added} participants in Prolific group {panel.participant_group_id}"
