"""Drafts (issue 16, item 4): answers entered on a page but not yet submitted survive a reload, a
return through the study link or another device; a draft never counts as an answer."""

from __future__ import annotations

from datetime import timedelta
from html.parser import HTMLParser

import pytest
from django import forms
from django.http import QueryDict
from django.test import Client

from analysis.frames import ratings_frame, visits_frame
from surveys import drafts, selectors, services
from surveys.models import BlockVisit, DemographicQuestion, Draft, ItemPlacement, Participant, Rating
from tests.support.researcher import finished_run
from tests.test_codebook import open_zip, read_csvs
from web import clock

PID = "a" * 24
OTHER_PID = "b" * 24


def _draft_url(study) -> str:
    return f"/s/{study.slug}/page/draft/"


class _Shown(HTMLParser):
    """What a rendered page shows as entered: checked radios, selected options, textarea texts."""

    def __init__(self, html: str):
        super().__init__(convert_charrefs=True)
        self.values: dict[str, str] = {}
        self._select: str | None = None
        self._textarea: str | None = None
        self._textareas: list[str] = []
        self.feed(html)
        self.close()

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "input" and a.get("type") == "radio" and "checked" in a:
            self.values[a["name"]] = a["value"]
        elif tag == "select":
            self._select = a["name"]
        elif tag == "option" and self._select and "selected" in a and a.get("value"):
            self.values[self._select] = a["value"]
        elif tag == "textarea":
            self._textarea = a["name"]
            self._textareas.append(a["name"])

    def handle_endtag(self, tag):
        if tag == "select":
            self._select = None
        elif tag == "textarea":
            self._textarea = None

    def handle_data(self, data):
        if self._textarea:
            self.values[self._textarea] = self.values.get(self._textarea, "") + data

    def close(self):
        super().close()
        # As browsers do (HTML: "textarea" start tag): one line break right after it is not content.
        for name in self._textareas:
            text = self.values.pop(name, "").removeprefix("\n")
            if text:
                self.values[name] = text


def _shown(response) -> dict[str, str]:
    return _Shown(response.content.decode()).values


def _partial_answers(spec) -> dict[str, str]:
    """Two of the five ratings and a complete ranking in reverse display order: a page left half done."""
    key = next(iter(spec.by_type.get("rating", {})))
    first, second = spec.placements[:2]
    ranks = {f"rank-{pid}": str(len(spec.placements) - i) for i, pid in enumerate(spec.placements)}
    return {f"rate-{first}-{key}": "2", f"rate-{second}-{key}": "5", **ranks}


def _start_with_draft(client, study, steps, external_id: str = PID):
    participant = steps.start(client, study, external_id)
    _, spec = steps.page(client, study)
    entered = _partial_answers(spec)
    response = client.post(_draft_url(study), {"visit": spec.visit_id, **entered})
    assert response.status_code == 204, response.content
    return participant, spec, entered


# --- keeping and restoring ----------------------------------------------------------------


def test_it_keeps_the_entered_answers_and_fills_the_page_in_again_on_reload(client, tide, steps):
    participant, spec, entered = _start_with_draft(client, tide, steps)
    draft = Draft.objects.get()
    assert (draft.participant_id, draft.visit_id, draft.fields) == (participant.pk, spec.visit_id, entered)
    response, again = steps.page(client, tide)
    assert again.visit_id == spec.visit_id
    assert _shown(response) == entered
    assert b"data-draft-restored" in response.content


def test_a_page_without_a_draft_shows_nothing_entered_and_no_note(client, tide, steps):
    steps.start(client, tide, PID)
    response, _ = steps.page(client, tide)
    assert _shown(response) == {}
    assert b"data-draft-restored" not in response.content


def test_another_device_finds_the_draft_after_the_study_link(client, tide, steps):
    _, spec, entered = _start_with_draft(client, tide, steps)
    phone = Client()
    response = phone.get(steps.link(tide, PID), follow=True)
    assert response.redirect_chain[-1][0] == "/s/tide/page/"
    assert _shown(response) == entered
    assert b"data-welcome-back" in response.content and b"data-draft-restored" in response.content


