"""The whole TIDE survey in chromium: with a mouse (drag ranking), on a phone with
JavaScript off (select ranking), and with the keyboard only. What is stored in
the database must be exactly what was clicked."""

from __future__ import annotations

import random
import re

import pytest

from surveys.models import BlockVisit, ItemPlacement, Participant, Rating
from tests.support.browser import (  # noqa: F401  (browser is a fixture)
    PHONE, back_from_the_panel, browser, new_page, participant_link, start_survey, stub_the_panel, tab_to,
)
from tests.support.studies import load_short_tide

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
# The variants (phone without JavaScript, keyboard only, the refused unranked submit) run in
# bin/test --all. So does the mouse journey of all 24 blocks (~35 s even at load 3, over bin/test's
# 20 s limit); bin/test runs the same journey on a TIDE of two blocks per participant.
VARIANT = pytest.mark.slow(reason="a variant of the rating-and-ranking journey")


def _kind(page) -> str:
    return page.evaluate(
        """() => document.querySelector('[data-completion-code]') ? 'done'
              : (document.querySelector('form[data-page]') || {dataset: {}}).dataset.page || ''"""
    )


def _placements(page) -> list[int]:
    return page.locator("section.response").evaluate_all("els => els.map(e => +e.dataset.placement)")


def _visit_id(page) -> int:
    return int(page.locator("input[name=visit]").input_value())


def _expected_check_value(page) -> int:
    return int(re.search(r"select (\d+)", page.locator("legend").first.inner_text()).group(1))


def _rank_order(page) -> list[int]:
    return page.locator("[data-rank-row]").evaluate_all("els => els.map(e => +e.dataset.placement)")


def _rank_values(page) -> list[str]:
    """The rank selects' values in display order ("" = not ranked)."""
    return page.locator("[data-rank-row] select").evaluate_all("els => els.map(s => s.value)")


class Record:
    """What the test clicked, to compare with the database at the end."""

    def __init__(self):
        self.ratings: dict[int, int] = {}
        self.ranks: dict[int, int] = {}
        self.checks: dict[int, int] = {}

    def assert_stored(self, external_id: str) -> Participant:
        participant = Participant.objects.get(external_id=external_id)
        stored = dict(Rating.objects.filter(placement__visit__participant=participant).values_list("placement_id", "value"))
        assert stored == self.ratings
        ranks = dict(ItemPlacement.objects.filter(visit__participant=participant).values_list("pk", "rank"))
        assert ranks == self.ranks
        values = dict(
            BlockVisit.objects.filter(participant=participant, attention_check__isnull=False).values_list(
                "pk", "attention_value"
            )
        )
        assert values == self.checks
        assert participant.visits.filter(submitted_at__isnull=True).count() == 0
        return participant


def _drag_to(page, pid: int, index: int) -> None:
    """Drag a ranking row by its handle onto the row now at ``index`` (mouse only)."""
    handle = page.locator(f'[data-rank-row][data-placement="{pid}"] .drag-handle')
    target = page.locator("[data-rank-row]").nth(index)
    handle.scroll_into_view_if_needed()
    source, box = handle.bounding_box(), target.bounding_box()
    page.mouse.move(source["x"] + source["width"] / 2, source["y"] + source["height"] / 2)
    page.mouse.down()
    x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] * 0.3
    page.mouse.move(x, y, steps=12)
    # SortableJS's mouse fallback checks the pointer every 50 ms: wait (on the
    # order, not the clock) until the row has moved, nudging the pointer meanwhile.
    for nudge in range(20):
        moved = page.evaluate(
            "([pid, index]) => +document.querySelectorAll('[data-rank-row]')[index].dataset.placement === pid",
            [pid, index],
        )
        if moved:
            break
        page.mouse.move(x, y + (nudge % 2), steps=2)
    page.mouse.up()


def _consent_and_start(page) -> None:
    page.get_by_role("button", name="I agree to take part").click()
    page.get_by_role("button", name="Start").click()


def _answer_check(page, record: Record) -> None:
    """Answer an attention check as asked, and note the answer for ``Record.assert_stored``."""
    value = _expected_check_value(page)
    page.check(f"#id-attention-{value}")
    record.checks[_visit_id(page)] = value


def _finish_demographics(page, choices: dict[str, str]) -> None:
    for name, value in choices.items():
        field = page.locator(f"#id-{name}")
        # Listed questions are selects; number and text questions are typed (age is a number).
        if field.evaluate("el => el.tagName") == "SELECT":
            field.select_option(value)
        else:
            field.fill(value)
    stub_the_panel(page)
    page.get_by_role("button", name="Finish").click()


@pytest.fixture
def tide_two_blocks(db):
    """TIDE with each participant given 2 of its 24 blocks (allocation), so that the rating-and-ranking journey
    fits the contributor suite; the whole 24-block journey is the slow test below."""
    return load_short_tide(2)


