"""Accessibility and lightness of the participant pages, in Debian chromium (WCAG 2.2 AA).

axe-core (bundled by axe-playwright-python) audits every participant page: no
serious or critical violation is allowed; the minor and moderate ones are printed
(``-s``) and raised as warnings (they show in the warnings summary). What axe cannot
see is asserted directly: focus moved to the error summary, the ranking's live
announcements, keyboard moves, reflow at 320 px and at 200 % zoom, 24 px targets,
the readable measure, the sticky message, page weight and Fast-3G first paint.

200 % zoom is emulated the way the browser does it: a 1280x800 window zoomed to
200 % lays pages out in 640x400 CSS pixels at 2 device pixels per CSS pixel, so
the test uses a 640x400 viewport with ``device_scale_factor=2``.
"""

from __future__ import annotations

import re
import warnings

import pytest

from surveys.models import Participant
from tests.support.browser import (  # noqa: F401  (browser is a fixture)
    PHONE,
    answer_until,
    back_from_the_panel,
    browser,
    csp_violations,
    new_page,
    participant_link,
    start_survey,
    stub_the_panel,
    tab_to,
)

pytestmark = [
    pytest.mark.browser,
    # Checks of every page with axe-core and by measure, not journeys: bin/test --all (CI) runs them.
    pytest.mark.slow(reason="accessibility audits of every page in chromium; not one of the default journeys"),
    pytest.mark.django_db(transaction=True),
]

SERIOUS = {"serious", "critical"}
ZOOM_200 = {"viewport": {"width": 640, "height": 400}, "device_scale_factor": 2}
NARROW = {"width": 320, "height": 640}
DESKTOP_800 = {"width": 1280, "height": 800}
# The DevTools "Fast 3G" preset (Chromium's front_end/core/sdk/NetworkManager.ts):
# 1.6 Mbit/s down and 750 kbit/s up, each x 0.9; round trip 150 ms x 3.75.
FAST_3G = {
    "offline": False,
    "downloadThroughput": 1.6 * 1000 * 1000 / 8 * 0.9,  # 180 000 bytes/s
    "uploadThroughput": 750 * 1000 / 8 * 0.9,  # 84 375 bytes/s
    "latency": 150 * 3.75,  # 562.5 ms
}
PAGE_WEIGHT_BUDGET = 100 * 1024


# --- axe ------------------------------------------------------------------------------


def audit(page, name: str) -> list[str]:
    """Run axe-core on the page; print every finding; return the serious/critical ones."""
    from axe_playwright_python.sync_playwright import Axe

    tags = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "wcag22aa", "best-practice"]
    results = Axe().run(page, options={"runOnly": {"type": "tag", "values": tags}, "resultTypes": ["violations"]})
    blocking, minor = [], []
    for violation in results.response["violations"]:
        targets = ", ".join(" ".join(node["target"]) for node in violation["nodes"][:4])
        line = f"{name}: {violation['id']} ({violation['impact']}, {len(violation['nodes'])} nodes: {targets}) - {violation['help']}"
        (blocking if violation["impact"] in SERIOUS else minor).append(line)
    print(f"\naxe {name}: {len(blocking)} serious/critical, {len(minor)} minor/moderate")
    for line in blocking + minor:
        print("  " + line)
    for line in minor:
        warnings.warn(f"axe minor/moderate: {line}", UserWarning, stacklevel=2)
    return blocking


# --- getting to each page quickly --------------------------------------------------------


def _fill_block(page) -> None:
    """Answer the block on screen (every rating 4, ranks in display order) without submitting."""
    page.evaluate(
        """() => {
            document.querySelectorAll('.scale-options').forEach(g => g.querySelectorAll('input')[3].checked = true);
            document.querySelectorAll('[data-rank-row] select').forEach((s, i) => s.value = String(i + 1));
        }"""
    )


# --- the audit of every page -----------------------------------------------------------------


