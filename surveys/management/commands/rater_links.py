from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from surveys import rater_links
from surveys.models import RaterLink, Study
from web.signals import announce_action


class Command(BaseCommand):
    help = (
        "Personal links of invited raters (studies with recruitment mode \"invited\"): create them for new names "
        "(one line per rater: name, a tab, the URL, shown this once), list them, or revoke one."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--study", required=True, help="the study's slug")
        action = parser.add_mutually_exclusive_group(required=True)
        action.add_argument("--names", help='names separated by commas, e.g. "Ann,Bo,Chen"')
        action.add_argument("--list", action="store_true", help="every link with its rater's status (no URLs)")
        action.add_argument("--revoke", metavar="NAME", help="revoke the active link of this rater")

    def handle(self, *args, **options) -> None:
        study = Study.objects.filter(slug=options["study"]).first()
        if study is None:
            raise CommandError(f'no study "{options["study"]}"')
        if options["names"] is not None:
            self._create(study, options["names"])
        elif options["list"]:
            for row in rater_links.rater_rows(study=study):
                self.stdout.write(f"{row.link.name}\t{row.status}\t{row.pages_done}/{row.pages_total} pages")
        else:
            self._revoke(study, options["revoke"])

    def _create(self, study: Study, names: str) -> None:
        try:
            created = rater_links.rater_links_create(study=study, names=rater_links.names_parse(names))
        except rater_links.RaterLinksRefused as exc:
            raise CommandError(f"{exc}; no link was created") from None
        for new in created:
            announce_action(actor=None, study=study, action="rater_link.create", object=new.link.name,
                            detail=f"link {new.link.pk}, manage.py rater_links")
            self.stdout.write(f"{new.link.name}\t{new.url(settings.SITE_URL)}")
        self.stderr.write(f"{len(created)} link(s) created. They are shown this once: only a hash is stored.")

    def _revoke(self, study: Study, name: str) -> None:
        link = RaterLink.objects.filter(study=study, name=name, revoked_at__isnull=True).first()
        if link is None:
            raise CommandError(f'study "{study.slug}" has no active link for "{name}"')
        rater_links.rater_link_revoke(study=study, link_id=link.pk)
        announce_action(actor=None, study=study, action="rater_link.revoke", object=f"link {link.pk}",
                        detail="manage.py rater_links")
        self.stdout.write(f'the link of "{name}" is revoked')