def test_an_untouched_ranking_stays_unranked_after_a_reload(client, tide, steps):
    steps.start(client, tide, PID)
    _, spec = steps.page(client, tide)
    ratings_only = {k: v for k, v in _partial_answers(spec).items() if k.startswith("rate-")}
    # With JavaScript an untouched ranking posts its selects empty, as without it.
    empty_ranks = {f"rank-{pid}": "" for pid in spec.placements}
    assert client.post(_draft_url(tide), {"visit": spec.visit_id, **ratings_only, **empty_ranks}).status_code == 204
    assert Draft.objects.get().fields == ratings_only
    shown = _shown(steps.page(client, tide)[0])
    assert shown == ratings_only and not any(name.startswith("rank-") for name in shown)


def test_the_restored_page_submits_as_shown_and_the_ranking_is_the_participants(client, tide, steps):
    _, spec, entered = _start_with_draft(client, tide, steps)
    shown = _shown(steps.page(client, tide)[0])
    key = next(iter(spec.by_type.get("rating", {})))
    rest = {f"rate-{pid}-{key}": "3" for pid in spec.placements[2:]}
    response = client.post("/s/tide/page/", {"visit": spec.visit_id, **shown, **rest})
    assert response.status_code == 303
    ranks = dict(ItemPlacement.objects.filter(visit_id=spec.visit_id).values_list("pk", "rank"))
    assert ranks == {pid: int(entered[f"rank-{pid}"]) for pid in spec.placements}
    ratings = dict(Rating.objects.filter(placement__visit_id=spec.visit_id).values_list("placement_id", "value"))
    assert ratings == {**{pid: 3 for pid in spec.placements[2:]}, spec.placements[0]: 2, spec.placements[1]: 5}
    # The restored ranks differ from the order shown: the export says the participant changed it.
    assert visits_frame(tide.pk).set_index("visit").loc[spec.visit_id, "rank_changed"]
    assert not Draft.objects.exists()


def test_best_worst_choices_and_a_text_come_back_as_written(client, reasons_per_block, steps):
    most_least = reasons_per_block
    steps.start(client, most_least, PID)
    _, spec = steps.page(client, most_least)
    text = "\n  Kind <b>and</b> warm,\nbut long.  "
    entered = {"most": str(spec.placements[3]), "least": str(spec.placements[0]), "text-why": text}
    assert client.post(_draft_url(most_least), {"visit": spec.visit_id, **entered}).status_code == 204
    response = steps.page(client, most_least)[0]
    # The leading line break, the spaces and the line break inside stay.
    assert _shown(response) == entered
    assert b"Kind &lt;b&gt;and&lt;/b&gt; warm" in response.content


def test_a_later_draft_replaces_the_earlier_one_and_an_emptied_page_leaves_none(client, tide, steps):
    _, spec, entered = _start_with_draft(client, tide, steps)
    one = dict(list(entered.items())[:1])
    assert client.post(_draft_url(tide), {"visit": spec.visit_id, **one}).status_code == 204
    assert list(Draft.objects.values_list("fields", flat=True)) == [one]
    assert client.post(_draft_url(tide), {"visit": spec.visit_id}).status_code == 204
    assert not Draft.objects.exists()


def test_an_attention_check_keeps_its_draft_too(client, tide, steps):
    participant = steps.start(client, tide, PID)
    first_check = participant.visits.filter(attention_check__isnull=False).order_by("sequence").first()
    for _ in range(first_check.sequence - 1):
        steps.submit_current(client, tide)
    _, spec = steps.page(client, tide)
    assert spec.kind == "check"
    assert client.post(_draft_url(tide), {"visit": spec.visit_id, "attention": "4"}).status_code == 204
    assert _shown(steps.page(client, tide)[0]) == {"attention": "4"}