def test_it_has_no_serious_axe_violations_on_any_participant_page(browser, live_server, tide):
    blocking = []
    page = new_page(browser)
    # Each page inlines site.css, admitted by its hash in the CSP: chromium must refuse nothing.
    refused = csp_violations(page)
    page.goto(f"{live_server.url}/s/tide/?PROLIFIC_PID=bad%20id")
    assert "incomplete" in page.title()
    blocking += audit(page, "entry error (bad link)")

    page.goto(participant_link(live_server, "a" * 24))
    blocking += audit(page, "consent")
    page.get_by_role("button", name="I agree to take part").click()
    blocking += audit(page, "instructions")
    page.get_by_role("button", name="Start").click()
    page.wait_for_url("**/page/")
    blocking += audit(page, "block")

    page.get_by_role("button", name="Next").click()
    page.locator("#error-summary").wait_for()
    blocking += audit(page, "block with errors")

    participant = Participant.objects.get(external_id="a" * 24)
    answer_until(participant, stop_at="check")
    page.goto(f"{live_server.url}/s/tide/page/")
    assert page.locator("form[data-page=check]").count() == 1
    blocking += audit(page, "attention check")
    page.get_by_role("button", name="Next").click()
    page.locator("#error-summary").wait_for()
    blocking += audit(page, "attention check with errors")

    page.goto(f"{live_server.url}/s/tide/exit/")
    blocking += audit(page, "exit")

    answer_until(participant, stop_at=None)
    page.goto(f"{live_server.url}/s/tide/about-you/")
    blocking += audit(page, "demographics")
    stub_the_panel(page)
    page.get_by_role("button", name="Finish").click()
    back_from_the_panel(page, f"{live_server.url}/s/tide/done/")
    blocking += audit(page, "completion")
    page.context.close()

    tide.target_completions = 1
    tide.save()
    newcomer = new_page(browser)
    csp_violations(newcomer, refused)
    newcomer.goto(participant_link(live_server, "b" * 24))
    assert "full" in newcomer.title()
    blocking += audit(newcomer, "study full")
    newcomer.goto(f"{live_server.url}/s/tide/page/")
    assert "session has ended" in newcomer.title()
    blocking += audit(newcomer, "session expired")
    newcomer.context.close()
    assert blocking == []
    assert refused == []


# --- what axe cannot check --------------------------------------------------------------------


def test_it_moves_focus_to_an_error_summary_linked_to_the_fields(browser, live_server, tide):
    page = new_page(browser)
    start_survey(page, live_server, "c" * 24)
    # Each response's scale is a fieldset whose legend names the response; labels are clickable.
    legends = page.locator("section.response fieldset legend").all_inner_texts()
    assert len(legends) == 5 and all(re.match(r"Response \d: ", text) for text in legends)
    first = page.locator("section.response").first
    first.locator("label.scale-option").nth(1).click()
    assert first.locator("input[type=radio]").nth(1).is_checked()

    page.get_by_role("button", name="Next").click()
    page.locator("#error-summary").wait_for()
    assert page.evaluate("document.activeElement.id") == "error-summary"
    outline = page.evaluate("getComputedStyle(document.activeElement).outlineStyle")
    assert outline != "none"
    # Every error is summarised, linked to its field, and described on the field itself.
    links = page.locator("#error-summary a")
    assert links.count() == 9  # four responses unrated, five unranked (rankings start unranked)
    for href in links.evaluate_all("els => els.map(a => a.getAttribute('href'))"):
        assert page.locator(href).count() == 1
    for fieldset in page.locator("fieldset.has-error").all():
        described = fieldset.get_attribute("aria-describedby")
        assert page.locator(f"#{described}").inner_text().startswith("Error:")
    for select in page.locator("[data-rank-row] select[aria-invalid=true]").all():
        ids = select.get_attribute("aria-describedby").split()
        assert any(page.locator(f"#{i}").inner_text().startswith("Error:") for i in ids)
    # Following a summary link puts the keyboard focus on the field.
    links.first.click()
    assert page.evaluate("document.activeElement.type") == "radio"
    page.context.close()


