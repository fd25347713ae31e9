"""The New study page in chromium: a researcher uploads model outputs, reads the definition, creates the
draft; the page passes axe and our Content-Security-Policy (issue 25, item 1)."""

from __future__ import annotations

import pytest

from surveys.models import Study
from tests.support.browser import browser, csp_violations, new_page, sign_in  # noqa: F401  (browser is a fixture)
from tests.support.outputs_files import csv_bytes, outputs_rows
from tests.support.researcher import PASSWORD
from tests.test_browser_a11y import audit

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow(reason="browser: the researcher's New study page on desktop and phone"),
    pytest.mark.django_db(transaction=True),
]


@pytest.mark.parametrize("viewport", [None, {"width": 375, "height": 740}], ids=["desktop", "phone"])
def test_a_researcher_builds_a_study_from_outputs_in_the_browser(browser, live_server, owner, viewport):
    page = new_page(browser, **({"viewport": viewport} if viewport else {}))
    refused = csp_violations(page)
    sign_in(page, live_server.url, "owner", PASSWORD)
    page.goto(f"{live_server.url}/studies/")
    page.get_by_role("link", name="New study from model outputs").click()
    page.get_by_label("Model outputs").set_input_files(
        files=[{"name": "outputs.csv", "mimeType": "text/csv", "buffer": csv_bytes(outputs_rows(5))}])
    page.get_by_label("Slug (replaces the template's)").fill("browser-built")
    page.get_by_role("button", name="Check").click()
    page.get_by_text("5 prompts, 5 blocks, 20 responses").wait_for()
    assert audit(page, "new study, checked") == []
    assert not Study.objects.filter(slug="browser-built").exists()
    page.get_by_role("button", name="Create the study (closed to participants)").click()
    page.wait_for_url(f"{live_server.url}/studies/browser-built/")
    study = Study.objects.get(slug="browser-built")
    assert not study.is_open and study.items.count() == 20
    assert refused == []
    page.context.close()