# --- refusals: nothing is written --------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ("unknown_name", "'colour' is not a question on this page."),
        ("foreign_placement", "is not a question on this page."),
        ("unknown_dimension", "is not a question on this page."),
        ("attention_on_a_block", "'attention' is not a question on this page."),
        ("out_of_range", "Please rate Response 1 from 1 to 5."),
        ("not_a_number", "Please rate Response 1 from 1 to 5."),
        ("rank_out_of_range", "Please give Response 1 a rank from 1 to 5."),
        ("sent_twice", "was sent 2 times"),
        ("no_visit", "does not say which page"),
        ("visit_not_a_number", "does not say which page"),
        ("visit_unicode_digit", "does not say which page"),
    ],
)
def test_a_bad_draft_is_refused_with_a_reason_and_the_kept_one_stays(client, tide, steps, change, message):
    _, spec, entered = _start_with_draft(client, tide, steps)
    key = next(iter(spec.by_type.get("rating", {})))
    first = spec.placements[0]
    data = QueryDict(mutable=True)
    data.update({"visit": str(spec.visit_id)})
    bad = {
        "unknown_name": {"colour": "blue"},
        "foreign_placement": {f"rate-{first + 1000}-{key}": "3"},
        "unknown_dimension": {f"rate-{first}-nope": "3"},
        "attention_on_a_block": {"attention": "3"},
        "out_of_range": {f"rate-{first}-{key}": "9"},
        "not_a_number": {f"rate-{first}-{key}": "x"},
        "rank_out_of_range": {f"rank-{first}": "6"},
        "sent_twice": {},
        "no_visit": {},
        "visit_not_a_number": {"visit": "x"},
        "visit_unicode_digit": {"visit": "²"},
    }[change]
    for name, value in bad.items():
        data[name] = value
    if change == "sent_twice":
        data.setlist(f"rate-{first}-{key}", ["3", "4"])
    if change == "no_visit":
        del data["visit"]
    response = client.post(_draft_url(tide), data.urlencode(), content_type="application/x-www-form-urlencoded")
    assert response.status_code == 400
    assert message in response.json()["error"]
    assert list(Draft.objects.values_list("fields", flat=True)) == [entered]


@pytest.mark.parametrize(
    ("text", "message"),
    [("x" * 2001, "Please keep your answer to 2000 characters (it has 2001)."), ("a\x00b", "Null characters")],
)
def test_a_text_the_question_would_refuse_is_refused_as_a_draft(client, reasons_per_block, steps, text, message):
    most_least = reasons_per_block
    steps.start(client, most_least, PID)
    _, spec = steps.page(client, most_least)
    response = client.post(_draft_url(most_least), {"visit": spec.visit_id, "text-why": text})
    assert response.status_code == 400 and message in response.json()["error"]
    assert not Draft.objects.exists()


def test_a_draft_for_another_participants_page_is_refused(client, tide, steps):
    mine, my_spec, mine_entered = _start_with_draft(client, tide, steps)
    intruder = Client()
    steps.start(intruder, tide, OTHER_PID)
    response = intruder.post(_draft_url(tide), {"visit": my_spec.visit_id, **_partial_answers(my_spec)})
    assert response.status_code == 409
    assert "no longer your current page" in response.json()["error"]
    # Nor can the intruder slip the other page's answers into a draft of their own page.
    _, their_spec = steps.page(intruder, tide)
    response = intruder.post(_draft_url(tide), {"visit": their_spec.visit_id, **_partial_answers(my_spec)})
    assert response.status_code == 400
    assert list(Draft.objects.values_list("participant_id", "fields")) == [(mine.pk, mine_entered)]


def test_submitting_the_page_clears_its_draft_and_a_late_draft_is_refused(client, tide, steps):
    _, spec, entered = _start_with_draft(client, tide, steps)
    response, _ = steps.submit_current(client, tide)
    assert response.status_code == 303
    assert not Draft.objects.exists()
    # A draft sent just before Next, arriving after it: the page is no longer the current one.
    late = client.post(_draft_url(tide), {"visit": spec.visit_id, **entered})
    assert late.status_code == 409 and not Draft.objects.exists()
    _, next_spec = steps.page(client, tide)
    while next_spec.kind != "block":  # the order is random: an attention check may come next
        steps.submit_current(client, tide)
        _, next_spec = steps.page(client, tide)
    next_draft = {"visit": next_spec.visit_id, **_partial_answers(next_spec)}
    assert client.post(_draft_url(tide), next_draft).status_code == 204
    assert list(Draft.objects.values_list("visit_id", flat=True)) == [next_spec.visit_id]