def test_it_ranks_with_the_keyboard_alone_and_announces_each_move(browser, live_server, tide):
    page = new_page(browser)
    start_survey(page, live_server, "d" * 24)
    order = lambda: page.locator("[data-rank-row]").evaluate_all("els => els.map(e => +e.dataset.number)")  # noqa: E731
    status = page.locator("[data-rank-status]")
    assert status.get_attribute("aria-live") == "polite"
    assert order() == [1, 2, 3, 4, 5]
    values = lambda: page.locator("[data-rank-row] select").evaluate_all("els => els.map(s => s.value)")  # noqa: E731
    assert values() == [""] * 5  # unranked until the first move

    tab_to(page, '[data-rank-row][data-number="1"] button[data-move="down"]')
    page.keyboard.press("Enter")
    assert order() == [2, 1, 3, 4, 5]
    assert status.inner_text() == "Response 1 is now ranked 2 of 5."
    # The focus stays on the button that was pressed, in its row's new place.
    assert page.evaluate("document.activeElement.closest('[data-rank-row]').dataset.number") == "1"
    page.keyboard.press("Space")
    assert order() == [2, 3, 1, 4, 5]
    assert status.inner_text() == "Response 1 is now ranked 3 of 5."

    tab_to(page, '[data-rank-row][data-number="5"] button[data-move="up"]')
    page.keyboard.press("Enter")
    assert order() == [2, 3, 1, 5, 4]
    assert status.inner_text() == "Response 5 is now ranked 4 of 5."
    # The select fallback, by keyboard too: giving Response 4 rank 1 moves its row first.
    tab_to(page, '[data-rank-row][data-number="4"] select')
    page.keyboard.press("1")  # type-ahead on the closed select picks the option "1"
    assert order()[0] == 4
    assert status.inner_text() == "Response 4 is now ranked 1 of 5."
    ranks = page.locator("[data-rank-row] select").evaluate_all("els => els.map(s => s.value)")
    assert ranks == ["1", "2", "3", "4", "5"]
    page.context.close()


def _no_horizontal_scroll(page) -> None:
    widths = page.evaluate("[document.documentElement.scrollWidth, document.documentElement.clientWidth]")
    assert widths[0] <= widths[1], widths


@pytest.mark.slow(reason="an accessibility measure in chromium beyond the default journeys")
def test_it_reflows_at_320_px_and_at_200_percent_zoom(browser, live_server, tide):
    for name, options in (("320 px", {"viewport": NARROW}), ("200 % zoom", ZOOM_200)):
        page = new_page(browser, **options)
        participant = start_survey(page, live_server, ("e" if name == "320 px" else "f") * 24)
        _no_horizontal_scroll(page)
        page.get_by_role("button", name="Next").click()
        page.locator("#error-summary").wait_for()
        _no_horizontal_scroll(page)
        # No sticky message on a small or zoomed screen: it would cover half of it.
        assert page.evaluate("getComputedStyle(document.querySelector('[data-scenario]')).position") == "static"
        assert page.locator(".scenario-reminder summary").first.is_visible()
        answer_until(participant, stop_at="check")
        page.goto(f"{live_server.url}/s/tide/page/")
        _no_horizontal_scroll(page)
        answer_until(participant, stop_at=None)
        page.goto(f"{live_server.url}/s/tide/about-you/")
        _no_horizontal_scroll(page)
        stub_the_panel(page)
        page.get_by_role("button", name="Finish").click()
        back_from_the_panel(page, f"{live_server.url}/s/tide/done/")
        _no_horizontal_scroll(page)
        page.context.close()


def _small_targets(page) -> list[str]:
    """Every visible input, button, select, textarea, summary and link smaller than 24x24 CSS px
    (a radio button counts its label's box, which is what takes the click)."""
    return page.evaluate(
        """() => {
            const small = [];
            for (const el of document.querySelectorAll('a[href], button, input:not([type=hidden]), select, textarea, summary')) {
                if (el.classList.contains('skip-link') && document.activeElement !== el) continue;
                const target = (el.type === 'radio' || el.type === 'checkbox') && el.labels.length ? el.labels[0] : el;
                const box = target.getBoundingClientRect();
                if (box.width === 0 && box.height === 0) continue;  // not rendered
                if (box.width < 24 || box.height < 24)
                    small.push(`${el.outerHTML.slice(0, 80)} ${box.width.toFixed(1)}x${box.height.toFixed(1)}`);
            }
            return small;
        }"""
    )


def test_every_target_on_a_block_page_is_at_least_24_px(browser, live_server, tide):
    for viewport in (DESKTOP_800, PHONE):
        page = new_page(browser, viewport=viewport)
        start_survey(page, live_server, ("1" if viewport is PHONE else "2") * 24)
        assert _small_targets(page) == []
        page.keyboard.press("Tab")  # the skip link, now on screen
        assert page.evaluate("document.activeElement.className") == "skip-link"
        assert _small_targets(page) == []
        page.get_by_role("button", name="Next").click()
        page.locator("#error-summary").wait_for()
        assert _small_targets(page) == []
        page.context.close()