def test_it_completes_a_short_rating_and_ranking_study_with_a_mouse_and_drag_ranking(browser, live_server,
                                                                                    tide_two_blocks):
    external_id = "c" * 24
    rng, record = random.Random(3), Record()
    page = new_page(browser)
    page.goto(participant_link(live_server, external_id))
    _consent_and_start(page)
    blocks = 0
    while (kind := _kind(page)) in {"block", "check"}:
        if kind == "check":
            _answer_check(page, record)
        else:
            blocks += 1
            placements = _placements(page)
            for pid in placements:
                value = rng.randint(1, 5)
                page.locator(f'label[for="id-rate-{pid}-empathy-{value}"]').click()
                record.ratings[pid] = value
            assert _rank_values(page) == [""] * len(placements)  # the ranking starts unranked
            wanted = list(reversed(placements))
            for index, pid in enumerate(wanted):
                if _rank_order(page)[index] != pid:
                    _drag_to(page, pid, index)
            assert _rank_order(page) == wanted
            for rank, pid in enumerate(wanted, start=1):
                assert page.locator(f"#id-rank-{pid}").input_value() == str(rank)
                record.ranks[pid] = rank
        page.get_by_role("button", name="Next").click()
    assert blocks == 2
    _finish_demographics(page, {"age": "34", "gender": "Woman", "state": "TX"})
    sent_to = back_from_the_panel(page, f"{live_server.url}/s/tide/done/", use_history=True)
    assert sent_to == "https://app.prolific.com/submissions/complete?cc=C1TIDE7Q"
    participant = record.assert_stored(external_id)
    assert participant.status == "completed"
    assert participant.visits.filter(block__isnull=False).count() == 2
    page.context.close()


@pytest.mark.slow(reason="all 24 blocks by mouse: ~35 s at load 3, over bin/test's 20 s limit")
def test_it_completes_tide_with_a_mouse_and_drag_ranking(browser, live_server, tide):
    external_id = "d" * 24
    rng, record = random.Random(1), Record()
    page = new_page(browser)
    page.goto(participant_link(live_server, external_id))
    assert "PROLIFIC_PID" not in page.url and page.url.endswith("/s/tide/consent/")
    _consent_and_start(page)
    blocks = 0
    while (kind := _kind(page)) in {"block", "check"}:
        if kind == "check":
            _answer_check(page, record)
        else:
            blocks += 1
            placements = _placements(page)
            if blocks == 2:
                # A refresh shows the same responses in the same order.
                page.reload()
                assert _placements(page) == placements
            for pid in placements:
                value = rng.randint(1, 5)
                page.locator(f'label[for="id-rate-{pid}-empathy-{value}"]').click()
                record.ratings[pid] = value
            assert _rank_values(page) == [""] * 5  # the ranking starts unranked
            wanted = list(placements)
            rng.shuffle(wanted)
            for index, pid in enumerate(wanted):
                if _rank_order(page)[index] != pid:
                    _drag_to(page, pid, index)
            if wanted == placements:  # nothing to move: the order shown is confirmed
                page.get_by_role("button", name="Keep this order").click()
            assert _rank_order(page) == wanted
            for rank, pid in enumerate(wanted, start=1):
                assert page.locator(f"#id-rank-{pid}").input_value() == str(rank)
                record.ranks[pid] = rank
        submitted = _visit_id(page)
        page.get_by_role("button", name="Next").click()
        if blocks == 3 and kind == "block":
            # The back button cannot reopen a saved page: it shows the current one. Go back
            # from the next page once loaded: a history call while the POST's navigation is
            # still committing can fail ("Not attached to an active page").
            page.wait_for_function(
                "v => document.readyState === 'complete' && document.querySelector('input[name=visit]')?.value !== v",
                arg=str(submitted),
            )
            page.go_back()
            assert _visit_id(page) != submitted
            assert _kind(page) in {"block", "check"}
    assert blocks == 24
    _finish_demographics(page, {"age": "34", "gender": "Woman", "state": "TX"})
    # Sent back to Prolific at once; the back button shows the code, and the page now stays.
    sent_to = back_from_the_panel(page, f"{live_server.url}/s/tide/done/", use_history=True)
    assert sent_to == "https://app.prolific.com/submissions/complete?cc=C1TIDE7Q"
    assert page.locator("[data-completion-code]").inner_text() == "C1TIDE7Q"
    assert page.get_by_role("link", name=re.compile("Return to Prolific")).get_attribute("href").endswith("cc=C1TIDE7Q")
    participant = record.assert_stored(external_id)
    answers = participant.demographics
    assert (participant.status, answers["age"], answers["gender"], answers["state"]) == ("completed", "34", "Woman", "TX")
    page.context.close()


