"""Researcher pages of the Prolific round trip: create the draft, publish, pause, sync, review.

Owners (and staff) only, anyone else gets 404; every action is a POST with CSRF.
A refusal of ours answers 400 and one from Prolific 502, each with the page and its
message; neither changes anything here.
"""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_POST

from surveys.access import study_for_user
from surveys.models import Study

from . import selectors, services
from .client import ProlificError
from .forms import DraftForm


def _page(request: HttpRequest, study: Study, *, status: int = 200, form: DraftForm | None = None,
          **extra) -> HttpResponse:
    panel = selectors.panel_study_of(study=study)
    return render(request, "prolific/panel.html", {
        "study": study, "panel": panel, "form": form or DraftForm(initial={"estimated_minutes": study.estimated_minutes}),
        "counts": selectors.submission_counts(panel=panel) if panel else {}, **extra,
    }, status=status)


def _failure(exc: Exception) -> int:
    return 502 if isinstance(exc, ProlificError) else 400


@login_required
def panel_page(request: HttpRequest, slug: str) -> HttpResponse:
    return _page(request, study_for_user(request.user, slug))


@login_required
@require_POST
def panel_create(request: HttpRequest, slug: str) -> HttpResponse:
    study = study_for_user(request.user, slug)
    form = DraftForm(request.POST)
    if not form.is_valid():
        return _page(request, study, status=400, form=form)
    try:
        services.panel_study_create(study=study, reward_cents=form.cleaned_data["reward_cents"],
                                    estimated_minutes=form.cleaned_data["estimated_minutes"],
                                    base_url=request.build_absolute_uri("/"))
    except (services.PanelRefused, ProlificError) as exc:
        return _page(request, study, status=_failure(exc), form=form, error=str(exc))
    return _page(request, study, notice="The draft study was created on Prolific. Check it there, then publish it.")


@login_required
@require_POST
def panel_action(request: HttpRequest, slug: str, action: str) -> HttpResponse:
    study = study_for_user(request.user, slug)
    panel = selectors.panel_study_of(study=study)
    if panel is None or action not in (*services.TRANSITIONS, "sync"):
        raise Http404("No such action")
    try:
        if action == "sync":
            summary = services.panel_submissions_sync(panel=panel)
            notice = f"{summary.submissions} submissions read, {summary.changed} changed."
        else:
            panel = services.panel_study_transition(panel=panel, action=action)
            notice = f"The study is now {panel.status} on Prolific."
    except (services.PanelRefused, ProlificError) as exc:
        return _page(request, study, status=_failure(exc), error=str(exc))
    return _page(request, study, notice=notice)


@login_required
def review_page(request: HttpRequest, slug: str) -> HttpResponse:
    """The list of who is approved or rejected and why; the POST acts on exactly that list."""
    study = study_for_user(request.user, slug)
    panel = selectors.panel_study_of(study=study)
    if panel is None:
        raise Http404("This study has no study on Prolific")
    context, status = {"study": study, "panel": panel}, 200
    if request.method == "POST":
        try:
            done = services.review_apply(panel=panel, confirmed_fingerprint=request.POST.get("plan", ""))
            context["notice"] = f"{done.approved} approved and {done.rejected} rejected on Prolific."
        except (services.PanelRefused, ProlificError) as exc:
            context["error"], status = str(exc), _failure(exc)
    plan = selectors.review_plan(panel=panel)
    context.update(plan=plan, approve=plan.of("approve"), reject=plan.of("reject"), leave=plan.of("leave"))
    return render(request, "prolific/review.html", context, status=status)
