import secrets

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.core.management import call_command
from django.core.management.base import BaseCommand

from surveys.definition import parse_definition, read_definition_file
from surveys.loader import StudyLocked, study_load
from surveys.models import Participant, Study

DEMO_USERNAME = "researcher"
DEMO_PASSWORD = "demo-researcher-password"
DEMO_PARTICIPANTS = 150
FIXTURES = ["fixtures/tide.json", "fixtures/counselor.json", "fixtures/most_least.json", "fixtures/pairwise.json"]
# Scripted participants each other demo starts with, so that its results can be run at once;
# each comes in by its study's recruitment channel (bots.channels).
DEMO_PAIRWISE_PARTICIPANTS = 40
DEMO_RATERS = 5  # invited raters of the counselor study, as the CUHK report's five psychology students
DEMO_OPEN_LINK_PARTICIPANTS = 40  # the most-least study's open link, up to its target of 40


class Command(BaseCommand):
    help = "Load the demo studies and a demo researcher who owns them (idempotent)."

    def handle(self, *args, **options) -> None:
        for fixture in FIXTURES:
            self._load_demo_study(settings.BASE_DIR / fixture)
        user, _ = get_user_model().objects.get_or_create(username=DEMO_USERNAME, defaults={"is_staff": True})
        user.is_staff = True
        user.set_password(DEMO_PASSWORD)
        user.save()
        # The admin lists the studies, their items and participants to a staff user with these.
        user.user_permissions.add(*Permission.objects.filter(
            content_type__app_label="surveys", codename__in=["view_study", "view_item", "view_participant"]))
        for study in Study.objects.filter(slug__in=["tide", "counselor", "most-least", "pairwise"]):
            study.owners.add(user)
        targets = {"tide": DEMO_PARTICIPANTS, "pairwise": DEMO_PAIRWISE_PARTICIPANTS,
                   "counselor": DEMO_RATERS, "most-least": DEMO_OPEN_LINK_PARTICIPANTS}
        for slug, target in targets.items():
            study = Study.objects.get(slug=slug)
            if Participant.objects.filter(study=study, is_preview=False).count() < target:
                # Tops up to the target only, so running setup_demo again adds nobody.
                call_command("simulate_participants", study=slug, n=target, seed=1, stdout=self.stdout)
        site = settings.SITE_URL
        self.stdout.write(self.style.SUCCESS(
            f"\nDemo researcher: {DEMO_USERNAME} / {DEMO_PASSWORD}  (sign in at {site}/accounts/login/)\n"
            f"Participant link: {site}/s/tide/?PROLIFIC_PID={secrets.token_hex(12)}&STUDY_ID=demo&SESSION_ID=demo\n"
            f"Open link of the most-least study: {site}/s/most-least/\n"
            f'Invited raters of the counselor study: python manage.py rater_links --study counselor --names "Ann,Bo" '
            f"(or {site}/studies/counselor/raters/)\n"
        ))

    def _load_demo_study(self, path) -> None:
        """Load one demo fixture; a demo study that people already took part in is kept as it is.

        A database made by an older version keeps its demo study when the fixture has since
        changed what participants see: running the demo again must not fail on it.
        """
        try:
            result = study_load(definition=parse_definition(read_definition_file(path)))
        except StudyLocked as exc:
            self.stdout.write(self.style.WARNING(
                f"{path.name}: kept the existing study ({exc}); delete the database to load the new version"))
            return
        self.stdout.write(f'study "{result.study.slug}" {"created" if result.created else "loaded"}')
