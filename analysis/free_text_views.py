"""The researchers' page of written answers: filter by question and block, search the text, read each
answer beside the block's prompt and the responses the participant saw.

Owners and analysts (``Capability.EXPORT``: 404 outside the team, 403 for other roles). Filters are
GET parameters checked by ``FreeTextFilterForm``; a bad one is answered 400 with its message, never 500.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from surveys.permissions import Capability, require
from surveys.questions import best_worst
from surveys.questions.controls import letter_label
from surveys.models import FreeTextAnswer, ItemPlacement

from . import selectors
from .forms import FreeTextFilterForm

ANSWERS_PER_PAGE = 25


@dataclass(frozen=True)
class ShownResponse:
    """One response as the participant saw it on the block of their answer."""

    label: str
    position: int
    model: str
    condition: str
    choice: str  # "most", "least" or ""
    rank: int | None
    text: str


def shown_responses(answer: FreeTextAnswer, *, letter_labels: bool) -> list[ShownResponse]:
    if answer.visit is None:
        return []
    placements: list[ItemPlacement] = sorted(answer.visit.placements.all(), key=lambda p: p.position)
    return [
        ShownResponse(
            label=letter_label(p.position) if letter_labels else p.item.source_label, position=p.position,
            model=p.item.system.name, condition=p.item.condition.name, choice=best_worst.CHOICE_NAMES.get(p.choice, ""),
            rank=p.rank, text=p.item.text,
        )
        for p in placements
    ]


@login_required
def free_text_answers(request: HttpRequest, slug: str) -> HttpResponse:
    study = require(request.user, slug, Capability.EXPORT, request=request)
    form = FreeTextFilterForm(
        request.GET,
        question_keys=list(study.free_text_questions.values_list("key", flat=True)),
        block_keys=list(study.blocks.values_list("key", flat=True)),
    )
    if not form.is_valid():
        return render(request, "researcher/free_text.html", {"study": study, "form": form, "page": None}, status=400)
    wanted = form.cleaned_data
    answers = selectors.free_text_answers(study=study, question=wanted["question"], block=wanted["block"],
                                          contains=wanted["q"])
    page = Paginator(answers, ANSWERS_PER_PAGE).get_page(request.GET.get("page"))
    rows = [(answer, shown_responses(answer, letter_labels=study.letter_labels)) for answer in page]
    return render(request, "researcher/free_text.html", {"study": study, "form": form, "page": page, "rows": rows})
