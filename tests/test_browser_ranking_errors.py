"""In chromium: the server's ranking errors leave the rows once the participant has ranked (issue 30 item 17).

They used to stay beside every row (and in the error summary) after the ranking was
fixed, telling the participant to rank what they had just ranked.
"""

from __future__ import annotations

import pytest

from tests.support.browser import browser, new_page, start_survey  # noqa: F401  (browser is a fixture)

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow(reason="browser: ranking error states, beyond the default journeys"),
    pytest.mark.django_db(transaction=True),
]


def _rank_errors(page) -> dict[str, int]:
    return page.evaluate(
        """() => ({
            rows: document.querySelectorAll('[data-rank-row].has-error').length,
            messages: document.querySelectorAll('[data-rank-row] .error-message').length,
            invalid: document.querySelectorAll('[data-rank-row] select[aria-invalid]').length,
            described: [...document.querySelectorAll('[data-rank-row] select')]
                .filter(s => (s.getAttribute('aria-describedby') || '').includes('err-')).length,
        })"""
    )


def _summary(page) -> list[str]:
    return page.locator("#error-summary li").all_inner_texts()


def test_ranking_errors_leave_the_rows_and_the_summary_once_the_ranking_is_whole(browser, live_server, tide):
    page = new_page(browser)
    start_survey(page, live_server, "cd" * 12)
    placements = page.locator("section.response").evaluate_all("els => els.map(e => +e.dataset.placement)")
    for pid in placements[1:]:  # the first response's rating is left out: its error must stay
        page.locator(f'label[for="id-rate-{pid}-empathy-4"]').click()
    page.get_by_role("button", name="Next").click()
    page.locator("#error-summary").wait_for()
    rank_lines = [f"Please give Response {n} a rank." for n in range(1, 6)]
    assert _rank_errors(page) == {"rows": 5, "messages": 5, "invalid": 5, "described": 5}
    assert set(rank_lines) <= set(_summary(page))

    page.get_by_role("button", name="Keep this order").click()

    assert _rank_errors(page) == {"rows": 0, "messages": 0, "invalid": 0, "described": 0}
    assert not set(rank_lines) & set(_summary(page))
    # The rating still missing keeps its error, beside it and in the summary.
    assert _summary(page) == ["Please rate Response 1 for perceived empathy."]
    assert page.locator(f"#fs-rate-{placements[0]}-empathy .error-message").is_visible()
    page.context.close()
