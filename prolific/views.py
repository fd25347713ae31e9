"""Researcher pages of the Prolific round trip: create the draft, publish, pause, sync, review, bonuses.

Owners (and staff) only: 404 outside the team, 403 for other roles; every action is a POST with CSRF.
A refusal of ours answers 400 and one from Prolific 502, each with the page and its
message; neither changes anything here.
"""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_POST

from surveys.models import Study
from surveys.permissions import Capability, require
from web.signals import announce_action

from . import selectors, services
from .client import ProlificError
from .forms import BonusFileForm, DraftForm
from .models import PanelStudy


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
    return _page(request, require(request.user, slug, Capability.PAY, request=request))


@login_required
@require_POST
def panel_create(request: HttpRequest, slug: str) -> HttpResponse:
    study = require(request.user, slug, Capability.PAY, request=request)
    form = DraftForm(request.POST)
    if not form.is_valid():
        return _page(request, study, status=400, form=form)
    try:
        services.panel_study_create(study=study, reward_cents=form.cleaned_data["reward_cents"],
                                    estimated_minutes=form.cleaned_data["estimated_minutes"],
                                    base_url=request.build_absolute_uri("/"))
    except (services.PanelRefused, ProlificError) as exc:
        return _page(request, study, status=_failure(exc), form=form, error=str(exc))
    announce_action(actor=request.user, study=study, action="prolific.create",
                    detail=f"reward {form.cleaned_data['reward_cents']} cents", request=request)
    return _page(request, study, notice="The draft study was created on Prolific. Check it there, then publish it.")


@login_required
@require_POST
def panel_action(request: HttpRequest, slug: str, action: str) -> HttpResponse:
    study = require(request.user, slug, Capability.PAY, request=request)
    panel = selectors.panel_study_of(study=study)
    if panel is None or action not in (*services.TRANSITIONS, "sync"):
        raise Http404("No such action")
    try:
        if action == "sync":
            summary = services.panel_submissions_sync(panel=panel)
            notice = f"{summary.submissions} submissions read, {summary.changed} changed."
        else:
            panel = services.panel_study_transition(panel=panel, action=action)
            announce_action(actor=request.user, study=study, action=f"prolific.{action}", object=panel.prolific_id,
                            detail=f"now {panel.status}", request=request)
            notice = f"The study is now {panel.status} on Prolific."
    except (services.PanelRefused, ProlificError) as exc:
        return _page(request, study, status=_failure(exc), error=str(exc))
    return _page(request, study, notice=notice)


@login_required
def review_page(request: HttpRequest, slug: str) -> HttpResponse:
    """The list of who is approved or rejected and why; the POST acts on exactly that list."""
    study = require(request.user, slug, Capability.PAY, request=request)
    panel = selectors.panel_study_of(study=study)
    if panel is None:
        raise Http404("This study has no study on Prolific")
    context, status = {"study": study, "panel": panel}, 200
    if request.method == "POST":
        try:
            done = services.review_apply(panel=panel, confirmed_fingerprint=request.POST.get("plan", ""))
            context["notice"] = f"{done.approved} approved and {done.rejected} rejected on Prolific."
            announce_action(actor=request.user, study=study, action="prolific.approve", object=panel.prolific_id,
                            detail=f"{done.approved} submissions approved", request=request)
            announce_action(actor=request.user, study=study, action="prolific.reject", object=panel.prolific_id,
                            detail=f"{done.rejected} submissions rejected", request=request)
        except (services.PanelRefused, ProlificError) as exc:
            context["error"], status = str(exc), _failure(exc)
    plan = selectors.review_plan(panel=panel)
    context.update(plan=plan, approve=plan.of("approve"), reject=plan.of("reject"), leave=plan.of("leave"))
    return render(request, "prolific/review.html", context, status=status)


@login_required
def bonuses_page(request: HttpRequest, slug: str) -> HttpResponse:
    """Bonuses in two steps: a file is checked and shown against the ledger, then the confirmed lines are paid.

    The confirmation form carries the lines as shown (``line``) and, for each participant
    who already has a bonus in this study, an unticked box (``pay_again``): only a ticked
    box pays that person again (``services.bonuses_pay`` refuses otherwise).
    """
    study = require(request.user, slug, Capability.PAY, request=request)
    panel = selectors.panel_study_of(study=study)
    if panel is None:
        raise Http404("This study has no study on Prolific")
    context, status, form = {"study": study, "panel": panel}, 200, BonusFileForm()
    if request.method == "POST" and "line" in request.POST:
        lines = "\n".join(request.POST.getlist("line")).encode()
        try:
            payment = services.bonuses_pay(panel=panel, data=lines, pay_again=set(request.POST.getlist("pay_again")))
            announce_action(actor=request.user, study=study, action="prolific.bonus", object=panel.prolific_id,
                            detail=f"{payment.participants} bonuses, {payment.total_amount} in all "
                                   f"(Prolific payment {payment.prolific_id})", request=request)
            context["notice"] = (f"{payment.participants} bonuses paid on Prolific, {payment.total_amount} in all "
                                 f"(Prolific id {payment.prolific_id}).")
        except (services.PanelRefused, ProlificError) as exc:
            context["error"], status = str(exc), _failure(exc)
            context["plan"] = _plan_or_none(panel, lines)
    elif request.method == "POST":
        form = BonusFileForm(request.POST, request.FILES)
        if not form.is_valid():
            status = 400
        else:
            try:
                context["plan"] = selectors.bonus_plan(panel=panel, data=form.cleaned_data["file"].read())
            except services.PanelRefused as exc:
                context["error"], status = str(exc), 400
    context.update(form=form, ledger=selectors.bonus_ledger(panel=panel))
    return render(request, "prolific/bonuses.html", context, status=status)


def _plan_or_none(panel: PanelStudy, lines: bytes) -> selectors.BonusPlan | None:
    """The confirmation shown again after a refusal, as the ledger now stands (None for lines that no longer parse)."""
    try:
        return selectors.bonus_plan(panel=panel, data=lines)
    except services.PanelRefused:
        return None
