"""Reads only the bots make: a participant's whole sequence of pages at once."""

from __future__ import annotations

from surveys.models import BlockVisit, Dimension, FreeTextQuestion, ItemPlacement, Participant
from surveys.selectors import VisitPage


def participant_pages(*, participant: Participant) -> list[VisitPage]:
    """Every page of the participant's sequence, in order, from four queries (bulk use: the services driver)."""
    study = participant.study
    dimensions = list(Dimension.objects.filter(study=study))
    questions = list(FreeTextQuestion.objects.filter(study=study, per_block=True))
    visits = list(
        BlockVisit.objects.filter(participant=participant)
        .select_related("block__scenario", "attention_check")
        .order_by("sequence")
    )
    placements: dict[int, list[ItemPlacement]] = {}
    for placement in ItemPlacement.objects.filter(visit__participant=participant).select_related("item").order_by(
        "visit_id", "position"
    ):
        placements.setdefault(placement.visit_id, []).append(placement)
    return [
        VisitPage(visit=v, placements=[], dimensions=dimensions[:1], study=study)
        if v.attention_check_id
        else VisitPage(visit=v, placements=placements.get(v.pk, []), dimensions=dimensions, study=study,
                       free_text_questions=questions)
        for v in visits
    ]
