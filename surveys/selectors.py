"""Reads for the participant flow.

Every page of the flow is built from a small, fixed number of queries, whatever
the size of the study: the participant (with its study), one row per visit of
its sequence, and the details of the one page being shown.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum

from .models import (
    BlockVisit,
    DemographicQuestion,
    Dimension,
    Draft,
    FreeTextQuestion,
    ItemPlacement,
    Participant,
    Study,
)


class Step(str, Enum):
    CONSENT = "consent"
    INSTRUCTIONS = "instructions"
    PAGE = "page"
    DEMOGRAPHICS = "demographics"
    DONE = "done"
    EXITED = "exited"


@dataclass(frozen=True)
class VisitSummary:
    id: int
    sequence: int
    is_block: bool
    submitted: bool
    seconds: float | None = None  # shown to submitted, for the time estimate


def _seconds_between(shown: datetime | None, submitted: datetime | None) -> float | None:
    return (submitted - shown).total_seconds() if shown and submitted else None


@dataclass(frozen=True)
class Progress:
    """Where the participant is in their sequence of pages."""

    block_number: int  # the block on screen, or the blocks already done on a check page
    block_total: int
    pages_done: int
    pages_total: int


@dataclass
class ParticipantState:
    participant: Participant
    visits: list[VisitSummary]
    step: Step
    current_visit_id: int | None
    progress: Progress | None


@dataclass
class VisitPage:
    """Everything a block or attention-check page shows."""

    visit: BlockVisit
    placements: list[ItemPlacement]
    dimensions: list[Dimension]
    study: Study  # what the study asks (its question types) and in which words
    free_text_questions: list[FreeTextQuestion] = field(default_factory=list)

    @property
    def is_check(self) -> bool:
        return self.visit.attention_check_id is not None


def study_get(*, slug: str) -> Study | None:
    return Study.objects.filter(slug=slug).first()


def study_language(*, slug: str) -> str | None:
    """The language code of the study's participant pages; None if there is no such study."""
    return Study.objects.filter(slug=slug).values_list("language", flat=True).first()


def participant_find(*, study: Study, external_id: str) -> Participant | None:
    return Participant.objects.filter(study=study, external_id=external_id).first()


def participant_get(*, participant_id: int, slug: str) -> Participant | None:
    return Participant.objects.select_related("study").filter(pk=participant_id, study__slug=slug).first()


def participant_state(*, participant: Participant) -> ParticipantState:
    visits = [
        VisitSummary(id=row[0], sequence=row[1], is_block=row[2] is not None, submitted=row[3] is not None,
                     seconds=_seconds_between(row[4], row[3]))
        for row in BlockVisit.objects.filter(participant=participant)
        .order_by("sequence")
        .values_list("id", "sequence", "block_id", "submitted_at", "shown_at")
    ]
    current = next((v for v in visits if not v.submitted), None)
    return ParticipantState(
        participant=participant,
        visits=visits,
        step=_step(participant, current),
        current_visit_id=current.id if current else None,
        progress=_progress(visits, current),
    )


def _step(participant: Participant, current: VisitSummary | None) -> Step:
    if participant.status == Participant.Status.COMPLETED:
        return Step.DONE
    if participant.status == Participant.Status.EXITED:
        return Step.EXITED
    if not participant.instructions_seen:
        return Step.INSTRUCTIONS
    if current is not None:
        return Step.PAGE
    return Step.DEMOGRAPHICS


def _progress(visits: list[VisitSummary], current: VisitSummary | None) -> Progress:
    blocks = [v for v in visits if v.is_block]
    done = sum(v.submitted for v in visits)
    if current is None:
        return Progress(len(blocks), len(blocks), done, len(visits))
    blocks_before = sum(1 for v in blocks if v.sequence < current.sequence)
    number = blocks_before + 1 if current.is_block else blocks_before
    return Progress(number, len(blocks), done, len(visits))


def visit_page_get(*, visit_id: int, study: Study) -> VisitPage:
    visit = BlockVisit.objects.select_related("block__scenario", "attention_check").get(pk=visit_id)
    dimensions = list(Dimension.objects.filter(study=study))
    if visit.attention_check_id is not None:
        return VisitPage(visit=visit, placements=[], dimensions=dimensions[:1], study=study)
    placements = list(ItemPlacement.objects.filter(visit=visit).select_related("item").order_by("position"))
    questions = list(FreeTextQuestion.objects.filter(study=study, per_block=True))
    return VisitPage(visit=visit, placements=placements, dimensions=dimensions, free_text_questions=questions,
                     study=study)


def demographic_questions(*, study: Study) -> list[DemographicQuestion]:
    return list(DemographicQuestion.objects.filter(study=study))


def end_of_study_questions(*, study: Study) -> list[FreeTextQuestion]:
    return list(FreeTextQuestion.objects.filter(study=study, per_block=False))


def draft_fields(*, participant_id: int, visit_id: int | None) -> dict[str, str]:
    """What the participant had entered on a page without submitting it (``visit_id`` None: the final
    questions), field name -> value; empty when nothing was kept."""
    drafts = Draft.objects.filter(participant_id=participant_id, visit_id=visit_id)
    return drafts.values_list("fields", flat=True).first() or {}
