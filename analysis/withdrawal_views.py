"""The researchers' page for a participant's deletion request (surveys.withdrawal).

The owner names the participant by panel id or pseudonym, sees whom that is, and confirms; the answers go as if
the participant had withdrawn themselves. Owners only (``Capability.MANAGE``): a team member of another role
gets 403, anyone else 404.
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render

from surveys import withdrawal
from surveys.models import Study
from surveys.permissions import Capability, require
from surveys.limits import EXTERNAL_ID


def _page(request: HttpRequest, study: Study, *, status: int = 200, **extra) -> HttpResponse:
    return render(request, "researcher/participant_delete.html", {
        "study": study, "withdrawals": study.withdrawals.all(), "max_length": EXTERNAL_ID, **extra,
    }, status=status)


@login_required
def participant_delete_page(request: HttpRequest, slug: str) -> HttpResponse:
    study = require(request.user, slug, Capability.MANAGE, request=request)
    if request.method != "POST":
        return _page(request, study)
    identifier = request.POST.get("participant", "").strip()[:EXTERNAL_ID]
    if not identifier:
        return _page(request, study, status=400, error="Enter the participant's panel id or pseudonym.")
    try:
        participant = withdrawal.participant_find_for_deletion(study=study, identifier=identifier)
    except withdrawal.ParticipantNotFound as exc:
        return _page(request, study, status=400, error=str(exc), identifier=identifier)
    if request.POST.get("confirm") != "yes":
        # A second step: the researcher sees the pseudonym and the participant's state before anything goes.
        return _page(request, study, confirm=participant, identifier=identifier)
    tombstone = withdrawal.participant_withdraw(participant_id=participant.pk, channel=withdrawal.Channel.RESEARCHER,
                                                actor=request.user, request=request)
    if tombstone is not None:
        messages.success(request, f"The answers of {tombstone.pseudonym} were deleted.")
    return redirect("researcher:participant_delete", slug=study.slug)