def test_responses_have_a_readable_measure_and_the_message_stays_in_view(browser, live_server, tide):
    page = new_page(browser, viewport=DESKTOP_800)
    start_survey(page, live_server, "3" * 24)
    # Characters on each full line of the longest response (every line but its last).
    per_line = page.evaluate(
        """() => {
            const texts = [...document.querySelectorAll('.response-text')];
            const p = texts.reduce((a, b) => b.textContent.length > a.textContent.length ? b : a);
            const lines = new Map();
            const walker = document.createTreeWalker(p, NodeFilter.SHOW_TEXT);
            const range = document.createRange();
            for (let node = walker.nextNode(); node; node = walker.nextNode()) {
                for (let i = 0; i < node.length; i++) {
                    range.setStart(node, i); range.setEnd(node, i + 1);
                    const rect = range.getClientRects()[0];
                    if (rect) { const top = Math.round(rect.top); lines.set(top, (lines.get(top) || 0) + 1); }
                }
            }
            const counts = [...lines.entries()].sort((a, b) => a[0] - b[0]).map(e => e[1]).slice(0, -1);
            return counts.sort((a, b) => a - b)[Math.floor(counts.length / 2)];
        }"""
    )
    print(f"\nlongest response: a median of {per_line} characters per line at 1280 px")
    assert 55 <= per_line <= 80
    gaps = page.locator("section.response").evaluate_all(
        "els => els.slice(1).map((e, i) => e.getBoundingClientRect().top - els[i].getBoundingClientRect().bottom)"
    )
    assert min(gaps) >= 24
    # While rating the last response (reached by keyboard), the message is on screen above it.
    tab_to(page, "section.response:last-of-type input[value='1']")
    scenario = page.locator("[data-scenario]").bounding_box()
    focused = page.evaluate("(() => { const r = document.activeElement.getBoundingClientRect(); return [r.top, r.bottom]; })()")
    assert -1 <= scenario["y"] <= 1
    assert focused[0] >= scenario["y"] + scenario["height"], "the sticky message covers the focused control"
    assert focused[1] <= DESKTOP_800["height"]
    assert not page.locator(".scenario-reminder").first.is_visible()
    page.context.close()


def test_progress_shows_time_left_and_a_returning_participant_is_welcomed_back(browser, live_server, tide):
    page = new_page(browser)
    start_survey(page, live_server, "4" * 24)
    detail = page.locator("[data-time-left]").inner_text()
    assert detail == "0 of 24 blocks done · about 30 minutes left (at a typical pace)"
    assert page.locator("[data-welcome-back]").count() == 0
    _fill_block(page)
    page.get_by_role("button", name="Next").click()
    page.wait_for_load_state()
    detail = page.locator("[data-time-left]").inner_text()
    assert detail.startswith("1 of 24 blocks done · ") and detail.endswith("(at your pace so far)")
    assert page.locator("[data-welcome-back]").count() == 0
    # The same person opens the study link again in another browser, after a break.
    other = new_page(browser)
    other.goto(participant_link(live_server, "4" * 24))
    note = other.locator("[data-welcome-back]")
    on_check = other.locator("form[data-page=check]").count() == 1  # a check may follow block 1
    where = "the page where you left off" if on_check else "block 2 of 24"
    assert note.inner_text() == f"Welcome back. Your answers so far are saved; you are on {where}."
    assert note.get_attribute("role") == "status"
    other.reload()
    assert other.locator("[data-welcome-back]").count() == 0
    other.context.close()
    page.context.close()


# --- light pages ------------------------------------------------------------------------------


