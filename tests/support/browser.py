"""Playwright + Debian chromium for browser tests (shared by every browser test module).

Use it by importing the fixtures into a test module::

    from tests.support.browser import browser, desktop_page  # noqa: F401  (pytest fixtures)

Tests are skipped when chromium is missing, unless REQUIRE_BROWSER=1 (CI), in
which case they fail. Pages come from pytest-django's ``live_server``.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from bots.personas import expected_check_value
from surveys import selectors, services
from surveys.models import Participant
from tests.support.paths import ROOT

# Playwright's sync API runs an event loop in this thread; the tests still read
# the database directly between steps, which Django would otherwise refuse.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

CHROMIUM = os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking"]
DESKTOP = {"width": 1280, "height": 900}
PHONE = {"width": 375, "height": 667}
TIMEOUT_MS = 10_000


def chromium_missing_reason() -> str | None:
    if not (os.path.exists(CHROMIUM) or shutil.which(CHROMIUM)):
        return f"chromium not found at {CHROMIUM}"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the playwright package is not installed"
    return None


# Each test module that imports ``browser`` gets its own session-scoped fixture, and
# Playwright's sync API allows one instance per thread: the modules share this one.
_SHARED: dict = {}


@pytest.fixture(scope="session")
def browser() -> Iterator:
    reason = chromium_missing_reason()
    if reason:
        if os.environ.get("REQUIRE_BROWSER") == "1":
            pytest.fail(f"REQUIRE_BROWSER=1 but {reason}")
        pytest.skip(reason)
    if not _SHARED:
        from playwright.sync_api import sync_playwright

        playwright = sync_playwright().start()
        instance = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        _SHARED.update(playwright=playwright, browser=instance, users=0)
    _SHARED["users"] += 1
    try:
        yield _SHARED["browser"]
    finally:
        _SHARED["users"] -= 1
        if _SHARED["users"] == 0:
            _SHARED["browser"].close()
            _SHARED["playwright"].stop()
            _SHARED.clear()


PANEL = "https://app.prolific.com/"


def new_page(browser, *, viewport: dict | None = None, javascript: bool = True, **context_options):
    """A page in a fresh context (its own cookies): a new browser, as far as the site knows."""
    context = browser.new_context(
        viewport=viewport or DESKTOP, java_script_enabled=javascript, **context_options
    )
    context.set_default_timeout(TIMEOUT_MS)
    return context.new_page()


def sign_in(page, base_url: str, username: str, password: str) -> None:
    """Sign ``page`` in as a researcher through the login form."""
    page.goto(f"{base_url}/accounts/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", password)
    page.click("button[type=submit], input[type=submit]")


def stub_the_panel(page) -> None:
    """Answer for the panel that a finisher is sent back to (tests stay offline). Call it just
    before finishing: with a route, chromium holds every request for Playwright to look at,
    which slows the pages after it (and scripts run later than tests expect)."""
    page.context.route(f"{PANEL}**", lambda route: route.fulfill(
        status=200, content_type="text/html", body="<!DOCTYPE html><title>Panel (test stub)</title><p>Recorded.</p>"))


def back_from_the_panel(page, done_url: str, *, use_history: bool = False) -> str:
    """After Finish (``stub_the_panel`` first) the completion page sends the browser on to the
    panel at once: wait for it there, then return to the completion page (with the back button,
    or by its address), which now stays. Returns the panel URL the browser was sent to."""
    page.wait_for_url(f"{PANEL}**")
    sent_to = page.url
    if use_history:
        page.go_back()
    else:
        page.goto(done_url)
    page.locator("[data-completion-code]").wait_for()
    assert page.url == done_url
    return sent_to


def csp_violations(page, refused: list[str] | None = None) -> list[str]:
    """The Content-Security-Policy violations chromium reports on the page's console from
    now on (a style or script the policy refused), appended to ``refused`` as they come."""
    refused = [] if refused is None else refused
    page.on("console", lambda message: refused.append(message.text) if "Content Security Policy" in message.text
            else None)
    return refused


@pytest.fixture
def desktop_page(browser) -> Iterator:
    page = new_page(browser)
    try:
        yield page
    finally:
        page.context.close()


def tab_to(page, selector: str, *, limit: int = 150) -> None:
    """Move the keyboard focus to ``selector`` with Tab / Shift+Tab only (no clicks)."""
    target = page.locator(selector)
    target.wait_for(state="attached")
    for _ in range(limit):
        position = target.evaluate(
            """el => {
                const active = document.activeElement;
                if (active === el) return 0;
                if (!active || active === document.body) return 1;
                return active.compareDocumentPosition(el) & Node.DOCUMENT_POSITION_FOLLOWING ? 1 : -1;
            }"""
        )
        if position == 0:
            return
        page.keyboard.press("Tab" if position > 0 else "Shift+Tab")
    raise AssertionError(f"could not reach {selector} with the keyboard")


# --- getting a participant to a page quickly ---------------------------------------------


def participant_link(live_server, external_id: str) -> str:
    """The panel link into the TIDE study on the live server."""
    return f"{live_server.url}/s/tide/?PROLIFIC_PID={external_id}&STUDY_ID=st&SESSION_ID=se"


def answer_until(participant: Participant, *, stop_at: str | None) -> None:
    """Submit the participant's pages through the services until a page of kind ``stop_at``
    ("check") is current, or all of them (``stop_at=None``)."""
    study = participant.study
    while True:
        state = selectors.participant_state(participant=participant)
        if state.current_visit_id is None:
            return
        page = selectors.visit_page_get(visit_id=state.current_visit_id, study=study)
        if stop_at == "check" and page.is_check:
            return
        services.visit_mark_shown(visit_id=page.visit.pk)
        if page.is_check:
            answers = services.PageAnswers(
                attention_value=expected_check_value(page.visit.attention_check.text, page.dimensions[0].points)
            )
        else:
            answers = services.PageAnswers(by_type={
                "rating": {(p.pk, d.pk): 3 for p in page.placements for d in page.dimensions},
                "ranking": {p.pk: p.position for p in page.placements},
            })
        services.block_answer_submit(participant_id=participant.pk, visit_id=page.visit.pk, answers=answers)


def start_survey(page, live_server, external_id: str) -> Participant:
    """Enter TIDE in ``page``, consent and read the instructions; returns the participant (on the first block)."""
    page.goto(participant_link(live_server, external_id))
    page.get_by_role("button", name="I agree to take part").click()
    page.get_by_role("button", name="Start").click()
    page.wait_for_url("**/page/")
    return Participant.objects.get(external_id=external_id)


# --- screenshots for the README (SAVE_SCREENSHOTS=1, see bin/screenshots) ----------------

SCREENSHOTS_DIR = ROOT / "docs" / "screenshots"


def saving_screenshots() -> bool:
    return os.environ.get("SAVE_SCREENSHOTS") == "1"


def save_screenshot(page, name: str, *, full_page: bool = False, locator=None) -> Path | None:
    """Write docs/screenshots/<name>.png when SAVE_SCREENSHOTS=1 (else do nothing).

    Any browser test may call it (researcher dashboard, regional map...): pass the
    page, or a ``locator`` to capture one element. Keep each PNG under ~300 KB: prefer
    the viewport or an element to ``full_page`` on long pages.
    """
    if not saving_screenshots():
        return None
    SCREENSHOTS_DIR.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS_DIR / f"{name}.png"
    # No blinking caret or running transition in the committed images.
    options = {"path": str(path), "animations": "disabled", "caret": "hide"}
    if locator is not None:
        locator.screenshot(**options)
    else:
        page.screenshot(full_page=full_page, **options)
    return path
