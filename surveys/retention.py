"""Retention of panel identifiers: ``retention: {identifiers_days: N}`` in a study's definition.

N days after a study closes (``Study.closed_at``), its panel identifiers are replaced by their pseudonyms:
participants' panel ids (and the panel's study and session ids, which also point at a person on the panel),
the ids Prolific's submissions and bonus ledger carry, and invited raters' link ids (so the rater page still
finds their progress). Analyses read pseudonyms only, so every table stays the same; ``identifiers.csv`` says
the ids were removed, and when (``Study.identifiers_removed_at``).

``retention_pass`` runs on Celery beat (``surveys.apply_retention``); it is idempotent: a study whose ids
are gone is not touched again, and a pass interrupted half-way rolls back (one transaction per study).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import F
from django.dispatch import Signal

from web import clock
from web.signals import announce_action

from .models import Participant, RaterLink, Study
from .pseudonyms import pseudonym_for

#: Sent (``study``, ``key``: the study's pseudonym key) inside the transaction that removes a study's
#: identifiers: an app that keeps copies of panel ids (prolific/) replaces them by their pseudonyms
#: (``pseudonym_for(key=key, ...)``). Apps above surveys listen; surveys never imports them.
identifiers_removing = Signal()


def identifiers_days(study: Study) -> int | None:
    """N of the study's ``retention``; None when it keeps its identifiers."""
    retention = (study.definition or {}).get("retention") or {}
    return retention.get("identifiers_days")


def closed_studies_stamp(*, now: datetime) -> int:
    """Launched, closed studies without ``closed_at`` (closed by an update() that bypassed Study.save):
    they count as closed from the first pass that sees them, never from before."""
    return Study.objects.filter(launched_at__isnull=False, is_open=False, closed_at__isnull=True).update(closed_at=now)


def studies_due(*, now: datetime) -> list[Study]:
    candidates = Study.objects.filter(is_open=False, closed_at__isnull=False, identifiers_removed_at__isnull=True)
    return [study for study in candidates
            if identifiers_days(study) is not None and study.closed_at + timedelta(days=identifiers_days(study)) <= now]


def identifiers_remove(*, study: Study, now: datetime | None = None) -> int:
    """Replace the study's panel identifiers with pseudonyms; the number of participants whose id changed.
    A study whose identifiers are already removed is left as it is (0)."""
    now = now or clock.now()
    with transaction.atomic():
        study = Study.objects.select_for_update().get(pk=study.pk)
        if study.identifiers_removed_at is not None:
            return 0
        key = study.pseudonym_key
        changed = Participant.objects.filter(study=study).exclude(external_id=F("pseudonym")).count()
        Participant.objects.filter(study=study).update(external_id=F("pseudonym"), panel_study_id="",
                                                      panel_session_id="")
        for link in RaterLink.objects.filter(study=study):
            RaterLink.objects.filter(pk=link.pk).update(external_id=pseudonym_for(key=key, external_id=link.external_id))
        identifiers_removing.send(sender=Study, study=study, key=key)
        Study.objects.filter(pk=study.pk).update(identifiers_removed_at=now)
        announce_action(actor=None, study=study, action="identifiers.remove", object=f"{changed} participants",
                        detail=f"retention: identifiers_days={identifiers_days(study)}")
    return changed


def retention_pass(*, now: datetime | None = None) -> list[str]:
    """Remove the identifiers of every study whose retention time has come; the slugs done."""
    now = now or clock.now()
    closed_studies_stamp(now=now)
    done = []
    for study in studies_due(now=now):
        identifiers_remove(study=study, now=now)
        done.append(study.slug)
    return done
