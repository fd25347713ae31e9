"""A researcher in chromium: sign in, watch the dashboard update while scripted
participants take the survey over real HTTP, start an analysis run, read the
results with their figures (a regional map drawn from our own topojson), and
download the zip for the paper. Nothing may be fetched from outside 127.0.0.1."""

from __future__ import annotations

import io
import re
import threading
import zipfile

import pytest

from bots.drive import run_over_http
from bots.personas import Persona
from tests.support.browser import browser, new_page, save_screenshot, sign_in  # noqa: F401  (browser is a fixture)
from tests.support.researcher import PASSWORD, fill_with_bots
from tests.support.held_broker import held_broker  # noqa: F401  (a fixture)

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow(reason="browser: researcher journeys with a live server and HTTP bots"),
    pytest.mark.django_db(transaction=True),
]

HTTP_BOTS = 3


def completed_shown(page) -> int:
    return int(page.locator('[data-field="funnel.completed"]').inner_text())


def test_a_researcher_follows_a_study_from_dashboard_to_the_zip(browser, live_server, study, owner, quick_stats,
                                                                tmp_path):
    # Participants with realistic (simulated) timing, so the run retains people to analyse.
    fill_with_bots(study, 10, seed=11, mix={"honest": 1.0})
    page = new_page(browser)
    requests: list[str] = []
    page.on("request", lambda request: requests.append(request.url))

    sign_in(page, live_server.url, "owner", PASSWORD)
    page.goto(f"{live_server.url}/studies/{study.slug}/")
    before = completed_shown(page)
    assert before == 10
    page.wait_for_selector("#chart-positions svg.main-svg")
    save_screenshot(page, "researcher-dashboard")

    outcomes: list[str] = []
    threads = [
        threading.Thread(target=lambda seed=seed: outcomes.append(run_over_http(
            persona=Persona(), base_url=live_server.url, slug=study.slug, seed=seed).outcome))
        for seed in range(HTTP_BOTS)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert outcomes == ["completed"] * HTTP_BOTS
    # No reload: the page polls dashboard.json every few seconds.
    page.wait_for_function(
        f"() => document.querySelector('[data-field=\"funnel.completed\"]').textContent.trim() === '{before + HTTP_BOTS}'",
        timeout=20_000,
    )

    # Tasks are eager in tests: the run is done when the POST returns, which leads to its results page.
    page.click("#start-run", timeout=10_000)
    page.wait_for_url(re.compile(r".*/runs/\d+/$"), timeout=120_000)
    page.wait_for_selector("#fig-rating_means svg.main-svg")
    assert page.locator("#fig-win_grid svg.main-svg").count() >= 1
    regional_map = page.locator('[data-figure^="map_"]').first
    page.wait_for_function(
        "() => document.querySelectorAll('[data-figure^=\"map_\"] path.choroplethlocation').length > 40",
        timeout=20_000,
    )
    assert regional_map.locator("path.choroplethlocation").count() > 40
    save_screenshot(page, "regional-map", locator=regional_map)
    assert any(url.endswith("/static/vendor/topojson/usa_110m.json") for url in requests)
    outside = [url for url in requests if not url.startswith(("http://127.0.0.1", "http://localhost", "data:", "blob:"))]
    assert not outside, f"requests left the machine: {outside}"

    page.click("a:has-text('Exports')")
    with page.expect_download() as download_info:
        page.click("#download-everything")
    path = tmp_path / "everything.zip"
    download_info.value.save_as(path)
    with zipfile.ZipFile(path) as archive:
        names = set(archive.namelist())
        assert {"participants.csv", "ratings.csv", "filter_flow.csv", "win_table.csv", "codebook.csv"} <= names
        participants = archive.read("participants.csv").decode().splitlines()
        assert len(participants) - 1 == 10 + HTTP_BOTS
        assert "identifiers.csv" not in names
        assert io.StringIO(archive.read("codebook.csv").decode()).readline().startswith("file,column")
    page.context.close()


def test_the_api_docs_work_offline_under_our_content_security_policy(browser, live_server):
    page = new_page(browser)
    requests: list[str] = []
    refused: list[str] = []
    page.on("request", lambda request: requests.append(request.url))
    page.on("console", lambda message: refused.append(message.text) if "Content Security Policy" in message.text
            else None)
    page.goto(f"{live_server.url}/api/docs/")
    page.wait_for_selector(".swagger-ui .opblock", timeout=20_000)
    assert page.locator(".swagger-ui .opblock").count() >= 16
    assert not refused, refused
    assert all(url.startswith(live_server.url) for url in requests), requests
    page.context.close()


def test_the_results_page_of_a_running_run_fills_in_as_its_parts_land(browser, live_server, study, owner,
                                                                      monkeypatch, held_broker):
    from analysis.models import AnalysisRun
    from analysis.tasks import run_analysis, run_analysis_part
    from tests.support.researcher import narrow_analyses

    fill_with_bots(study, 10, seed=11, mix={"honest": 1.0})
    narrow_analyses(monkeypatch, ("win_table", "ttests", "anova", "descriptives", "region_means"))
    run = AnalysisRun.objects.create(study=study, thresholds=study.quality_thresholds)
    assert run_analysis(run.pk) == "running"  # the paper's tables are in; the part waits on the broker
    page = new_page(browser)
    sign_in(page, live_server.url, "owner", PASSWORD)
    page.goto(f"{live_server.url}/studies/{study.slug}/runs/{run.pk}/")
    assert page.locator("#t-win_table").count() == 1 and page.locator("#t-descriptives").count() == 0
    assert "Still computing" in page.locator("#run-progress").inner_text()
    page.wait_for_selector("#fig-win_grid svg.main-svg")

    for _, args in held_broker():
        run_analysis_part.apply(args=args)
    # No click: the page polls the run and reloads once the last tables are in.
    page.wait_for_selector("#t-descriptives", timeout=15_000)
    assert page.locator("#run-progress").count() == 0
    page.wait_for_selector("#fig-rating_means svg.main-svg")
    page.context.close()
