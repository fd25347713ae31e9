"""The judges page of a study: its judges, their runs' progress and cost, and starting a run."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.db import transaction
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from judges import selectors, services
from judges.forms import JudgeRunForm
from judges.models import Judge
from judges.tasks import judge_run
from surveys.permissions import Capability, require


def _page(request: HttpRequest, study, form: JudgeRunForm, *, status: int = 200, problem: str = "") -> HttpResponse:
    return render(request, "judges/page.html", {
        "study": study, "form": form, "problem": problem,
        "judges": selectors.judges_table(study).to_dict("records"),
        "runs": selectors.judge_runs_progress(study=study),
    }, status=status)


@login_required
def judges_page(request: HttpRequest, slug: str) -> HttpResponse:
    study = require(request.user, slug, Capability.VIEW, request=request)
    services.judges_declared_register(study=study)
    return _page(request, study, JudgeRunForm())


@login_required
@require_POST
def judge_run_start(request: HttpRequest, slug: str) -> HttpResponse:
    study = require(request.user, slug, Capability.MANAGE, request=request)
    form = JudgeRunForm(request.POST)
    if not form.is_valid():
        return _page(request, study, form, status=400)
    data = form.cleaned_data
    existing = Judge.objects.filter(study=study, name=data["judge"]).first()
    if existing is not None and existing.kind != Judge.Kind.LLM:
        return _page(request, study, form, status=400,
                     problem=f'"{existing.name}" is a judge of kind {existing.kind}; only LLM judges are run')
    judge = existing or services.judge_register(study=study, name=data["judge"], kind=Judge.Kind.LLM,
                                                model=data["model"])
    run = services.judge_run_create(judge=judge, requests_per_minute=data["requests_per_minute"],
                                    cost_cap=data["cost_cap"], both_orders=data["both_orders"])
    transaction.on_commit(lambda: judge_run.delay(run.pk))
    return redirect("judges:page", slug=study.slug)
