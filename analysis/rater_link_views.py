"""Researcher pages for invited raters' personal links (surveys.rater_links).

The study's owners and rater coordinators (and staff) list the links with each rater's progress, create
links for new names (their URLs are shown on the answer to that request only:
only a hash of each token is stored) and revoke links. Anyone outside the team gets 404, other roles 403.
"""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from surveys import rater_links
from surveys.permissions import Capability, require
from web.signals import announce_action
from surveys.models import Study


def _page(request: HttpRequest, study: Study, *, status: int = 200, **extra) -> HttpResponse:
    return render(request, "researcher/raters.html", {
        "study": study, "rows": rater_links.rater_rows(study=study),
        "invited": study.recruitment_mode == Study.RecruitmentMode.INVITED, **extra,
    }, status=status)


@login_required
def rater_links_page(request: HttpRequest, slug: str) -> HttpResponse:
    study = require(request.user, slug, Capability.RATERS, request=request)
    if request.method != "POST":
        return _page(request, study)
    names_text = request.POST.get("names", "")
    try:
        created = rater_links.rater_links_create(
            study=study, names=rater_links.names_parse(names_text), created_by=request.user)
    except rater_links.RaterLinksRefused as exc:
        return _page(request, study, status=400, error=str(exc), names_text=names_text)
    for new in created:
        announce_action(actor=request.user, study=study, action="rater_link.create", object=new.link.name,
                        detail=f"link {new.link.pk}", request=request)
    base_url = request.build_absolute_uri("/")
    return _page(request, study, new_links=[(new.link.name, new.url(base_url)) for new in created])


@login_required
@require_POST
def rater_link_revoke(request: HttpRequest, slug: str, link_id: int) -> HttpResponse:
    study = require(request.user, slug, Capability.RATERS, request=request)
    if not rater_links.rater_link_revoke(study=study, link_id=link_id):
        raise Http404("No such link")
    announce_action(actor=request.user, study=study, action="rater_link.revoke", object=f"link {link_id}",
                    request=request)
    return redirect("researcher:raters", slug=study.slug)
