"""Screenshots of the participant pages for the README (docs/screenshots/).

These run with the other browser tests and check that each page renders; with
SAVE_SCREENSHOTS=1 (``bin/screenshots``) they also write the PNGs. Other
engineers' screenshots (researcher dashboard, regional map) call
``tests.support.browser.save_screenshot(page, name)`` the same way.
"""

from __future__ import annotations

import pytest

from tests.support.browser import (  # noqa: F401  (browser is a fixture)
    DESKTOP,
    PHONE,
    answer_until,
    back_from_the_panel,
    browser,
    new_page,
    save_screenshot,
    start_survey,
    stub_the_panel,
)

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow(reason="browser: every screen size, beyond the default journeys"),
    pytest.mark.django_db(transaction=True),
]

SCREENS = {"desktop": {**DESKTOP, "height": 800}, "phone": PHONE}


@pytest.mark.parametrize("device", list(SCREENS))
def test_it_shows_a_block_the_ranking_and_the_completion_page(browser, live_server, tide, device):
    page = new_page(browser, viewport=SCREENS[device])
    participant = start_survey(page, live_server, ("a" if device == "desktop" else "b") * 24)

    # A block part-way through: the first response rated.
    page.locator("section.response").first.locator("label.scale-option").nth(3).click()
    page.evaluate("window.scrollTo(0, 0)")
    save_screenshot(page, f"block-{device}")

    # The ranking after a keyboard move, the focus ring on the pressed button.
    ranking = page.locator("fieldset.ranking")
    ranking.scroll_into_view_if_needed()
    button = page.locator('[data-rank-row][data-number="3"] button[data-move="up"]')
    button.focus()
    page.keyboard.press("Enter")
    assert page.locator("[data-rank-status]").inner_text() == "Response 3 is now ranked 2 of 5."
    save_screenshot(page, f"ranking-{device}", locator=ranking)

    answer_until(participant, stop_at=None)
    page.goto(f"{live_server.url}/s/tide/about-you/")
    stub_the_panel(page)
    page.get_by_role("button", name="Finish").click()
    back_from_the_panel(page, f"{live_server.url}/s/tide/done/")
    save_screenshot(page, f"done-{device}")
    page.context.close()
