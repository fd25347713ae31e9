"""Prolific's copies of panel ids follow the study's retention (``surveys.retention.identifiers_removing``)."""

from __future__ import annotations

from typing import Any

from django.dispatch import receiver

from surveys.models import Study
from surveys.pseudonyms import pseudonym_for
from surveys.retention import identifiers_removing

from .models import BonusLine, PanelSubmission


@receiver(identifiers_removing, sender=Study, dispatch_uid="prolific.panel_ids_pseudonymise")
def panel_ids_pseudonymise(*, study: Study, key: str, **_: Any) -> None:
    """The ids Prolific's submissions and bonus ledger carry (a submission may be returned before its
    participant reached us), replaced by their pseudonyms."""
    for model in (PanelSubmission, BonusLine):
        rows = model.objects.filter(panel_study__study=study)
        for pk, panel_id in rows.values_list("pk", "panel_participant_id"):
            model.objects.filter(pk=pk).update(panel_participant_id=pseudonym_for(key=key, external_id=panel_id))
