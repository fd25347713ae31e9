"""Stored text with <script> payloads renders escaped on participant pages,
researcher pages and the admin, and CSV exports neutralise formulas (csv_cell here; the participants export of
formula-like answers in tests/test_export.py)."""

from __future__ import annotations

import copy

import pytest
from django.contrib.auth.models import User
from django.test import Client

from surveys.definition import parse_definition
from surveys.loader import study_load
from surveys.models import Participant

PAYLOAD = '<script>alert("x")</script>'
ESCAPED = "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;"
FORMULA = '=HYPERLINK("http://evil.example","click")'


@pytest.fixture
def xss_study(db, tide_definition):
    definition = copy.deepcopy(tide_definition)
    definition.update(slug="xss", title=f"Title {PAYLOAD}", consent=f"Consent {PAYLOAD}",
                      instructions=f"Instructions {PAYLOAD}")
    for block in definition["blocks"]:
        for response in block["responses"]:
            response["text"] = f"{response['text']} {PAYLOAD}"
    return study_load(definition=parse_definition(definition)).study


@pytest.fixture
def xss_admin_client(db, xss_study):
    """A client signed in as a superuser who owns the XSS study."""
    user = User.objects.create_superuser("root", "r@example.org", "pw-123456789")
    xss_study.owners.add(user)
    client = Client()
    client.force_login(user)
    return client


def _assert_escaped(response):
    html = response.content.decode()
    assert PAYLOAD not in html
    return html


def test_participant_pages_escape_study_content(client, xss_study, steps):
    client.get(steps.link(xss_study))
    html = _assert_escaped(client.get(f"/s/{xss_study.slug}/consent/"))
    assert ESCAPED in html
    client.post(f"/s/{xss_study.slug}/consent/", {"decision": "accept"})
    assert ESCAPED in _assert_escaped(client.get(f"/s/{xss_study.slug}/instructions/"))
    client.post(f"/s/{xss_study.slug}/instructions/")
    response = client.get(f"/s/{xss_study.slug}/page/", follow=True)
    html = _assert_escaped(response)
    assert ESCAPED in html or "attention" in html.lower()


def test_a_free_text_answer_is_escaped_when_shown_back(client, reasons_per_block, steps):
    most_least = reasons_per_block
    steps.start(client, most_least)
    _, spec = steps.page(client, most_least)
    field = next(iter(spec.texts))
    response = client.post(f"/s/{most_least.slug}/page/", {**steps.answers(spec), field: PAYLOAD, "most": "x"})
    assert response.status_code == 400  # re-rendered with the typed text in the textarea
    html = _assert_escaped(response)
    assert ESCAPED in html


def test_researcher_pages_and_admin_escape_stored_text(xss_admin_client, xss_study):
    participant = Participant.objects.create(study=xss_study, external_id="f" * 24, pseudonym="P-xss",
                                             seed=1, demographics={"gender": PAYLOAD, "state": PAYLOAD})
    for url in ["/studies/", f"/studies/{xss_study.slug}/", "/admin/surveys/study/",
                f"/admin/surveys/study/{xss_study.pk}/change/", "/admin/surveys/item/?q=script",
                f"/admin/surveys/participant/{participant.pk}/change/"]:
        response = xss_admin_client.get(url)
        assert response.status_code == 200, url
        _assert_escaped(response)


def test_csv_exports_neutralise_formulas():
    from analysis.exporting.exports import csv_cell

    for text in (FORMULA, "+1+1", "-2+3", "@SUM(A1)", "\tx", "\rx"):
        assert csv_cell(text).startswith("'"), text
    assert csv_cell(-3) == "-3"  # numbers stay numbers
    assert csv_cell(PAYLOAD) == PAYLOAD  # CSV is not HTML: no HTML escaping, nothing executes
