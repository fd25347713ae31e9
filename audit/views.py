"""A study's audit trail: the page with filters and its CSV. Owners and staff only
(``Capability.MANAGE``); reading the trail is itself not recorded (it changes nothing)."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import render

from analysis.exporting.exports import csv_bytes
from surveys.permissions import Capability, require

from . import selectors
from .forms import AuditFilterForm

ROWS_PER_PAGE = 200


def _filtered(request: HttpRequest, slug: str):
    study = require(request.user, slug, Capability.MANAGE, request=request)
    form = AuditFilterForm(request.GET or None)
    valid = form.is_bound is False or form.is_valid()
    wanted = form.cleaned_data if form.is_bound and valid else {}
    events = selectors.audit_events_of(study_slug=study.slug, **{k: v for k, v in wanted.items() if v})
    return study, form, valid, events


@login_required
def audit_page(request: HttpRequest, slug: str) -> HttpResponse:
    study, form, valid, events = _filtered(request, slug)
    page = Paginator(events, ROWS_PER_PAGE).get_page(request.GET.get("page"))
    query = request.GET.copy()
    query.pop("page", None)
    return render(request, "audit/audit.html", {
        "study": study, "form": form, "page": page, "actions": selectors.audit_action_names(study_slug=study.slug),
        "query": query.urlencode(),
    }, status=200 if valid else 400)


@login_required
def audit_csv(request: HttpRequest, slug: str) -> HttpResponse:
    study, form, valid, events = _filtered(request, slug)
    if not valid:
        return render(request, "audit/audit.html", {"study": study, "form": form, "page": None, "actions": []},
                      status=400)
    response = StreamingHttpResponse(csv_bytes(selectors.audit_csv_rows(events)), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{study.slug}-audit.csv"'
    return response
