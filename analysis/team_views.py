"""The study's team page: who is on it with which role; the owner invites existing accounts,
changes roles and removes people (surveys.team). Owners and staff only."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render

from surveys import team
from surveys.models import Study
from surveys.permissions import Capability, require


def _page(request: HttpRequest, study: Study, *, status: int = 200, **extra) -> HttpResponse:
    return render(request, "researcher/team.html", {
        "study": study, "rows": team.team_of(study=study), "roles": team.ROLES, **extra,
    }, status=status)


@login_required
def team_page(request: HttpRequest, slug: str) -> HttpResponse:
    study = require(request.user, slug, Capability.MANAGE, request=request)
    if request.method != "POST":
        return _page(request, study)
    username, role = request.POST.get("username", ""), request.POST.get("role", "")
    try:
        if request.POST.get("remove") == "1":
            team.team_remove(study=study, actor=request.user, username=username, request=request)
        else:
            team.team_role_set(study=study, actor=request.user, username=username, role=role, request=request)
    except team.TeamRefused as exc:
        return _page(request, study, status=400, error=str(exc), username=username[:150])
    return redirect("researcher:team", slug=study.slug)
