"""Bad input at the participant form handlers: never a 500, nothing stored on a
bad request, and the response says what was wrong. (The API is fuzzed with
schemathesis elsewhere.)"""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from surveys.forms import TAMPER_MESSAGE
from surveys.models import BlockVisit, Draft, FreeTextAnswer, Participant, Rating

FUZZ = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

junk = st.one_of(
    st.integers(-10**12, 10**12).map(str),
    st.text(max_size=40),
    st.text(max_size=10).map(lambda s: s + "\x00" + s),
    st.just("\x00"),
    st.sampled_from(["", " 3", "3.0", "1e3", "NaN", "-1", "0", "6", "99999999999999999999", "true", "[1]", "<script>"]),
    st.integers(1000, 100_000).map(lambda n: "9" * n),
)


def _stored_counts() -> tuple[int, int, int]:
    return (Rating.objects.count(), BlockVisit.objects.filter(submitted_at__isnull=False).count(),
            FreeTextAnswer.objects.count())


def _says_what_was_wrong(response) -> bool:
    text = response.content.decode()
    return "error-summary" in text or TAMPER_MESSAGE in text or "out of date" in text


@pytest.fixture
def on_a_block(client, tide, steps):
    steps.start(client, tide)
    return client


def _with_junk(data, spec, valid: dict[str, str], *, blank: bool = True) -> tuple[dict[str, str], list[str]]:
    """``valid`` with junk in at least one answer (never blank junk unless ``blank``); the names changed."""
    bad = data.draw(st.lists(st.sampled_from(sorted(n for n in valid if n != "visit")), min_size=1, unique=True))
    posted = dict(valid)
    for name in bad:
        allowed = {str(p) for p in spec.check_points} if name == "attention" else {str(i) for i in range(1, 6)}
        value = data.draw(junk)
        assume(value not in allowed and (blank or value.strip()))
        posted[name] = value
    return posted, bad


@pytest.mark.slow(reason="hypothesis: many generated form posts")
@FUZZ
@given(data=st.data())
def test_block_post_with_bad_values_is_a_400_and_stores_nothing(on_a_block, tide, steps, data):
    _, spec = steps.page(on_a_block, tide)
    valid = {k: str(v) for k, v in steps.answers(spec).items()}
    posted, bad = _with_junk(data, spec, valid)
    for name in data.draw(st.lists(st.sampled_from(sorted(valid)), unique=True, max_size=2)):
        if name not in bad:
            posted.pop(name)
    posted.update(data.draw(st.dictionaries(st.text(min_size=1, max_size=20), junk, max_size=3)))
    posted.setdefault("visit", valid["visit"])
    before = _stored_counts()
    response = on_a_block.post(f"/s/{tide.slug}/page/", posted)
    assert response.status_code in {400, 409, 303}, response.status_code
    assert _stored_counts() == before
    if response.status_code != 303:  # 303 only when "visit" was replaced by an already answered page
        assert _says_what_was_wrong(response)


@pytest.mark.slow(reason="hypothesis: many generated form posts")
@FUZZ
@given(visit=junk)
def test_a_junk_visit_id_is_refused(on_a_block, tide, visit):
    before = _stored_counts()
    response = on_a_block.post(f"/s/{tide.slug}/page/", {"visit": visit, "rate-1-empathy": "3"})
    assert response.status_code in {409, 400}
    assert _stored_counts() == before


def test_a_visit_of_another_participant_or_study_is_a_conflict(client, tide, counselor, steps):
    from django.test import Client

    other = Client()
    steps.start(other, tide, external_id="b" * 24)
    _, other_spec = steps.page(other, tide)
    other_counselor = Client()
    steps.start(other_counselor, counselor, external_id="c" * 24)
    _, counselor_spec = steps.page(other_counselor, counselor)
    steps.start(client, tide)
    _, mine = steps.page(client, tide)
    before = _stored_counts()
    for spec in (other_spec, counselor_spec):
        answers = {**steps.answers(spec), "visit": spec.visit_id}
        response = client.post(f"/s/{tide.slug}/page/", answers)
        assert response.status_code == 409
        assert _says_what_was_wrong(response)
    # My own page with another participant's placements: the tamper message.
    tampered = {**steps.answers(other_spec), "visit": mine.visit_id}
    response = client.post(f"/s/{tide.slug}/page/", tampered)
    assert response.status_code == 400 and _says_what_was_wrong(response)
    assert _stored_counts() == before


def test_ten_thousand_fields_are_a_400_not_a_500(on_a_block, tide, steps):
    _, spec = steps.page(on_a_block, tide)
    data = {**steps.answers(spec), **{f"f{i}": "1" for i in range(10_000)}}
    before = _stored_counts()
    response = on_a_block.post(f"/s/{tide.slug}/page/", data)
    assert response.status_code == 400
    assert b"too many" in response.content.lower() or b"could not be read" in response.content.lower()
    assert _stored_counts() == before


@pytest.mark.parametrize("content_type, body", [
    ("application/json", json.dumps({"rate-1-empathy": 3})),
    ("text/plain", "rate-1-empathy=3"),
    ("application/x-www-form-urlencoded", "%ZZ%00&&==&visit=%ff%fe"),
    ("multipart/form-data; boundary=x", "--x\r\nbroken"),
    ("multipart/form-data", "no boundary at all"),
])
def test_wrong_content_types_are_a_400_and_store_nothing(on_a_block, tide, content_type, body):
    before = _stored_counts()
    response = on_a_block.post(f"/s/{tide.slug}/page/", body, content_type=content_type)
    assert response.status_code in {400, 409}
    assert _stored_counts() == before


