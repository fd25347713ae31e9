"""A pairwise preference page in chromium: the two responses side by side on a desktop and stacked on a
phone, no serious axe finding, a missing answer caught with a focused summary, and a choice saved."""

from __future__ import annotations

import pytest

from surveys.models import BlockVisit, Participant
from tests.support.browser import PHONE, browser, csp_violations, new_page  # noqa: F401  (browser is a fixture)
from tests.test_browser_a11y import audit

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _start(page, live_server, study, external_id: str) -> Participant:
    page.goto(f"{live_server.url}/s/{study.slug}/?{study.id_param}={external_id}&STUDY_ID=st&SESSION_ID=se")
    page.get_by_role("button", name="I agree to take part").click()
    page.get_by_role("button", name="Start").click()
    page.wait_for_url("**/page/")
    return Participant.objects.get(study=study, external_id=external_id)


def _boxes(page) -> list[dict]:
    return [page.locator("section.response").nth(k).bounding_box() for k in range(2)]


def test_the_two_responses_stand_side_by_side_and_the_choice_is_saved(browser, live_server, pairwise):
    page = new_page(browser, viewport={"width": 1280, "height": 800})
    refused = csp_violations(page)
    participant = _start(page, live_server, pairwise, "ab" * 12)
    left, right = _boxes(page)
    assert abs(left["y"] - right["y"]) < 2 and left["x"] + left["width"] <= right["x"]
    assert audit(page, "pairwise block (desktop)") == []

    # Next without an answer: the summary takes the focus and names what is missing.
    page.get_by_role("button", name="Next").click()
    summary = page.locator(".error-summary")
    assert "Please say which response is more empathetic" in summary.inner_text()
    assert page.evaluate("document.activeElement.closest('.error-summary') !== null")

    visit_id = int(page.locator('input[name="visit"]').get_attribute("value"))
    page.get_by_label("Response 2 is better").check()
    page.get_by_label("Why? (optional)").fill("It asked how they felt.")
    page.get_by_role("button", name="Next").click()
    page.wait_for_function(f"document.querySelector('input[name=visit]')?.value !== '{visit_id}'")
    visit = BlockVisit.objects.get(pk=visit_id)
    assert visit.preference == "right" and visit.participant_id == participant.pk
    assert refused == []


@pytest.mark.slow(reason="the phone layout of the pairwise journey; bin/test runs the desktop journey")
def test_on_a_phone_the_responses_stack_left_first_without_sideways_scrolling(browser, live_server, pairwise):
    page = new_page(browser, viewport=PHONE)
    _start(page, live_server, pairwise, "cd" * 12)
    first, second = _boxes(page)
    assert second["y"] >= first["y"] + first["height"]
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    assert audit(page, "pairwise block (phone)") == []