def test_without_a_survey_session_or_on_another_step_a_draft_is_refused(client, tide, steps):
    response = Client().post(_draft_url(tide), {"visit": "1"})
    assert response.status_code == 403 and "open the study link again" in response.json()["error"]
    client.get(steps.link(tide, PID))
    client.post("/s/tide/consent/", {"decision": "accept"})
    assert client.post(_draft_url(tide), {"visit": "1"}).status_code == 409  # at the instructions
    assert client.post("/s/tide/about-you/draft/", {}).status_code == 409
    assert client.get(_draft_url(tide)).status_code == 405
    assert not Draft.objects.exists()


def test_a_draft_needs_the_pages_csrf_token(tide, steps):
    browser = Client(enforce_csrf_checks=True)
    browser.get(steps.link(tide, PID))
    consent = browser.get("/s/tide/consent/")
    browser.post("/s/tide/consent/", {"decision": "accept", "csrfmiddlewaretoken": consent.context["csrf_token"]})
    instructions = browser.get("/s/tide/instructions/")
    browser.post("/s/tide/instructions/", {"csrfmiddlewaretoken": instructions.context["csrf_token"]})
    response, spec = steps.page(browser, tide)
    data = {"visit": spec.visit_id, **_partial_answers(spec)}
    assert browser.post(_draft_url(tide), data).status_code == 403
    assert not Draft.objects.exists()
    # As the page's script sends it: the form's token in the X-CSRFToken header.
    assert browser.post(_draft_url(tide), data, headers={"X-CSRFToken": spec.csrf_token}).status_code == 204


# --- the final questions --------------------------------------------------------------------------


def _to_the_final_questions(client, study, steps) -> None:
    steps.start(client, study, PID)
    while steps.page(client, study)[1].kind in {"block", "check"}:
        steps.submit_current(client, study)


def test_the_final_questions_keep_a_draft_until_finish(client, tide, steps):
    _to_the_final_questions(client, tide, steps)
    question = DemographicQuestion.objects.filter(study=tide, kind="choice").first()
    entered = {question.key: question.choices[-1]}
    assert client.post("/s/tide/about-you/draft/", entered).status_code == 204
    response = client.get("/s/tide/about-you/")
    assert _shown(response) == entered and b"data-draft-restored" in response.content
    refused = client.post("/s/tide/about-you/draft/", {question.key: "not an answer"})
    assert refused.status_code == 400 and "Please choose one of the listed answers." in refused.json()["error"]
    assert client.post("/s/tide/page/draft/", {"visit": "1", **entered}).status_code == 409
    client.post("/s/tide/about-you/", entered)
    assert not Draft.objects.exists()
    assert Participant.objects.get().demographics[question.key] == question.choices[-1]


def test_leaving_the_study_forgets_its_drafts(client, tide, steps):
    _start_with_draft(client, tide, steps)
    client.post("/s/tide/exit/")
    assert Participant.objects.get().status == Participant.Status.EXITED
    assert not Draft.objects.exists()


# --- never an answer ---------------------------------------------------------------------------------


def test_a_complete_draft_is_not_an_answer(client, tide, steps):
    participant = steps.start(client, tide, PID)
    _, spec = steps.page(client, tide)
    complete = {k: str(v) for k, v in steps.answers(spec).items()}
    assert client.post(_draft_url(tide), complete).status_code == 204
    state = selectors.participant_state(participant=participant)
    assert state.current_visit_id == spec.visit_id and state.progress.pages_done == 0
    assert not Rating.objects.exists()
    assert not ItemPlacement.objects.filter(rank__isnull=False).exists()
    assert not BlockVisit.objects.filter(submitted_at__isnull=False).exists()
    assert ratings_frame(tide.pk).empty
    assert not visits_frame(tide.pk)["submitted"].any()
    with pytest.raises(services.NotFinished):
        services.participant_complete(participant_id=participant.pk)