@pytest.mark.slow(reason="an accessibility measure in chromium beyond the default journeys")
def test_a_block_page_is_light_and_paints_fast_on_fast_3g(browser, live_server, tide):
    page = new_page(browser)
    start_survey(page, live_server, "5" * 24)
    cdp = page.context.new_cdp_session(page)
    cdp.send("Network.enable")
    # As on a participant's first block: nothing cached.
    cdp.send("Network.clearBrowserCache")
    cdp.send("Network.setCacheDisabled", {"cacheDisabled": True})
    cdp.send("Network.emulateNetworkConditions", FAST_3G)
    sizes: dict[str, int] = {}
    urls: dict[str, str] = {}
    cdp.on("Network.responseReceived", lambda e: urls.__setitem__(e["requestId"], e["response"]["url"]))
    cdp.on("Network.loadingFinished", lambda e: sizes.__setitem__(e["requestId"], e["encodedDataLength"]))
    refused = csp_violations(page)
    page.goto(f"{live_server.url}/s/tide/page/", wait_until="load")
    page.wait_for_timeout(100)  # the last loadingFinished events
    timing = page.evaluate(
        """() => {
            const paint = performance.getEntriesByName('first-contentful-paint')[0];
            const nav = performance.getEntriesByType('navigation')[0];
            return {fcp: paint ? paint.startTime : null, load: nav.loadEventEnd};
        }"""
    )
    loaded = {urls.get(rid, rid): size for rid, size in sizes.items()}
    total = sum(loaded.values())
    print(f"\nblock page on Fast 3G: {total} bytes in {len(loaded)} responses; "
          f"first contentful paint {timing['fcp']:.0f} ms, load event {timing['load']:.0f} ms")
    for url, size in sorted(loaded.items(), key=lambda kv: -kv[1]):
        print(f"  {size:>7} {url.replace(live_server.url, '')}")
    assert not any("plotly" in url for url in loaded)
    assert not any(re.search(r"\.(woff2?|ttf|otf)(\?|$)", url) for url in loaded)
    assert total < PAGE_WEIGHT_BUDGET
    # One round trip: site.css is inlined (admitted by its CSP hash), the scripts are
    # deferred and the favicon is a data: URL, so nothing else blocks the first paint.
    assert not any(url.endswith(".css") for url in loaded)
    assert refused == []
    assert page.evaluate("getComputedStyle(document.querySelector('.skip-link')).position") == "absolute"
    assert timing["fcp"] < 1000
    page.context.close()



# --- the researcher's chart pages -------------------------------------------------------------


def test_the_results_page_has_no_serious_axe_violation_and_its_charts_fit_a_phone(browser, live_server, filled, owner,
                                                                                 monkeypatch, tmp_path):
    from tests.support.researcher import PASSWORD, QUICK_ANALYSES, finished_run, narrow_analyses

    # Every figure kind of the page: rating bars, win grid, maps, position bias.
    narrow_analyses(monkeypatch, (*QUICK_ANALYSES, "position_bias"))
    run = finished_run(filled)
    for viewport in (PHONE, {"width": 1280, "height": 900}):
        page = new_page(browser, viewport=viewport)
        page.goto(f"{live_server.url}/accounts/login/")
        page.fill("input[name=username]", "owner")
        page.fill("input[name=password]", PASSWORD)
        page.click("button[type=submit], input[type=submit]")
        page.goto(f"{live_server.url}/studies/{filled.slug}/runs/{run.pk}/")
        page.wait_for_selector("#fig-position_bias svg.main-svg")
        page.wait_for_selector("#fig-rating_means .modebar-container", state="attached")
        name = f"results-{viewport['width']}"
        page.locator("#fig-rating_means svg.main-svg").first.hover(position={"x": 60, "y": 150})
        page.screenshot(path=str(tmp_path / f"{name}.png"), full_page=True)
        blocking = audit(page, name)
        assert not [line for line in blocking if "nested-interactive" in line], blocking
        assert not blocking, blocking
        # The rating charts' y axis is the rating scale, read by plotly from our figure.
        y_range = page.evaluate("() => document.getElementById('fig-rating_means').layout.yaxis.range")
        dimensions = list(filled.dimensions.all())
        assert y_range[0] == min(d.scale_min for d in dimensions)
        # One download per format under each figure, each named for its format.
        labels = page.locator("#fig-rating_means + figcaption .download").all_inner_texts()
        formats = ["Data (CSV)", "Image (PNG)", "Vector (SVG)"]
        assert len(labels) == len(formats) and all(label.endswith(f) for label, f in zip(labels, formats)), labels
        assert page.locator("#fig-rating_means [data-title='Download plot as a png']").count() == 0
        if viewport is PHONE:
            _no_horizontal_scroll(page)
            # The win grid on a phone: each cell shows its winner's mark (not the means, which overlapped),
            # and the colour key is a legend inside the figure (the end of a title was cut off).
            page.locator("#fig-win_grid").scroll_into_view_if_needed()
            page.wait_for_selector("#fig-win_grid .legendtext")
            texts = page.eval_on_selector_all("#fig-win_grid svg text", "nodes => nodes.map(n => n.textContent)")
            assert {"▲", "▼", "="} & set(texts) and not [t for t in texts if " / " in t], texts
            grid = page.locator("#fig-win_grid").bounding_box()
            for entry in page.locator("#fig-win_grid .legendtext").all():
                box = entry.bounding_box()
                assert grid["x"] <= box["x"] and box["x"] + box["width"] <= grid["x"] + grid["width"], (box, grid)
            assert len(page.locator("#fig-win_grid .legendtext").all()) == 3
            # The exclusion flow scrolls inside its own box on the dashboard; the page does not.
            page.goto(f"{live_server.url}/studies/{filled.slug}/")
            page.wait_for_selector("#chart-positions svg.main-svg")
            page.screenshot(path=str(tmp_path / "dashboard-375.png"), full_page=True)
            _no_horizontal_scroll(page)
            assert not audit(page, "dashboard-375")
            # The heatmap shows observed - expected on a scale centred on 0, at least +-2 wide.
            heatmap = page.evaluate("() => document.getElementById('chart-positions').data[0]")
            assert heatmap["zmid"] == 0 and heatmap["zmin"] == -heatmap["zmax"] and heatmap["zmax"] >= 2
            for row, custom in zip(heatmap["z"], heatmap["customdata"]):
                for deviation, (observed, expected) in zip(row, custom):
                    assert deviation == pytest.approx(observed - expected, abs=1e-3)
            page.goto(f"{live_server.url}/studies/{filled.slug}/runs/{run.pk}/")
            page.wait_for_selector("#fig-rating_means svg.main-svg")
            # The mode bar sits above the plot area, not over it.
            bar = page.locator("#fig-rating_means .modebar").bounding_box()
            plot = page.locator("#fig-rating_means svg.main-svg").first.bounding_box()
            assert bar["y"] + bar["height"] <= plot["y"] + 1, (bar, plot)
        page.context.close()


