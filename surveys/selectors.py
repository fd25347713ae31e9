"""Reads for the participant flow.

Every page of the flow is built from a small, fixed number of queries, whatever
the size of the study: the participant with its study, its sequence of visits and
its current page's draft (one query, ``participant_flow_get``), and the details of the
one page being shown (one query, ``visit_page_get``). What the study asks (dimensions,
questions) comes from the process's copy (``surveys.study_content``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum

from django.db import connection
from django.db.models import JSONField, OuterRef, Subquery
from django.db.models.expressions import RawSQL

from web.prepared_queries import PreparedQuery

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
from .study_content import study_content_get


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
    shown: bool = False  # the page's first showing is recorded (shown_at)


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
    # What was entered on the current page without submitting it (read with the state by participant_flow_get).
    draft: dict[str, str] = field(default_factory=dict)

    @property
    def current(self) -> VisitSummary | None:
        return next((v for v in self.visits if v.id == self.current_visit_id), None)


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
                     seconds=_seconds_between(row[4], row[3]), shown=row[4] is not None)
        for row in BlockVisit.objects.filter(participant=participant)
        .order_by("sequence")
        .values_list("id", "sequence", "block_id", "submitted_at", "shown_at")
    ]
    return _state(participant, visits)


def _state(participant: Participant, visits: list[VisitSummary], draft: dict[str, str] | None = None) -> ParticipantState:
    current = next((v for v in visits if not v.submitted), None)
    return ParticipantState(
        participant=participant,
        visits=visits,
        step=_step(participant, current),
        current_visit_id=current.id if current else None,
        progress=_progress(visits, current),
        draft=draft or {},
    )


# The visits of the participant row as one JSON array [[id, sequence, block_id, submitted_at, shown_at], ...],
# so that the participant, their study and their sequence come in one round trip (a participant page is asked
# for every few seconds by every participant). Timestamps come back as ISO text from either database.
_VISIT_ROWS = {
    "sqlite": "SELECT json_group_array(json_array(v.id, v.sequence, v.block_id, v.submitted_at, v.shown_at))",
    "postgresql": "SELECT jsonb_agg(jsonb_build_array(v.id, v.sequence, v.block_id, v.submitted_at, v.shown_at))",
}


def _visit_rows() -> RawSQL:
    participants = Participant._meta.db_table
    sql = f"{_VISIT_ROWS[connection.vendor]} FROM {BlockVisit._meta.db_table} v WHERE v.participant_id = {participants}.id"
    return RawSQL(sql, (), output_field=JSONField())


def _timestamp(text: str | None) -> datetime | None:
    return datetime.fromisoformat(text) if text else None


def _visit_summaries(rows: list[list] | None) -> list[VisitSummary]:
    out = []
    for visit_id, sequence, block_id, submitted_text, shown_text in sorted(rows or [], key=lambda r: r[1]):
        submitted, shown = _timestamp(submitted_text), _timestamp(shown_text)
        out.append(VisitSummary(id=visit_id, sequence=sequence, is_block=block_id is not None,
                                submitted=submitted is not None, seconds=_seconds_between(shown, submitted),
                                shown=shown is not None))
    return out


def _participant_flow_queryset(*, participant_id: int, slug: str):
    # Drafts of submitted pages are deleted with the submit, so an open page's draft is the current one's.
    open_drafts = Draft.objects.filter(
        participant=OuterRef("pk"), visit__isnull=False, visit__submitted_at__isnull=True
    ).order_by("visit__sequence")
    return (
        Participant.objects.select_related("study")
        # The definition the study was loaded from (tens of kilobytes of JSON) is for reloads and exports,
        # never for a participant's page: read on every request, it cost more than the rest of the query.
        .defer("study__definition")
        .filter(pk=participant_id, study__slug=slug)
        .annotate(
            visit_rows=_visit_rows(),
            draft_visit_id=Subquery(open_drafts.values("visit_id")[:1]),
            draft_fields=Subquery(open_drafts.values("fields")[:1], output_field=JSONField()),
        )
    )


# Every request of a participant reads it: compiled once per process (web.prepared_queries).
_participant_flow = PreparedQuery(_participant_flow_queryset, participant_id=int, slug=str)


def participant_flow_get(*, participant_id: int, slug: str) -> ParticipantState | None:
    """The participant of study ``slug`` with their study, their sequence and the draft of their current block
    or check page, in one query; None when there is no such participant in that study."""
    found = _participant_flow.run(participant_id=participant_id, slug=slug)
    if not found:
        return None
    participant = found[0]
    state = _state(participant, _visit_summaries(participant.visit_rows))
    if participant.draft_visit_id is not None and participant.draft_visit_id == state.current_visit_id:
        state.draft = participant.draft_fields or {}
    return state


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


# Every block GET and POST reads them: compiled once per process (web.prepared_queries).
_block_page_placements = PreparedQuery(
    lambda visit_id: ItemPlacement.objects.filter(visit_id=visit_id)
    .select_related("item", "visit__block__scenario", "visit__attention_check")
    .order_by("position"),
    visit_id=int,
)


def visit_page_get(*, visit_id: int, study: Study, is_block: bool | None = None) -> VisitPage:
    """The page of one visit, in one query when ``is_block`` is known (a block's placements bring their visit
    along); the study's dimensions and questions come from the process's copy."""
    content = study_content_get(study=study)
    dimensions = list(content.dimensions)
    if is_block is not False:
        placements = _block_page_placements.run(visit_id=visit_id)
        if placements:
            visit = placements[0].visit
            for placement in placements:
                placement.visit = visit  # one object for the page, as the templates and savers expect
            if visit.attention_check_id is None:
                return VisitPage(visit=visit, placements=placements, dimensions=dimensions,
                                 free_text_questions=list(content.block_questions), study=study)
    visit = BlockVisit.objects.select_related("block__scenario", "attention_check").get(pk=visit_id)
    if visit.attention_check_id is None:  # a block without placements: nothing to judge, but still a block
        return VisitPage(visit=visit, placements=[], dimensions=dimensions,
                         free_text_questions=list(content.block_questions), study=study)
    return VisitPage(visit=visit, placements=[], dimensions=dimensions[:1], study=study)


def demographic_questions(*, study: Study) -> list[DemographicQuestion]:
    return list(study_content_get(study=study).demographic_questions)


def end_of_study_questions(*, study: Study) -> list[FreeTextQuestion]:
    return list(study_content_get(study=study).end_questions)


def draft_fields(*, participant_id: int, visit_id: int | None) -> dict[str, str]:
    """What the participant had entered on a page without submitting it (``visit_id`` None: the final
    questions), field name -> value; empty when nothing was kept."""
    drafts = Draft.objects.filter(participant_id=participant_id, visit_id=visit_id)
    return drafts.values_list("fields", flat=True).first() or {}