@VARIANT
def test_it_completes_tide_on_a_phone_without_javascript_using_rank_selects(browser, live_server, tide):
    external_id = "e" * 24
    rng, record = random.Random(2), Record()
    page = new_page(browser, viewport=PHONE, javascript=False)
    page.goto(participant_link(live_server, external_id))
    _consent_and_start(page)
    blocks = 0
    while (kind := _kind(page)) in {"block", "check"}:
        if kind == "check":
            _answer_check(page, record)
        else:
            blocks += 1
            assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
            placements = _placements(page)
            for pid in placements:
                value = rng.randint(1, 5)
                page.check(f"#id-rate-{pid}-empathy-{value}")
                record.ratings[pid] = value
            ranks = list(range(1, 6))
            rng.shuffle(ranks)
            if blocks == 1:
                # A mistake first: the same rank twice is refused, and the ratings stay checked.
                page.select_option(f"#id-rank-{placements[0]}", "1")
                page.select_option(f"#id-rank-{placements[1]}", "1")
                page.get_by_role("button", name="Next").click()
                assert page.locator(".error-summary").is_visible()
                summary = page.locator(".error-summary li").all_inner_texts()
                twice = "Rank 1 is given to Response 1 and Response 2; give each response a different rank."
                assert summary[0] == twice and summary.count(twice) == 1  # then the three ranks not given
                assert page.is_checked(f"#id-rate-{placements[0]}-empathy-{record.ratings[placements[0]]}")
            for pid, rank in zip(placements, ranks):
                page.select_option(f"#id-rank-{pid}", str(rank))
                record.ranks[pid] = rank
        page.get_by_role("button", name="Next").click()
        if blocks == 5 and kind == "block":
            # Another browser (the same person re-opening the link) resumes at the same page.
            other = new_page(browser, viewport=PHONE, javascript=False)
            other.goto(participant_link(live_server, external_id))
            assert _visit_id(other) == _visit_id(page)
            if _kind(other) == "block":
                assert _placements(other) == _placements(page)
            other.context.close()
    assert blocks == 24
    _finish_demographics(page, {"age": "65", "race": "Prefer not to answer", "state": "Outside the US"})
    # Without JavaScript too: the redirect is a meta refresh.
    sent_to = back_from_the_panel(page, f"{live_server.url}/s/tide/done/")
    assert sent_to.endswith("cc=C1TIDE7Q")
    assert page.locator("[data-completion-code]").inner_text() == "C1TIDE7Q"
    participant = record.assert_stored(external_id)
    answers = participant.demographics
    assert (answers["age"], answers["race"], answers["state"]) == ("65", "Prefer not to answer", "Outside the US")
    page.context.close()


def _keyboard_rate(page, pid: int, value: int) -> None:
    tab_to(page, f"#id-rate-{pid}-empathy-1")
    page.keyboard.press("Space")
    for _ in range(value - 1):
        page.keyboard.press("ArrowRight")


def _keyboard_rank(page, wanted: list[int]) -> None:
    """Put the rows in the wanted order with the Move up buttons (Space presses); when the
    order shown is already the wanted one, confirm it with Keep this order."""
    moved = False
    for index, pid in enumerate(wanted):
        moves = _rank_order(page).index(pid) - index
        if moves <= 0:
            continue
        tab_to(page, f'[data-rank-row][data-placement="{pid}"] button[data-move="up"]')
        for _ in range(moves):
            page.keyboard.press("Space")
        moved = True
    if not moved:
        tab_to(page, "button[data-keep-order]")
        page.keyboard.press("Enter")