def test_drafts_change_no_frame_and_no_export(done_run):
    study = done_run.study
    before = {name: read_csvs(open_zip(done_run))[name] for name in ("ratings.csv", "participants.csv")}
    frame_before = ratings_frame(study.pk)
    assert len(before["ratings.csv"]) > 1 and not frame_before.empty
    # Drafts on every page of everyone, with answers unlike the stored ones, and on the final questions.
    now = clock.now()
    for visit in BlockVisit.objects.filter(participant__study=study).prefetch_related("placements"):
        fields = {f"rank-{p.pk}": "1" for p in visit.placements.all()}
        fields |= {f"rate-{p.pk}-{d.key}": "1" for p in visit.placements.all() for d in study.dimensions.all()}
        Draft.objects.create(participant_id=visit.participant_id, visit=visit, fields=fields, saved_at=now)
    for participant in Participant.objects.filter(study=study):
        Draft.objects.create(participant=participant, fields={"age": "18-24"}, saved_at=now)
    after_run = finished_run(study)
    after = {name: read_csvs(open_zip(after_run))[name] for name in ("ratings.csv", "participants.csv")}
    assert after == before
    assert ratings_frame(study.pk).equals(frame_before)


# --- the service and the selector -----------------------------------------------------------------


class _Page(forms.Form):
    choice = forms.TypedChoiceField(choices=[("1", "1"), ("2", "2")], coerce=int)
    text = forms.CharField(max_length=5, required=True)


def test_the_shape_check_keeps_known_non_empty_fields_as_entered():
    posted = QueryDict("csrfmiddlewaretoken=t&visit=3&choice=2&text=%20ab%20")
    assert drafts.draft_fields_clean(form=_Page(), posted=posted) == {"choice": "2", "text": " ab "}
    # Nothing entered is no draft field, even for a required question.
    assert drafts.draft_fields_clean(form=_Page(), posted=QueryDict("choice=&text=%20%20")) == {}


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("other=1", "'other' is not a question on this page."),
        ("choice=1&choice=2", "'choice' was sent 2 times"),
        ("choice=3", "choice: Select a valid choice."),
        ("text=abcdef", "text: Ensure this value has at most 5 characters (it has 6)."),
        ("x" * 100 + "=1", "'" + "x" * 60 + "' is not a question"),
    ],
)
def test_the_shape_check_refuses_what_the_page_would_refuse(query, message):
    with pytest.raises(drafts.DraftRejected) as refused:
        drafts.draft_fields_clean(form=_Page(), posted=QueryDict(query))
    assert str(refused.value).startswith(message)


def _on_first_page(tide):
    participant = services.participant_enroll(study=tide, external_id=PID, seed=1)
    services.participant_instructions_confirm(participant_id=participant.pk)
    return participant, selectors.participant_state(participant=participant)


def test_the_service_keeps_one_draft_per_page_and_the_selector_reads_it(tide):
    participant, state = _on_first_page(tide)
    visit_id = state.current_visit_id
    assert selectors.draft_fields(participant_id=participant.pk, visit_id=visit_id) == {}
    assert drafts.draft_save(participant_id=participant.pk, visit_id=visit_id, fields={"a": "1"})
    assert drafts.draft_save(participant_id=participant.pk, visit_id=visit_id, fields={"b": "2"})
    assert selectors.draft_fields(participant_id=participant.pk, visit_id=visit_id) == {"b": "2"}
    assert selectors.draft_fields(participant_id=participant.pk, visit_id=None) == {}
    assert Draft.objects.count() == 1


def test_the_service_refuses_a_page_that_is_not_the_current_one(tide):
    participant, state = _on_first_page(tide)
    later = state.visits[1].id
    assert not drafts.draft_save(participant_id=participant.pk, visit_id=later, fields={"a": "1"})
    assert not drafts.draft_save(participant_id=participant.pk, visit_id=None, fields={"a": "1"})
    services.participant_exit(participant_id=participant.pk)
    assert not drafts.draft_save(participant_id=participant.pk, visit_id=state.current_visit_id, fields={"a": "1"})
    assert not Draft.objects.exists()


def test_filling_in_a_page_counts_as_being_there(tide):
    participant, state = _on_first_page(tide)
    long_ago = clock.now() - timedelta(hours=1)
    Participant.objects.filter(pk=participant.pk).update(last_seen_at=long_ago)
    drafts.draft_save(participant_id=participant.pk, visit_id=state.current_visit_id, fields={"a": "1"})
    assert Participant.objects.get(pk=participant.pk).last_seen_at > long_ago + timedelta(minutes=59)
