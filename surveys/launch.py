"""A study's life before participants: it starts as a draft, its researchers preview it, then launch it.

A draft is closed to participants (``Study.launched_at`` empty, ``is_open`` False; the database refuses
an open draft). Launching opens it once; closing and reopening a launched study is ``is_open`` alone.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils import timezone

from web.signals import announce_action

from .models import Study


@transaction.atomic
def study_launch(*, study: Study, actor: Any = None, request: Any = None) -> Study:
    """Open a draft study to participants. A study launched already is left as it is (closed stays closed)."""
    opened = Study.objects.filter(pk=study.pk, launched_at__isnull=True).update(launched_at=timezone.now(), is_open=True)
    if opened:  # a second click changes nothing, so it is no state change to record
        announce_action(actor=actor, study=study, action="study.launch", object=study.slug, detail="draft -> open",
                        request=request)
    study.refresh_from_db(fields=["launched_at", "is_open"])
    return study


@transaction.atomic
def study_open_set(*, study: Study, open_: bool, actor: Any = None, request: Any = None) -> Study:
    """Close a launched study to newcomers (``open_`` False) or reopen it. A draft is left as it is (it opens
    by launching); asking for the state it is in already changes nothing and records nothing."""
    locked = Study.objects.select_for_update().get(pk=study.pk)
    if locked.launched_at is not None and locked.is_open != open_:
        locked.is_open = open_
        locked.save(update_fields=["is_open"])  # Study.save stamps or clears closed_at (retention counts from it)
        announce_action(actor=actor, study=locked, action="study.reopen" if open_ else "study.close",
                        object=locked.slug, detail="closed -> open" if open_ else "open -> closed", request=request)
    study.refresh_from_db(fields=["launched_at", "is_open", "closed_at"])
    return study
