"""The researchers' preview of the participant pages (``surveys.preview``): the same pages, in the study's
language, for the study's owners (and staff) only (surveys.permissions), drafts included; nothing is written to the database.

``/s/<slug>/preview/`` starts a click-through (``?seed=`` follows the sequence the researchers' page showed);
``/s/<slug>/preview/<step>/`` is each step. Answers are checked as a participant's would be, then dropped.
"""

from __future__ import annotations

import math

from django.contrib.auth.views import redirect_to_login
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.cache import never_cache

from . import preview, recruitment, selectors
from .conversation import transcript_of
from .forms import DemographicsForm, PageForm
from .language import in_study_language, study_language_confirm
from .models import Study
from .permissions import Capability, require
from .preview import PreviewOutdated, PreviewState, PreviewStep
from .views import TYPICAL_SECONDS_PER_BLOCK, TimeLeft, _see_other


def _session_key(slug: str) -> str:
    return f"preview:{slug}"


def _researcher_study(request: HttpRequest, slug: str) -> Study | HttpResponse:
    study = selectors.study_get(slug=slug)
    if study is None:
        raise Http404("No such study")
    study_language_confirm(study)
    user = request.user
    if not user.is_authenticated:
        return redirect_to_login(request.get_full_path())
    # Like the launch page: owners (and staff); 404 outside the team, 403 for other roles.
    return require(user, study, Capability.MANAGE, request=request)


def _go(slug: str, step: PreviewStep) -> HttpResponse:
    return _see_other(reverse("surveys:preview_step", args=[slug, step.value]))


@never_cache
@in_study_language
def preview_start(request: HttpRequest, slug: str) -> HttpResponse:
    study = _researcher_study(request, slug)
    if isinstance(study, HttpResponse):
        return study
    state = preview.preview_state_new(study=study, seed=preview.preview_seed_from(request.GET.get("seed", "")))
    request.session[_session_key(slug)] = state.as_session()
    return _go(slug, PreviewStep.CONSENT)


@never_cache
@in_study_language
def preview_step(request: HttpRequest, slug: str, step: str) -> HttpResponse:
    study = _researcher_study(request, slug)
    if isinstance(study, HttpResponse):
        return study
    try:
        wanted = PreviewStep(step)
    except ValueError:
        raise Http404("No such page") from None
    stored = request.session.get(_session_key(slug))
    if stored is None:
        return _see_other(reverse("surveys:preview", args=[slug]))
    state = PreviewState.from_session(stored)
    if state.step != wanted:
        return _go(slug, state.step)
    try:
        response = STEPS[wanted](request, study, state)
    except PreviewOutdated:
        return _see_other(reverse("surveys:preview", args=[slug]) + f"?seed={state.seed}")
    request.session[_session_key(slug)] = state.as_session()
    return response


def _context(study: Study, state: PreviewState, **extra) -> dict:
    return {"study": study, "participant": None, "preview": True, "progress": state.progress(), **extra}


def _consent(request: HttpRequest, study: Study, state: PreviewState) -> HttpResponse:
    if request.method == "POST":
        decision = request.POST.get("decision")
        if decision == "decline":
            request.session.pop(_session_key(study.slug), None)
            return render(request, "surveys/notice_declined.html", {"study": study, "preview": True})
        if decision == "accept":
            state.step = PreviewStep.INSTRUCTIONS
            return _go(study.slug, state.step)
        return render(request, "surveys/consent.html", _context(study, state, error=True), status=400)
    return render(request, "surveys/consent.html", _context(study, state))


def _instructions(request: HttpRequest, study: Study, state: PreviewState) -> HttpResponse:
    if request.method == "POST":
        state.step = PreviewStep.PAGE if state.pages else PreviewStep.DEMOGRAPHICS
        return _go(study.slug, state.step)
    return render(request, "surveys/instructions.html", _context(study, state))


def _page(request: HttpRequest, study: Study, state: PreviewState) -> HttpResponse:
    page = preview.preview_visit_page(study=study, state=state)
    if request.method == "POST":
        form = PageForm(request.POST, page=page)
        if request.POST.get("visit") == str(page.visit.pk) and form.is_valid():
            state.next_page()
            return _go(study.slug, state.step)
        status = 400
    else:
        form, status = PageForm(None, page=page), 200
    done, total = state.blocks_done(), state.progress().block_total
    time_left = TimeLeft(blocks_done=done, minutes=math.ceil((total - done) * TYPICAL_SECONDS_PER_BLOCK / 60),
                         own_pace=False)
    template = "surveys/check.html" if page.is_check else "surveys/block.html"
    transcript = None if page.is_check else transcript_of(page.visit.block.scenario.context)
    return render(request, template, _context(study, state, form=form, visit=page.visit, transcript=transcript,
                                              time_left=time_left), status=status)


def _demographics(request: HttpRequest, study: Study, state: PreviewState) -> HttpResponse:
    form = DemographicsForm(
        request.POST if request.method == "POST" else None,
        questions=selectors.demographic_questions(study=study),
        end_questions=selectors.end_of_study_questions(study=study),
    )
    if request.method == "POST":
        if form.is_valid():
            state.step = PreviewStep.DONE
            return _go(study.slug, state.step)
        return render(request, "surveys/demographics.html", _context(study, state, form=form), status=400)
    return render(request, "surveys/demographics.html", _context(study, state, form=form))


def _done(request: HttpRequest, study: Study, state: PreviewState) -> HttpResponse:
    # The code and the link back are shown as a participant sees them; a preview is never sent to the panel.
    return_url = recruitment.completion_url_for(study.completion_url, study.completion_code)
    return render(request, "surveys/done.html",
                  _context(study, state, code=study.completion_code, return_url=return_url, send_back=False))


STEPS = {
    PreviewStep.CONSENT: _consent,
    PreviewStep.INSTRUCTIONS: _instructions,
    PreviewStep.PAGE: _page,
    PreviewStep.DEMOGRAPHICS: _demographics,
    PreviewStep.DONE: _done,
}