@VARIANT
def test_it_completes_tide_with_the_keyboard_only(browser, live_server, tide):
    external_id = "f" * 24
    rng, record = random.Random(3), Record()
    page = new_page(browser)
    page.goto(participant_link(live_server, external_id))
    tab_to(page, "#consent-accept")
    page.keyboard.press("Enter")
    page.wait_for_url("**/instructions/")
    tab_to(page, "button.primary")
    page.keyboard.press("Enter")
    page.wait_for_url("**/page/")
    blocks = 0
    while (kind := _kind(page)) in {"block", "check"}:
        visit_id = _visit_id(page)
        if kind == "check":
            value = _expected_check_value(page)
            tab_to(page, "#id-attention-1")
            page.keyboard.press("Space")
            for _ in range(value - 1):
                page.keyboard.press("ArrowRight")
            record.checks[visit_id] = value
        else:
            blocks += 1
            placements = _placements(page)
            for pid in placements:
                value = rng.randint(1, 5)
                _keyboard_rate(page, pid, value)
                record.ratings[pid] = value
            assert _rank_values(page) == [""] * 5  # the ranking starts unranked
            wanted = list(placements)
            rng.shuffle(wanted)
            _keyboard_rank(page, wanted)
            assert _rank_order(page) == wanted
            assert _rank_values(page) == ["1", "2", "3", "4", "5"]
            announced = page.locator("[data-rank-status]").inner_text()
            assert ("is now ranked" in announced) if wanted != placements else announced.startswith(
                "Ranked in the order shown")
            for rank, pid in enumerate(wanted, start=1):
                record.ranks[pid] = rank
        tab_to(page, "button.primary")
        with page.expect_navigation():
            page.keyboard.press("Enter")
        assert _kind(page) not in {"block", "check"} or _visit_id(page) != visit_id
    assert blocks == 24
    tab_to(page, "#id-age")
    page.keyboard.type("65")
    tab_to(page, "#id-state")
    page.keyboard.type("Ohio")
    tab_to(page, "button.primary")
    stub_the_panel(page)
    page.keyboard.press("Enter")
    back_from_the_panel(page, f"{live_server.url}/s/tide/done/")
    assert page.locator("[data-completion-code]").inner_text() == "C1TIDE7Q"
    participant = record.assert_stored(external_id)
    assert (participant.demographics["age"], participant.demographics["state"]) == ("65", "OH")
    page.context.close()


@VARIANT
def test_with_javascript_the_ranking_starts_unranked_and_a_submit_without_ranks_is_refused(browser, live_server,
                                                                                          tide):
    page = new_page(browser)
    participant = start_survey(page, live_server, "ab" * 12)
    placements, visit_id = _placements(page), _visit_id(page)
    # Nothing is ranked until the participant acts: the selects are empty and the page says so.
    assert _rank_values(page) == [""] * 5
    assert _rank_order(page) == placements
    assert page.locator("[data-rank-note]").inner_text().startswith("Not ranked yet.")
    for pid in placements:
        page.locator(f'label[for="id-rate-{pid}-empathy-4"]').click()

    # Submitting without ranking: one error per response, linked to its select; nothing is saved.
    page.get_by_role("button", name="Next").click()
    page.locator("#error-summary").wait_for()
    assert page.evaluate("document.activeElement.id") == "error-summary"
    summary = page.locator("#error-summary li").all_inner_texts()
    assert summary == [f"Please give Response {n} a rank." for n in range(1, 6)]
    assert _visit_id(page) == visit_id and _rank_values(page) == [""] * 5
    assert page.locator("[data-rank-note]").inner_text().startswith("Not ranked yet.")
    assert page.is_checked(f"#id-rate-{placements[0]}-empathy-4")  # the ratings given stay checked
    assert not ItemPlacement.objects.filter(visit_id=visit_id, rank__isnull=False).exists()
    assert not Rating.objects.filter(placement__visit_id=visit_id).exists()
    assert BlockVisit.objects.get(pk=visit_id).submitted_at is None

    # Ranking by keyboard with the buttons (Response 3 up twice), then submitting, saves those ranks.
    tab_to(page, f'[data-rank-row][data-placement="{placements[2]}"] button[data-move="up"]')
    page.keyboard.press("Enter")
    page.keyboard.press("Enter")
    wanted = [placements[2], placements[0], placements[1], placements[3], placements[4]]
    assert _rank_order(page) == wanted and _rank_values(page) == ["1", "2", "3", "4", "5"]
    assert page.locator("[data-rank-status]").inner_text() == "Response 3 is now ranked 1 of 5."
    assert page.locator("[data-rank-note]").inner_text().startswith("Ranked:")
    with page.expect_navigation():
        page.get_by_role("button", name="Next").click()
    assert _visit_id(page) != visit_id
    ranks = dict(ItemPlacement.objects.filter(visit_id=visit_id).values_list("pk", "rank"))
    assert ranks == {pid: rank for rank, pid in enumerate(wanted, start=1)}

    # The next block: the order shown is kept deliberately, with Keep this order.
    if _kind(page) == "block":
        shown, next_visit = _placements(page), _visit_id(page)
        assert _rank_values(page) == [""] * 5
        for pid in shown:
            page.locator(f'label[for="id-rate-{pid}-empathy-3"]').click()
        tab_to(page, "button[data-keep-order]")
        page.keyboard.press("Enter")
        assert _rank_values(page) == ["1", "2", "3", "4", "5"]
        assert page.locator("[data-rank-status]").inner_text() == "Ranked in the order shown: Response 1 first, " \
                                                                  "Response 5 last."
        with page.expect_navigation():
            page.get_by_role("button", name="Next").click()
        ranks = dict(ItemPlacement.objects.filter(visit_id=next_visit).values_list("pk", "rank"))
        assert ranks == {pid: rank for rank, pid in enumerate(shown, start=1)}
    assert participant.visits.filter(submitted_at__isnull=False).count() >= 1
    page.context.close()