def test_free_text_with_nul_or_too_long_is_a_400(client, reasons_per_block, steps):
    most_least = reasons_per_block
    steps.start(client, most_least)
    _, spec = steps.page(client, most_least)
    text_field = next(iter(spec.texts))
    for text in ("why\x00not", "x" * (spec.texts[text_field] + 1)):
        before = _stored_counts()
        response = client.post(f"/s/{most_least.slug}/page/", {**steps.answers(spec), text_field: text})
        assert response.status_code == 400 and _says_what_was_wrong(response)
        assert _stored_counts() == before


@pytest.mark.slow(reason="hypothesis: many generated form posts")
@FUZZ
@given(answers=st.dictionaries(st.sampled_from(["age", "sex", "gender", "race", "hispanic", "education",
                                                "employment", "state"]), junk, min_size=1))
def test_demographics_with_bad_values_is_a_400_and_stores_nothing(at_demographics, tide, answers):
    client, participant = at_demographics
    assume(any(value.strip() for value in answers.values()))
    draft = client.post(f"/s/{tide.slug}/about-you/draft/", answers)
    assert draft.status_code == 400 and draft.json()["error"] and not Draft.objects.exists()
    response = client.post(f"/s/{tide.slug}/about-you/", answers)
    participant.refresh_from_db()
    assert response.status_code == 400 and _says_what_was_wrong(response)
    assert not participant.demographics_done and participant.status == Participant.Status.IN_PROGRESS


@pytest.fixture
def at_demographics(client, tide, steps):
    participant = steps.start(client, tide)
    while True:
        _, spec = steps.page(client, tide)
        if spec.kind not in {"block", "check"}:
            break
        client.post(f"/s/{tide.slug}/page/", steps.answers(spec))
    return client, participant


@pytest.mark.slow(reason="hypothesis: many generated form posts")
@FUZZ
@given(params=st.dictionaries(st.sampled_from(["PROLIFIC_PID", "STUDY_ID", "SESSION_ID", "x"]), junk, min_size=1),
       keep_valid_pid=st.booleans())
def test_entry_with_bad_parameters_never_fails_and_enrols_cleanly(client, tide, params, keep_valid_pid):
    if keep_valid_pid:
        params["PROLIFIC_PID"] = "d" * 24
    client.cookies.clear()
    response = client.get(f"/s/{tide.slug}/", params)
    assert response.status_code in {303, 400}
    if response.status_code == 400:
        assert b"link" in response.content.lower()
        return
    response = client.post(f"/s/{tide.slug}/consent/", {"decision": "accept"})
    assert response.status_code in {303, 200}
    participant = Participant.objects.get(study=tide, external_id=params["PROLIFIC_PID"])
    assert "\x00" not in participant.panel_study_id + participant.panel_session_id


def test_nul_bytes_in_the_panel_parameters_do_not_break_enrolment(client, tide):
    response = client.get(f"/s/{tide.slug}/", {"PROLIFIC_PID": "e" * 24, "STUDY_ID": "a\x00b", "SESSION_ID": "\x00"})
    assert response.status_code == 303
    response = client.post(f"/s/{tide.slug}/consent/", {"decision": "accept"})
    assert response.status_code == 303
    participant = Participant.objects.get(study=tide, external_id="e" * 24)
    assert "\x00" not in participant.panel_study_id + participant.panel_session_id


@pytest.mark.slow(reason="hypothesis: many generated form posts")
@FUZZ
@given(data=st.data())
def test_a_draft_with_bad_values_is_refused_with_a_reason_and_writes_nothing(on_a_block, tide, steps, data):
    _, spec = steps.page(on_a_block, tide)
    # A blank value is no junk in a draft: nothing entered yet.
    posted, _ = _with_junk(data, spec, {k: str(v) for k, v in steps.answers(spec).items()}, blank=False)
    posted.update(data.draw(st.dictionaries(st.text(min_size=1, max_size=20), junk, max_size=3)))
    response = on_a_block.post(f"/s/{tide.slug}/page/draft/", posted)
    assert response.status_code in {400, 409}, response.status_code
    assert response.json()["error"]
    assert not Draft.objects.exists()


@pytest.fixture
def with_text_demographic(db):
    """most-least (three blocks) with a short-text demographic question."""
    from surveys.definition import parse_definition, read_definition_file
    from surveys.loader import study_load
    from tests.support.paths import FIXTURES

    definition = read_definition_file(FIXTURES / "most_least.json")
    definition.update(slug="text-demographic", demographics=[{"key": "field", "prompt": "Your field?", "type": "text"}])
    return study_load(definition=parse_definition(definition)).study


def test_a_short_text_demographic_answer_with_a_nul_is_a_400_and_stores_nothing(client, with_text_demographic, steps):
    study = with_text_demographic
    participant = steps.start(client, study)
    while (spec := steps.page(client, study)[1]).kind in {"block", "check"}:
        client.post(f"/s/{study.slug}/page/", steps.answers(spec))
    draft = client.post(f"/s/{study.slug}/about-you/draft/", {"field": "physics\x00"})
    assert draft.status_code == 400 and "Null characters" in draft.json()["error"] and not Draft.objects.exists()
    response = client.post(f"/s/{study.slug}/about-you/", {"field": "physics\x00"})
    participant.refresh_from_db()
    assert response.status_code == 400 and _says_what_was_wrong(response)
    assert participant.demographics == {} and not participant.demographics_done
    client.post(f"/s/{study.slug}/about-you/", {"field": "physics"})
    participant.refresh_from_db()
    assert participant.demographics == {"field": "physics"} and participant.demographics_done
