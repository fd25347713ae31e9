"""The participant's "Withdraw and delete my answers" pages (surveys.withdrawal).

Only the session says who withdraws (never a posted id), the POST carries Django's CSRF token, and a
session that has withdrawn is sent to the "deleted" page again: a replayed or repeated POST changes nothing.
"""

from __future__ import annotations

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.cache import never_cache

from . import selectors, withdrawal
from .language import in_study_language
from .views import _go, _load_flow, _page_context, _see_other, _session_key, participant_view


def _withdrawn_key(slug: str) -> str:
    return f"withdrawn:{slug}"


def _withdrawn_page(slug: str) -> HttpResponse:
    return _see_other(reverse("surveys:withdrawn", args=[slug]))


@never_cache
@in_study_language
@participant_view
def withdraw(request: HttpRequest, slug: str) -> HttpResponse:
    if request.session.get(_withdrawn_key(slug)):
        return _withdrawn_page(slug)
    flow = _load_flow(request, slug)
    if flow.participant is None or flow.participant.is_preview:
        # Nothing of theirs is stored before consent (and a preview records nothing).
        return _go(slug, flow.step)
    if request.method == "POST":
        withdrawal.participant_withdraw(participant_id=flow.participant.pk, channel=withdrawal.Channel.PARTICIPANT,
                                        request=request)
        request.session.pop(_session_key(slug), None)
        request.session[_withdrawn_key(slug)] = True
        return _withdrawn_page(slug)
    return render(request, "surveys/withdraw.html", _page_context(flow))


@never_cache
@in_study_language
def withdrawn(request: HttpRequest, slug: str) -> HttpResponse:
    study = selectors.study_get(slug=slug)
    if study is None:
        raise Http404("No such study")
    return render(request, "surveys/withdrawn.html", {"study": study})
