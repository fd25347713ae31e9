"""The researchers' preview: what a new participant would be given, and a click-through of it that records nothing.

A preview writes no row at all (no participant, sequence, answer, draft or counter): the sequence a new
participant would get (``services.sequence_plan``, drawn from a seed) and the preview's place in it live in
the researcher's session, and each page is built in memory from the study's rows, with the page's own
numbers standing in for the ids a participant's rows would have.
"""

from __future__ import annotations

import random
import secrets
from dataclasses import dataclass
from enum import Enum
from typing import Any

from . import allocation
from .models import AttentionCheck, Block, BlockVisit, Dimension, FreeTextQuestion, Item, ItemPlacement, Study
from .selectors import Progress, VisitPage
from .services import PlannedPage, sequence_plan


class PreviewStep(str, Enum):
    CONSENT = "consent"
    INSTRUCTIONS = "instructions"
    PAGE = "page"
    DEMOGRAPHICS = "about-you"
    DONE = "done"


# A seed is shown on the researchers' page and typed into a link: small enough to read.
SEED_LIMIT = 10**9


def preview_seed_from(value: str) -> int:
    """The seed given in a link (``?seed=``), or a new one when there is none or it is not a small number."""
    if value.isascii() and value.isdigit() and int(value) < SEED_LIMIT:
        return int(value)
    return secrets.randbelow(SEED_LIMIT)


def allocation_preview(*, study: Study, seed: int) -> list[PlannedPage]:
    """The sequence a new participant drawn with ``seed`` would be given now: block order, attention checks
    and each block's response order (who comes first depends on the participants so far: counterbalancing).

    In a study that allocates k of n blocks, the blocks are those a newcomer would get now
    (``allocation.blocks_preview``, which allocates nothing)."""
    block_ids = allocation.blocks_preview(study=study) if study.allocates else None
    return sequence_plan(study=study, rng=random.Random(seed), block_ids=block_ids)


@dataclass
class PreviewState:
    """A click-through in progress, as kept in the session (plain JSON)."""

    seed: int
    pages: list[dict[str, Any]]  # {"block": id | None, "check": id | None, "items": [item ids]}
    at: int = 0  # index of the current page
    step: PreviewStep = PreviewStep.CONSENT

    def as_session(self) -> dict[str, Any]:
        return {"seed": self.seed, "pages": self.pages, "at": self.at, "step": self.step.value}

    @classmethod
    def from_session(cls, data: dict[str, Any]) -> "PreviewState":
        return cls(seed=data["seed"], pages=data["pages"], at=data["at"], step=PreviewStep(data["step"]))

    def blocks_done(self) -> int:
        return sum(1 for page in self.pages[: self.at] if page["block"] is not None)

    def progress(self) -> Progress:
        """As a participant's (``selectors.participant_state``): the block on screen, or those done on a check."""
        total = sum(1 for page in self.pages if page["block"] is not None)
        on_block = self.step == PreviewStep.PAGE and self.pages[self.at]["block"] is not None
        return Progress(block_number=self.blocks_done() + on_block, block_total=total, pages_done=self.at,
                        pages_total=len(self.pages))

    def next_page(self) -> None:
        """Move past the current page: to the next one, or to the questions about the person after the last."""
        self.at += 1
        if self.at >= len(self.pages):
            self.step = PreviewStep.DEMOGRAPHICS


def preview_state_new(*, study: Study, seed: int) -> PreviewState:
    plan = allocation_preview(study=study, seed=seed)
    pages = [{"block": page.block.pk if page.block else None,
              "check": page.attention_check.pk if page.attention_check else None,
              "items": page.item_ids} for page in plan]
    return PreviewState(seed=seed, pages=pages)


class PreviewOutdated(Exception):
    """The study's content changed under the preview (it was loaded again): start the preview again."""


def preview_visit_page(*, study: Study, state: PreviewState) -> VisitPage:
    """The current page, built in memory: the visit's id is its sequence number, a placement's its position."""
    page = state.pages[state.at]
    sequence = state.at + 1
    dimensions = list(Dimension.objects.filter(study=study))
    if page["check"] is not None:
        check = AttentionCheck.objects.filter(study=study, pk=page["check"]).first()
        if check is None:
            raise PreviewOutdated(study.slug)
        visit = BlockVisit(id=sequence, sequence=sequence, attention_check=check)
        return VisitPage(visit=visit, placements=[], dimensions=dimensions[:1], study=study)
    block = Block.objects.select_related("scenario").filter(study=study, pk=page["block"]).first()
    items = Item.objects.in_bulk(page["items"])
    if block is None or any(item_id not in items or items[item_id].block_id != block.pk for item_id in page["items"]):
        raise PreviewOutdated(study.slug)
    visit = BlockVisit(id=sequence, sequence=sequence, block=block)
    placements = [ItemPlacement(id=position, item=items[item_id], position=position)
                  for position, item_id in enumerate(page["items"], start=1)]
    questions = list(FreeTextQuestion.objects.filter(study=study, per_block=True))
    return VisitPage(visit=visit, placements=placements, dimensions=dimensions, free_text_questions=questions,
                     study=study)


@dataclass(frozen=True)
class AllocationRow:
    """One page of an allocation as the researchers' page lists it."""

    number: int
    block: str  # block key; "" for an attention check
    scenario: str
    check: str  # attention check key; "" for a block
    responses: list[str]  # "<item key> (<system>, <condition>)" in display order


def allocation_rows(*, study: Study, plan: list[PlannedPage]) -> list[AllocationRow]:
    """``plan`` with each response named by its key, system and condition (one query for all items)."""
    items = {
        pk: f"{key} ({system}, {condition})"
        for pk, key, system, condition in Item.objects.filter(study=study)
        .values_list("pk", "key", "system__name", "condition__name")
    }
    return [
        AllocationRow(number=i, block=page.block.key if page.block else "",
                      scenario=page.block.scenario.key if page.block else "",
                      check=page.attention_check.key if page.attention_check else "",
                      responses=[items[item_id] for item_id in page.item_ids])
        for i, page in enumerate(plan, start=1)
    ]