def test_the_recruitment_pages_have_no_serious_axe_violations(browser, live_server, owner, settings):
    from tests.support.researcher import PASSWORD
    from tests.support.studies import load_fixture

    settings.OPEN_LINK_STARTS_PER_HOUR = 1
    invited = load_fixture("counselor.json", recruitment={"mode": "invited"})
    invited.owners.add(owner)
    load_fixture("most_least.json", recruitment={"mode": "open"})
    load_fixture("tide.json")
    blocking = []
    researcher = new_page(browser)
    researcher.goto(f"{live_server.url}/accounts/login/")
    researcher.fill("input[name=username]", "owner")
    researcher.fill("input[name=password]", PASSWORD)
    researcher.click("button[type=submit], input[type=submit]")
    researcher.goto(f"{live_server.url}/studies/counselor/raters/")
    researcher.fill("#names", "Ann, Bo")
    researcher.get_by_role("button", name="Create links").click()
    link = researcher.locator("[data-rater-link]").first.input_value()
    blocking += audit(researcher, "rater links, new ones shown")
    researcher.get_by_role("button", name="Revoke the link of Ann").click()
    blocking += audit(researcher, "rater links, one revoked")
    visitor = new_page(browser)
    for url, title, name in [
        (link, "withdrawn", "rater link withdrawn"),
        (f"{live_server.url}/s/counselor/?invite=nope", "not valid", "rater link not valid"),
        (f"{live_server.url}/s/counselor/", "invitation", "invitation only"),
        (f"{live_server.url}/s/tide/notice/time-up/", "time ran out", "time ran out"),
    ]:
        visitor.goto(url)
        assert title in visitor.title(), (name, visitor.title())
        blocking += audit(visitor, name)
    for _ in range(2):  # the second new start from this address is one too many
        open_visitor = new_page(browser)
        open_visitor.goto(f"{live_server.url}/s/most-least/")
    assert "try again later" in open_visitor.title()
    blocking += audit(open_visitor, "too many new starts")
    assert blocking == []


def test_the_studies_page_fits_a_phone_and_the_api_docs_have_no_serious_axe_violation(browser, live_server, owner,
                                                                                      most_least, pairwise):
    from tests.support.researcher import PASSWORD

    for study in (most_least, pairwise):  # long titles, a "demo content" tag
        study.owners.add(owner)
    page = new_page(browser, viewport=PHONE)
    page.goto(f"{live_server.url}/accounts/login/")
    page.fill("input[name=username]", "owner")
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit], input[type=submit]")
    page.goto(f"{live_server.url}/studies/")
    assert page.locator("table.data tbody tr").count() == 2
    _no_horizontal_scroll(page)
    blocking = audit(page, "studies-375")
    page.goto(f"{live_server.url}/api/docs/")
    page.wait_for_selector(".opblock-tag")  # Swagger UI has drawn the endpoints
    blocking += audit(page, "api-docs")
    page.context.close()
    assert blocking == []
