"""The researchers' "Preview and launch" page of a study: its state (draft, open, closed), the sequence a new
participant would get (``surveys.preview``), a click-through of it that records nothing, the Launch button, and
once launched, Close and Reopen.

Owners (and staff) only: 404 outside the team, 403 for other roles.
"""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render

from surveys import launch, preview
from surveys.permissions import Capability, require

#: The page lists at most this many pages of the sequence (a study showing everyone 2,000 blocks has 2,000).
PAGES_SHOWN = 200


@login_required
def launch_page(request: HttpRequest, slug: str) -> HttpResponse:
    study = require(request.user, slug, Capability.MANAGE, request=request)
    if request.method == "POST":
        action = request.POST.get("action", "launch")
        if action in {"close", "reopen"}:
            launch.study_open_set(study=study, open_=action == "reopen", actor=request.user, request=request)
        else:
            launch.study_launch(study=study, actor=request.user, request=request)
        return redirect("researcher:launch", slug=study.slug)
    seed = preview.preview_seed_from(request.GET.get("seed", ""))
    rows = preview.allocation_rows(study=study, plan=preview.allocation_preview(study=study, seed=seed))
    return render(request, "researcher/launch.html", {
        "study": study, "seed": seed, "rows": rows[:PAGES_SHOWN], "n_pages": len(rows),
        "n_blocks": sum(1 for row in rows if row.block), "cut": len(rows) > PAGES_SHOWN,
    })
