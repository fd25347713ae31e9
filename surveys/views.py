"""Participant pages. Thin: find where the participant is, validate, call one service.

The panel identifiers arrive once, in the entry link's query string; they go
into the session and the browser is redirected at once to a clean URL, so the
identifier never sits in the address bar, the history, a Referer or a log.
Every later request identifies the participant by the session only. Each step
has its own URL; asking for any other step than the current one redirects there.
The same holds for the other recruitment modes: an open link's participant is
drawn by the server and remembered by a cookie (``open_links``), an invited
rater's token is in their link (``rater_links``). Places are held while people
are in progress (``places``).
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from functools import wraps

from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect, JsonResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.utils.functional import Promise
from django.utils.translation import gettext_lazy
from django.views.decorators.http import require_POST

from web import clock

from . import drafts, limits, open_links, places, rater_links, recruitment, selectors, services, withdrawal
from .conversation import transcript_of
from .language import in_study_language, study_language_confirm
from .forms import TAMPER_MESSAGE, DemographicsForm, PageForm
from .models import Participant, Study
from .selectors import ParticipantState, Step

# Before anyone has answered a block, the estimate needs a pace: the TIDE consent
# announces about 30 minutes for 24 blocks.
TYPICAL_SECONDS_PER_BLOCK = 75
# A participant not seen for this long is greeted with "welcome back".
BREAK_MINUTES = 10

STEP_URL_NAMES = {
    Step.CONSENT: "surveys:consent",
    Step.INSTRUCTIONS: "surveys:instructions",
    Step.PAGE: "surveys:page",
    Step.DEMOGRAPHICS: "surveys:demographics",
    Step.DONE: "surveys:done",
    Step.EXITED: "surveys:left",
}


def home(request: HttpRequest) -> HttpResponse:
    return render(request, "home.html")


# --- session and step helpers ---------------------------------------------------------


def _session_key(slug: str) -> str:
    return f"survey:{slug}"


@dataclass
class Flow:
    study: Study
    participant: Participant | None
    state: ParticipantState | None

    @property
    def step(self) -> Step:
        return self.state.step if self.state else Step.CONSENT


class Elsewhere(Exception):
    """The participant is not at the step a view serves. ``response`` is what they get instead: the
    redirect to their current step, or the page saying why this session has no participant."""

    def __init__(self, response: HttpResponse):
        super().__init__(response)
        self.response = response


def participant_view(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """A participant view that finds the participant with ``_load_flow``, ``_flow_at`` or ``_draft_flow``:
    when they raise ``Elsewhere``, its response is the view's answer. Innermost, so that the other
    decorators (no caching, the study's language) treat it like any response of the view."""

    @wraps(view)
    def wrapped(request: HttpRequest, slug: str, *args, **kwargs) -> HttpResponse:
        try:
            return view(request, slug, *args, **kwargs)
        except Elsewhere as elsewhere:
            return elsewhere.response

    return wrapped


def _see_other(url: str) -> HttpResponse:
    response = HttpResponseRedirect(url)
    response.status_code = 303
    return response


def _go(slug: str, step: Step) -> HttpResponse:
    return _see_other(reverse(STEP_URL_NAMES[step], args=[slug]))


def _notice(slug: str, kind: str) -> HttpResponse:
    return _see_other(reverse("surveys:notice", args=[slug, kind]))


def _study_or_404(slug: str) -> Study:
    study = selectors.study_get(slug=slug)
    if study is None:
        raise Http404("No such study")
    study_language_confirm(study)
    return study


def _load_flow(request: HttpRequest, slug: str) -> Flow:
    """The participant behind this session; raises ``Elsewhere`` with the page explaining why there is none."""
    entry = request.session.get(_session_key(slug))
    if not entry:
        raise Elsewhere(render(request, "surveys/session_expired.html", {"slug": slug}, status=200))
    if entry.get("rater_link_id") and not rater_links.rater_link_is_active(link_id=entry["rater_link_id"]):
        # The researchers revoked the link this session came in by.
        request.session.pop(_session_key(slug), None)
        raise Elsewhere(_rater_link_refused(request, _study_or_404(slug), revoked=True))
    participant_id = entry.get("participant_id")
    if participant_id is None:
        study = _study_or_404(slug)
        return Flow(study=study, participant=None, state=None)
    state = selectors.participant_flow_get(participant_id=participant_id, slug=slug)
    if state is None:
        # The participant was removed (e.g. a preview reset by a reload of the study).
        request.session.pop(_session_key(slug), None)
        raise Elsewhere(render(request, "surveys/session_expired.html", {"slug": slug}, status=200))
    study_language_confirm(state.participant.study)
    return Flow(study=state.participant.study, participant=state.participant, state=state)


def _flow_at(request: HttpRequest, slug: str, step: Step) -> Flow:
    """The flow when ``step`` is the current one; otherwise raises ``Elsewhere`` with a redirect to the
    current one (or to the "time ran out" page when the participant's hold lapsed and the study is full)."""
    flow = _load_flow(request, slug)
    if flow.participant and places.hold_needs_renewal(flow.participant):
        if not places.hold_renew(participant=flow.participant):
            raise Elsewhere(_notice(slug, "time-up"))
    if flow.step != step:
        raise Elsewhere(_go(slug, flow.step))
    return flow


def _page_context(flow: Flow, **extra) -> dict:
    return {"study": flow.study, "participant": flow.participant, "progress": flow.state and flow.state.progress, **extra}


@dataclass(frozen=True)
class TimeLeft:
    """What the progress bar says about the time still needed (shown on block and check pages)."""

    blocks_done: int
    minutes: int
    own_pace: bool  # True: from this participant's median; False: a typical pace


def _time_left(flow: Flow) -> TimeLeft:
    """Remaining blocks x the participant's median seconds per block (a typical pace before any)."""
    blocks_done = sum(1 for v in flow.state.visits if v.is_block and v.submitted)
    remaining = flow.state.progress.block_total - blocks_done
    own = [v.seconds for v in flow.state.visits if v.is_block and v.seconds is not None]
    pace = statistics.median(own) if own else TYPICAL_SECONDS_PER_BLOCK
    return TimeLeft(blocks_done=blocks_done, minutes=math.ceil(remaining * pace / 60), own_pace=bool(own))


def _welcome_back(request: HttpRequest, flow: Flow) -> bool:
    """True once after a re-entry through the study link, or after a break."""
    key = _session_key(flow.study.slug)
    entry = request.session.get(key, {})
    if entry.get("welcome_back"):
        request.session[key] = {**entry, "welcome_back": False}
        return True
    last_seen = flow.participant.last_seen_at
    return last_seen is not None and clock.now() - last_seen > timedelta(minutes=BREAK_MINUTES)


# --- entry ---------------------------------------------------------------------------


@never_cache
@in_study_language
@participant_view
def entry(request: HttpRequest, slug: str) -> HttpResponse:
    study = _study_or_404(slug)
    if study.recruitment_mode == Study.RecruitmentMode.OPEN:
        return _open_entry(request, study)
    if study.recruitment_mode == Study.RecruitmentMode.INVITED:
        return _invited_entry(request, study)
    external_id = request.GET.get(study.id_param)
    if external_id is None and _session_key(slug) in request.session:
        return _resume(request, slug)
    if not recruitment.external_id_valid(study.id_pattern, external_id):
        return render(request, "surveys/bad_link.html", {"study": study}, status=400)
    participant = selectors.participant_find(study=study, external_id=external_id)
    if participant is None:
        refusal = _refuse_newcomer(request, study)
        if refusal:
            return refusal
    return _begin(
        request, study, external_id=external_id, participant=participant,
        panel_study_id=_panel_value(request, study.study_param), panel_session_id=_panel_value(request, study.session_param),
    )


def _resume(request: HttpRequest, slug: str) -> HttpResponse:
    return _go(slug, _load_flow(request, slug).step)


def _begin(request: HttpRequest, study: Study, *, external_id: str, participant: Participant | None,
           panel_study_id: str = "", panel_session_id: str = "", rater_link_id: int | None = None) -> HttpResponse:
    """Keep who this is in the session, and go to their current step."""
    if participant is None and withdrawal.withdrawn(study=study, external_id=external_id):
        # They withdrew (surveys.withdrawal): their answers are gone and they do not take part again.
        return _see_other(reverse("surveys:withdrawn", args=[study.slug]))
    entry = {
        "external_id": external_id,
        "panel_study_id": panel_study_id,
        "panel_session_id": panel_session_id,
        "preview": False,
        "participant_id": participant.pk if participant else None,
        "rater_link_id": rater_link_id,
    }
    step = Step.CONSENT if participant is None else selectors.participant_state(participant=participant).step
    # Someone who had already started is coming back (another tab, browser or day).
    entry["welcome_back"] = step == Step.PAGE
    request.session[_session_key(study.slug)] = entry
    return _go(study.slug, step)


def _open_entry(request: HttpRequest, study: Study) -> HttpResponse:
    """An open link: this browser's participant, or a new anonymous one (surveys.open_links)."""
    if _session_key(study.slug) in request.session:
        return _resume(request, study.slug)
    external_id = open_links.returning_id(request, study)
    participant = selectors.participant_find(study=study, external_id=external_id) if external_id else None
    if participant is None:
        refusal = _refuse_newcomer(request, study)
        if refusal:
            return refusal
        if external_id is None:
            external_id = open_links.new_participant_id(request, study)
            if external_id is None:
                return render(request, "surveys/too_many_starts.html", {"study": study}, status=429)
    response = _begin(request, study, external_id=external_id, participant=participant)
    return open_links.remember(response, study, external_id)


def _invited_entry(request: HttpRequest, study: Study) -> HttpResponse:
    """An invited rater's personal link (surveys.rater_links); nobody else comes in."""
    token = request.GET.get(rater_links.TOKEN_PARAM)
    if token is None:
        if _session_key(study.slug) in request.session:
            return _resume(request, study.slug)
        return render(request, "surveys/invitation_only.html", {"study": study}, status=403)
    link = rater_links.rater_link_find(study=study, token=token)
    if link is None or link.revoked_at is not None:
        return _rater_link_refused(request, study, revoked=link is not None)
    participant = selectors.participant_find(study=study, external_id=link.external_id)
    if participant is None:
        refusal = _refuse_newcomer(request, study)
        if refusal:
            return refusal
    return _begin(request, study, external_id=link.external_id, participant=participant, rater_link_id=link.pk)


def _rater_link_refused(request: HttpRequest, study: Study, *, revoked: bool) -> HttpResponse:
    return render(request, "surveys/rater_link_refused.html", {"study": study, "revoked": revoked},
                  status=410 if revoked else 404)


_CONTROL_CHARACTERS = re.compile(r"[\x00-\x1f\x7f]")


def _panel_value(request: HttpRequest, name: str) -> str:
    # Informational only, so cleaned rather than refused; PostgreSQL cannot store NUL.
    return _CONTROL_CHARACTERS.sub("", request.GET.get(name, ""))[: limits.PANEL_VALUE]


def _closed_notice(study: Study) -> HttpResponse:
    # A draft is closed too, but its participants are told it opens later, not that it ended.
    return _notice(study.slug, "not-yet" if study.is_draft else "closed")


def _refuse_newcomer(request: HttpRequest, study: Study) -> HttpResponse | None:
    if not study.is_open:
        return _closed_notice(study)
    if services.study_full(study=study):
        services.turn_away_record(study=study)
        return _notice(study.slug, "full")
    return None


# --- consent and instructions ------------------------------------------------------------


@never_cache
@in_study_language
@participant_view
def consent(request: HttpRequest, slug: str) -> HttpResponse:
    flow = _flow_at(request, slug, Step.CONSENT)
    if request.method == "POST":
        decision = request.POST.get("decision")
        if decision == "decline":
            services.consent_decline_record(study=flow.study)
            request.session.pop(_session_key(slug), None)
            return _notice(slug, "declined")
        if decision == "accept":
            return _accept_consent(request, flow.study)
        return render(request, "surveys/consent.html", _page_context(flow, error=True), status=400)
    return render(request, "surveys/consent.html", _page_context(flow))


def _accept_consent(request: HttpRequest, study: Study) -> HttpResponse:
    key = _session_key(study.slug)
    entry = request.session[key]
    try:
        participant = services.participant_enroll(
            study=study,
            external_id=entry["external_id"],
            panel_study_id=entry.get("panel_study_id", ""),
            panel_session_id=entry.get("panel_session_id", ""),
            is_preview=entry.get("preview", False),
        )
    except services.StudyFull:
        services.turn_away_record(study=study)
        request.session.pop(key, None)
        return _notice(study.slug, "full")
    except services.StudyClosed:
        request.session.pop(key, None)
        study.refresh_from_db(fields=["launched_at", "is_open"])
        return _closed_notice(study)
    request.session[key] = {**entry, "participant_id": participant.pk}
    return _go(study.slug, selectors.participant_state(participant=participant).step)


@never_cache
@in_study_language
@participant_view
def instructions(request: HttpRequest, slug: str) -> HttpResponse:
    flow = _flow_at(request, slug, Step.INSTRUCTIONS)
    if request.method == "POST":
        services.participant_instructions_confirm(participant_id=flow.participant.pk)
        return _go(slug, Step.PAGE if flow.state.current_visit_id else Step.DEMOGRAPHICS)
    return render(request, "surveys/instructions.html", _page_context(flow))


# --- blocks and attention checks --------------------------------------------------------


@never_cache
@in_study_language
@participant_view
def page(request: HttpRequest, slug: str) -> HttpResponse:
    flow = _flow_at(request, slug, Step.PAGE)
    visit_id = flow.state.current_visit_id
    if request.method == "POST":
        return _submit_page(request, flow, visit_id)
    if not flow.state.current.shown:
        services.visit_mark_shown(visit_id=visit_id)
    welcome = _welcome_back(request, flow)
    draft = flow.state.draft  # read with the state
    form = _page_form(flow, visit_id, data=None, initial=draft)
    return _render_page(request, flow, form, welcome_back=welcome, draft_restored=bool(draft))


def _page_form(flow: Flow, visit_id: int, data, initial: dict[str, str] | None = None) -> PageForm:
    # Read once per request: the form validates against it and the service saves with it.
    visit_page = selectors.visit_page_get(visit_id=visit_id, study=flow.study, is_block=flow.state.current.is_block)
    return PageForm(data, page=visit_page, initial=initial)


def _render_page(
    request: HttpRequest,
    flow: Flow,
    form: PageForm,
    status: int = 200,
    welcome_back: bool = False,
    draft_restored: bool = False,
) -> HttpResponse:
    template = "surveys/check.html" if form.page.is_check else "surveys/block.html"
    context = _page_context(
        flow,
        form=form,
        visit=form.page.visit,
        transcript=None if form.page.is_check else transcript_of(form.page.visit.block.scenario.context),
        time_left=_time_left(flow),
        welcome_back=welcome_back,
        draft_restored=draft_restored,
    )
    return render(request, template, context, status=status)


def _submit_page(request: HttpRequest, flow: Flow, visit_id: int) -> HttpResponse:
    posted = request.POST.get("visit", "")
    if posted != str(visit_id):
        if posted in {str(v.id) for v in flow.state.visits if v.submitted}:
            return _go(flow.study.slug, Step.PAGE)  # a double submit or the back button: move on
        return _conflict(request, flow)
    form = _page_form(flow, visit_id, data=request.POST)
    if not form.is_valid():
        return _render_page(request, flow, form, status=400)
    try:
        outcome = services.block_answer_submit(
            participant_id=flow.participant.pk, visit_id=visit_id, answers=form.page_answers(), page=form.page
        )
    except services.AnswersRejected:
        form.add_error(None, TAMPER_MESSAGE)
        return _render_page(request, flow, form, status=400)
    if outcome == services.SubmitOutcome.NOT_CURRENT:
        return _conflict(request, flow)
    is_last = visit_id == flow.state.visits[-1].id
    return _go(flow.study.slug, Step.DEMOGRAPHICS if is_last else Step.PAGE)


def _conflict(request: HttpRequest, flow: Flow) -> HttpResponse:
    return render(request, "surveys/conflict.html", _page_context(flow), status=409)


# --- the end -------------------------------------------------------------------------------


@never_cache
@in_study_language
@participant_view
def demographics(request: HttpRequest, slug: str) -> HttpResponse:
    flow = _flow_at(request, slug, Step.DEMOGRAPHICS)
    if request.method == "POST":
        form = _demographics_form(flow, data=request.POST)
        if form.is_valid():
            try:
                services.participant_demographics_submit(
                    participant_id=flow.participant.pk, answers=form.answers(), free_text=form.free_text()
                )
                # The code is written and committed before any page can show it.
                services.participant_complete(participant_id=flow.participant.pk)
            except services.RequiredAnswersMissing as missing:
                form.add_required_errors(missing.question_keys)
            else:
                return _go(slug, Step.DONE)
        return render(request, "surveys/demographics.html", _page_context(flow, form=form), status=400)
    draft = selectors.draft_fields(participant_id=flow.participant.pk, visit_id=None)
    form = _demographics_form(flow, data=None, initial=draft)
    return render(request, "surveys/demographics.html", _page_context(flow, form=form, draft_restored=bool(draft)))


def _demographics_form(flow: Flow, data, initial: dict[str, str] | None = None) -> DemographicsForm:
    return DemographicsForm(
        data,
        questions=selectors.demographic_questions(study=flow.study),
        end_questions=selectors.end_of_study_questions(study=flow.study),
        initial=initial,
    )


@never_cache
@in_study_language
@participant_view
def done(request: HttpRequest, slug: str) -> HttpResponse:
    flow = _flow_at(request, slug, Step.DONE)
    code = flow.participant.completion_code
    return_url = recruitment.completion_url_for(flow.study.completion_url, code)
    send_back = _send_back_once(request, flow, return_url)
    return render(request, "surveys/done.html", _page_context(flow, code=code, return_url=return_url, send_back=send_back))


def _send_back_once(request: HttpRequest, flow: Flow, return_url: str) -> bool:
    """True the first time a finisher sees the page: it then takes them straight to the panel (as
    Prolific expects), the button being the fallback. Seen again (the back button, a reload), the
    page stays so that the code can be read. Never for a researcher's preview."""
    if not return_url or flow.participant.is_preview:
        return False
    key = _session_key(flow.study.slug)
    entry = request.session.get(key, {})
    if entry.get("sent_back"):
        return False
    request.session[key] = {**entry, "sent_back": True}
    return True


@never_cache
@in_study_language
@participant_view
def exit_study(request: HttpRequest, slug: str) -> HttpResponse:
    flow = _load_flow(request, slug)
    if flow.step in (Step.DONE, Step.EXITED):
        return _go(slug, flow.step)
    if request.method == "POST":
        if flow.participant is None:
            request.session.pop(_session_key(slug), None)
        else:
            services.participant_exit(participant_id=flow.participant.pk)
        return _go(slug, Step.EXITED)
    return render(request, "surveys/exit.html", _page_context(flow))


# --- drafts: what is entered on a page, kept until it is submitted ----------------------------
# The page's script posts its whole form as answers change; see surveys.drafts. Answers are JSON
# (or 204) for that script; the pages themselves never depend on it.

DRAFT_NO_SESSION = gettext_lazy("Your session has ended; open the study link again to continue.")
DRAFT_NOT_CURRENT = gettext_lazy("This page is no longer your current page; reload it to continue.")
_VISIT_ID = re.compile(r"[0-9]{1,18}")


@never_cache
@require_POST
@in_study_language
@participant_view
def page_draft(request: HttpRequest, slug: str) -> HttpResponse:
    flow = _draft_flow(request, slug, Step.PAGE)
    posted = request.POST.get("visit", "")
    if not _VISIT_ID.fullmatch(posted):
        return _draft_refused(400, gettext_lazy("The draft does not say which page it belongs to (visit)."))
    visit_id = flow.state.current_visit_id
    if int(posted) != visit_id:
        return _draft_refused(409, DRAFT_NOT_CURRENT)
    return _draft_keep(request, flow, visit_id, _page_form(flow, visit_id, data=None))


@never_cache
@require_POST
@in_study_language
@participant_view
def demographics_draft(request: HttpRequest, slug: str) -> HttpResponse:
    flow = _draft_flow(request, slug, Step.DEMOGRAPHICS)
    return _draft_keep(request, flow, None, _demographics_form(flow, data=None))


def _draft_flow(request: HttpRequest, slug: str, step: Step) -> Flow:
    """The flow when ``step`` is the participant's current one; otherwise raises ``Elsewhere`` with the
    refusal to send (the page's script reads JSON, not the pages ``_load_flow`` would show)."""
    try:
        flow = _load_flow(request, slug)
    except Elsewhere:  # the session has ended
        raise Elsewhere(_draft_refused(403, DRAFT_NO_SESSION)) from None
    if flow.step != step:
        raise Elsewhere(_draft_refused(409, DRAFT_NOT_CURRENT))
    return flow


def _draft_keep(
    request: HttpRequest, flow: Flow, visit_id: int | None, form: PageForm | DemographicsForm
) -> HttpResponse:
    try:
        fields = drafts.draft_fields_clean(form=form, posted=request.POST)
    except drafts.DraftRejected as error:
        return _draft_refused(400, str(error))
    if not drafts.draft_save(participant_id=flow.participant.pk, visit_id=visit_id, fields=fields):
        return _draft_refused(409, DRAFT_NOT_CURRENT)  # submitted meanwhile, in another tab
    return HttpResponse(status=204)


def _draft_refused(status: int, message: str | Promise) -> JsonResponse:
    return JsonResponse({"error": message}, status=status)


NOTICES = {
    "declined": "surveys/notice_declined.html",
    "full": "surveys/notice_full.html",
    "closed": "surveys/notice_closed.html",
    "not-yet": "surveys/notice_not_open_yet.html",
    "time-up": "surveys/notice_time_up.html",
}


@never_cache
@in_study_language
def notice(request: HttpRequest, slug: str, kind: str) -> HttpResponse:
    if kind not in NOTICES:
        raise Http404("No such page")
    study = _study_or_404(slug)
    return render(request, NOTICES[kind], {"study": study})


@never_cache
@in_study_language
def left(request: HttpRequest, slug: str) -> HttpResponse:
    study = _study_or_404(slug)
    # Someone who left early may still withdraw: their session still names them.
    can_withdraw = bool(request.session.get(_session_key(slug), {}).get("participant_id"))
    return render(request, "surveys/notice_left.html", {"study": study, "can_withdraw": can_withdraw})
