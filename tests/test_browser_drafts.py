"""Drafts in chromium: ratings and a ranking entered on a block come back after a reload and in
another browser that enters through the same panel link; an untouched ranking stays unranked."""

from __future__ import annotations

import time

import pytest

from surveys.models import Draft, Rating
from tests.support.browser import (  # noqa: F401  (browser is a fixture)
    browser, csp_violations, new_page, participant_link, start_survey,
)

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow(reason="browser: drafts across reloads and browsers, beyond the default journeys"),
    pytest.mark.django_db(transaction=True),
]


def _placements(page) -> list[int]:
    return page.locator("section.response").evaluate_all("els => els.map(e => +e.dataset.placement)")


def _rank_order(page) -> list[int]:
    return page.locator("[data-rank-row]").evaluate_all("els => els.map(e => +e.dataset.placement)")


def _rank_values(page) -> list[str]:
    return page.locator("[data-rank-row] select").evaluate_all("els => els.map(s => s.value)")


def _kept(page, action, expected: str) -> None:
    """Do ``action`` and wait for the draft request that carries ``expected`` (``name=value``) to be kept."""
    with page.expect_response(
        lambda r: r.url.endswith("/page/draft/") and expected in (r.request.post_data or "")
    ) as info:
        action()
    assert info.value.status == 204


def _rate(page, pid: int, value: int) -> None:
    page.locator(f'label[for="id-rate-{pid}-empathy-{value}"]').click()


def _draft_fields(participant) -> dict[str, str]:
    return Draft.objects.filter(participant=participant).values_list("fields", flat=True).first() or {}


def test_ratings_and_a_ranking_come_back_after_a_reload_and_in_another_browser(browser, live_server, tide):
    external_id = "da" * 12
    page = new_page(browser)
    refused = csp_violations(page)
    participant = start_survey(page, live_server, external_id)
    placements = _placements(page)
    first, second, third = placements[:3]
    _rate(page, first, 2)
    _kept(page, lambda: _rate(page, second, 5), f"rate-{second}-empathy=5")
    # Response 3 up twice: the ranking is now the participant's, and kept with the ratings.
    row = page.locator(f'[data-rank-row][data-placement="{third}"]')
    row.locator("button[data-move='up']").click()
    _kept(page, lambda: row.locator("button[data-move='up']").click(), f"rank-{third}=1")
    wanted = [third, first, second, *placements[3:]]
    assert _rank_order(page) == wanted

    page.reload()
    assert page.locator("[data-draft-restored]").is_visible()
    assert page.is_checked(f"#id-rate-{first}-empathy-2") and page.is_checked(f"#id-rate-{second}-empathy-5")
    assert not any(page.is_checked(f"#id-rate-{pid}-empathy-{v}") for pid in placements[2:] for v in range(1, 6))
    assert _rank_order(page) == wanted and _rank_values(page) == ["1", "2", "3", "4", "5"]
    assert page.locator("[data-rank-note]").inner_text().startswith("Ranked:")

    # Another browser (a phone, another day) entering through the same panel link.
    other = new_page(browser)
    other.goto(participant_link(live_server, external_id))
    other.wait_for_url("**/page/")
    assert other.locator("[data-welcome-back]").is_visible() and other.locator("[data-draft-restored]").is_visible()
    assert other.is_checked(f"#id-rate-{first}-empathy-2") and other.is_checked(f"#id-rate-{second}-empathy-5")
    assert _rank_order(other) == wanted and _rank_values(other) == ["1", "2", "3", "4", "5"]

    # It finishes the block there: what is stored is the page as submitted, and the draft is gone.
    for pid in placements[2:]:
        _rate(other, pid, 3)
    with other.expect_navigation():
        other.get_by_role("button", name="Next").click()
    stored = dict(Rating.objects.filter(placement__visit__participant=participant).values_list("placement_id", "value"))
    assert stored == {first: 2, second: 5, **{pid: 3 for pid in placements[2:]}}
    assert _draft_fields(participant) == {}
    assert not refused
    page.context.close()
    other.context.close()


def test_an_untouched_ranking_stays_unranked_and_a_last_change_before_leaving_is_kept(browser, live_server, tide):
    page = new_page(browser)
    participant = start_survey(page, live_server, "db" * 12)
    placements = _placements(page)
    _kept(page, lambda: _rate(page, placements[0], 4), f"rate-{placements[0]}-empathy=4")
    assert _draft_fields(participant) == {f"rate-{placements[0]}-empathy": "4"}
    # A rating given just before a reload, within the pause before a draft is sent, is sent on leaving.
    _rate(page, placements[1], 1)
    page.reload()
    deadline = time.monotonic() + 5
    while f"rate-{placements[1]}-empathy" not in _draft_fields(participant) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _draft_fields(participant) == {f"rate-{placements[0]}-empathy": "4", f"rate-{placements[1]}-empathy": "1"}
    page.reload()
    assert page.is_checked(f"#id-rate-{placements[0]}-empathy-4")
    assert page.is_checked(f"#id-rate-{placements[1]}-empathy-1")
    assert _rank_values(page) == [""] * 5 and _rank_order(page) == placements
    assert page.locator("[data-rank-note]").inner_text().startswith("Not ranked yet.")
    page.context.close()
