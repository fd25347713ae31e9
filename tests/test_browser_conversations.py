"""A conversation above the responses on a 375 px phone, in Debian chromium: no sideways scrolling, the turns
are a list of list items each naming its speaker (axe finds nothing serious), earlier turns fold and unfold
without a script, and the researchers' preview shows the same page."""

from __future__ import annotations

import copy

import pytest

from surveys.conversation import RECENT_TURNS
from surveys.definition import parse_definition
from surveys.loader import study_load
from tests.support.browser import PHONE, browser, new_page, sign_in  # noqa: F401  (browser is a fixture)
from tests.support.researcher import PASSWORD, make_user
from tests.test_browser_a11y import audit

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# A long unbroken word (a URL, a code) is what pushes a narrow page sideways.
LONG_WORD = "https://example.org/" + "a" * 120
TURNS = RECENT_TURNS + 3


def _conversation(n: int) -> list[dict[str, str]]:
    return [{"role": "user" if i % 2 else "assistant",
             "text": f"Turn {i}: I have been feeling low since the accident. {LONG_WORD if i == n else ''}".strip()}
            for i in range(1, n + 1)]


@pytest.fixture
def conversation_study(tide_definition):
    definition = copy.deepcopy(tide_definition)
    for scenario in definition["scenarios"]:
        scenario["context"] = _conversation(TURNS)
    return study_load(definition=parse_definition(definition)).study


def _no_horizontal_scroll(page) -> None:
    widths = page.evaluate("[document.documentElement.scrollWidth, document.documentElement.clientWidth]")
    assert widths[0] <= widths[1], widths


def _check_the_transcript(page, name: str) -> None:
    conversation = page.locator("[data-conversation]")
    conversation.wait_for()
    _no_horizontal_scroll(page)
    # Two lists (folded, in view); only the turns in view are exposed until the fold opens.
    assert conversation.get_by_role("list").count() == 1
    assert conversation.get_by_role("listitem").count() == RECENT_TURNS
    speakers = conversation.locator(".turn .speaker").all_inner_texts()
    assert speakers[-RECENT_TURNS:] == ["Assistant:", "Person:", "Assistant:", "Person:"]
    assert audit(page, name) == []
    conversation.locator("summary").click()
    assert conversation.get_by_role("list").count() == 2
    assert conversation.get_by_role("listitem").count() == TURNS
    _no_horizontal_scroll(page)
    assert audit(page, f"{name}, unfolded") == []
    # The transcript comes before the person's message and the responses.
    assert page.evaluate(
        "document.querySelector('[data-conversation]').compareDocumentPosition(document.querySelector('.response'))"
        " & Node.DOCUMENT_POSITION_FOLLOWING") != 0


def test_a_conversation_reads_well_on_a_phone_and_to_a_screen_reader(browser, live_server, conversation_study):
    page = new_page(browser, viewport=PHONE)
    page.goto(f"{live_server.url}/s/tide/?PROLIFIC_PID={'e' * 24}&STUDY_ID=st&SESSION_ID=se")
    page.get_by_role("button", name="I agree to take part").click()
    page.get_by_role("button", name="Start").click()
    page.wait_for_url("**/page/")
    _check_the_transcript(page, "conversation 375 px")
    page.context.close()


@pytest.mark.slow(reason="the researcher's preview of the conversation journey; bin/test runs the participant one")
def test_the_preview_shows_the_same_conversation(browser, live_server, conversation_study):
    owner = make_user("owner")
    conversation_study.owners.add(owner)
    page = new_page(browser, viewport=PHONE)
    sign_in(page, live_server.url, "owner", PASSWORD)
    page.goto(f"{live_server.url}/s/tide/preview/")
    page.get_by_role("button", name="I agree to take part").click()
    page.get_by_role("button", name="Start").click()
    page.wait_for_url("**/preview/page/")
    assert "Nothing you enter in this preview is recorded." in page.content()
    _check_the_transcript(page, "conversation preview 375 px")
    page.context.close()
