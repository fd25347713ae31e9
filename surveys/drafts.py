"""Drafts: what a participant has entered on their current page, kept until the page is submitted.

The page's script posts its form here as answers change (after a short pause),
so that a reload, a return through the study link or another device finds the
page as it was left: the page is rendered pre-filled from the draft
(``selectors.draft_fields``). A draft is checked against the page's own form
fields (only the names the page asks, each value one its field accepts: a
scale point, a rank, a choice, a text within its length), so it can never be
larger than the page itself. A draft is never an answer: the submit path does
not read it, and submitting the page deletes it.
"""

from __future__ import annotations

from django import forms
from django.core.exceptions import ValidationError
from django.db import transaction
from django.http import QueryDict

from web import clock

from .models import BlockVisit, Draft, Participant

# Posted with every form but not answers.
NOT_ANSWERS = frozenset({"csrfmiddlewaretoken", "visit"})
# An unknown field name is quoted in the refusal, cut to this length.
_NAME_QUOTED = 60


class DraftRejected(ValueError):
    """A draft that does not fit its page; the message says why, in words for the page's author."""


def draft_fields_clean(*, form: forms.Form, posted: QueryDict) -> dict[str, str]:
    """The draft of ``posted`` for the page of (unbound) ``form``: field name -> value as entered.

    Empty values are left out (nothing entered). Raises ``DraftRejected`` for a name
    the page does not ask, a name sent twice, or a value its field refuses.
    """
    fields = {}
    for name in posted:
        if name in NOT_ANSWERS:
            continue
        field = form.fields.get(name)
        if field is None:
            raise DraftRejected(f"{name[:_NAME_QUOTED]!r} is not a question on this page.")
        values = posted.getlist(name)
        if len(values) != 1:
            raise DraftRejected(f"{name!r} was sent {len(values)} times; a draft holds one value per question.")
        value = values[0]
        if not value.strip():
            continue
        try:
            field.clean(value)
        except ValidationError as error:
            raise DraftRejected(f"{name}: {' '.join(error.messages)}") from None
        # As entered (a text keeps its spaces and line breaks), since the page shows it again.
        fields[name] = value
    return fields


@transaction.atomic
def draft_save(*, participant_id: int, visit_id: int | None, fields: dict[str, str]) -> bool:
    """Keep ``fields`` as the draft of the participant's current page (``visit_id`` None: the final
    questions), replacing the one before. Returns False, writing nothing, when that page is not
    (or no longer) the current one: a stale tab, or a draft that arrives after its page was submitted."""
    # The same lock as a submit takes: a draft is written before its page's submit, or not at all.
    participant = Participant.objects.select_for_update().get(pk=participant_id)
    if participant.status != Participant.Status.IN_PROGRESS:
        return False
    current = (
        BlockVisit.objects.filter(participant=participant, submitted_at__isnull=True)
        .order_by("sequence")
        .values_list("pk", flat=True)
        .first()
    )
    if visit_id != current or (visit_id is None and participant.demographics_done):
        return False
    now = clock.now()
    if fields:
        Draft.objects.update_or_create(
            participant=participant, visit_id=visit_id, defaults={"fields": fields, "saved_at": now}
        )
    else:
        draft_discard(participant_id=participant_id, visit_id=visit_id)
    # Filling in a page is being there: the participant is not idle, nor back from a break.
    Participant.objects.filter(pk=participant_id).update(last_seen_at=now)
    return True


def draft_discard(*, participant_id: int, visit_id: int | None) -> None:
    """Forget the draft of one page (``visit_id`` None: the final questions), e.g. once it is submitted."""
    Draft.objects.filter(participant_id=participant_id, visit_id=visit_id).delete()


def drafts_discard_all(*, participant_id: int) -> None:
    """Forget every draft of a participant who left: their pages will never be submitted."""
    Draft.objects.filter(participant_id=participant_id).delete()
