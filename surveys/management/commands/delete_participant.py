"""``manage.py delete_participant --study SLUG --participant ID``: a deletion request, done on the server.

ID is the panel id or the pseudonym (exports show the latter). Same effect as the participant withdrawing
(surveys.withdrawal); announced as "participant.delete" with no signed-in actor.
"""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from surveys import withdrawal
from surveys.models import Study


class Command(BaseCommand):
    help = "Delete a participant's answers on their request (panel id or pseudonym); keeps a tombstone."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--study", required=True, help="the study's slug")
        parser.add_argument("--participant", required=True, help="the participant's panel id or pseudonym")

    def handle(self, *args, study: str, participant: str, **options) -> None:
        found = Study.objects.filter(slug=study).first()
        if found is None:
            raise CommandError(f'no study "{study}"')
        try:
            person = withdrawal.participant_find_for_deletion(study=found, identifier=participant)
        except withdrawal.ParticipantNotFound as exc:
            raise CommandError(str(exc)) from None
        tombstone = withdrawal.participant_withdraw(participant_id=person.pk, channel=withdrawal.Channel.COMMAND)
        if tombstone is None:  # withdrew meanwhile
            self.stdout.write(f"{person.pseudonym}: already deleted")
            return
        self.stdout.write(f"{tombstone.pseudonym}: answers deleted at {tombstone.withdrawn_at.isoformat()}")
