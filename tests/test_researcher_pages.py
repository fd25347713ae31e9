"""Researcher pages: dashboard, analysis runs, results, import upload, sign-in rate limit."""

from __future__ import annotations

import html
import json
import re

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.db import connection

from analysis import registry, selectors
from analysis.models import AnalysisRun

from surveys.models import ConsentDecline, Participant, Rating
from tests.support.researcher import PASSWORD, field, fill_with_bots, finished_run
from tests.support.response_files import base_participants, base_ratings, csv_text

# Sign-in failure counters and throttles live in the cache.
pytestmark = pytest.mark.usefixtures("fresh_cache")


# ---------------------------------------------------------------- dashboard


def test_the_dashboard_funnel_matches_what_the_bots_did(owner_client, study, client):
    bot_runs = fill_with_bots(study, 12, seed=3)
    decliner = client.__class__()
    decliner.get(f"/s/{study.slug}/?PROLIFIC_PID={'d' * 24}&STUDY_ID=s&SESSION_ID=t")
    decliner.post(f"/s/{study.slug}/consent/", {"decision": "decline"})

    page = owner_client.get(f"/studies/{study.slug}/").content.decode()

    outcomes = [run.outcome for run in bot_runs]
    assert int(field(page, "funnel.completed")) == outcomes.count("completed") > 0
    assert int(field(page, "funnel.exited")) == outcomes.count("exited") > 0
    assert int(field(page, "funnel.consented")) == len(bot_runs)
    assert int(field(page, "funnel.declined")) == 1 == sum(ConsentDecline.objects.values_list("count", flat=True))
    assert int(field(page, "funnel.entered")) == len(bot_runs) + 1
    assert int(field(page, "funnel.in_progress")) == 0
    assert int(field(page, "durations.n")) == outcomes.count("completed")
    # The JSON the page polls says the same.
    data = owner_client.get(f"/studies/{study.slug}/dashboard.json").json()
    assert data["funnel"]["completed"] == outcomes.count("completed")
    assert data["funnel"]["exited"] == Participant.objects.filter(study=study, status="exited").count()
    assert sum(row["answered"] for row in data["block_coverage"]) == (
        Rating.objects.filter(placement__visit__participant__study=study).values("placement__visit").distinct().count()
    )


def _dashboard_json_queries(client, slug: str) -> int:
    with CaptureQueriesContext(connection) as queries:
        assert client.get(f"/studies/{slug}/dashboard.json").status_code == 200
    return len(queries)


def test_dashboard_json_costs_the_same_queries_at_any_size(owner_client, study, quick_stats,
                                                           django_assert_max_num_queries):
    fill_with_bots(study, 2, seed=5)
    finished_run(study)
    small = _dashboard_json_queries(owner_client, study.slug)
    assert small <= 21  # the runs still unfinished (stuck ones shown on the dashboard) take one
    fill_with_bots(study, 10, seed=6)
    with django_assert_max_num_queries(small):
        owner_client.get(f"/studies/{study.slug}/dashboard.json")


# ---------------------------------------------------------------- runs and results


def test_the_start_button_creates_a_run_that_finishes(owner_client, filled, quick_stats,
                                                       django_capture_on_commit_callbacks):
    page = owner_client.get(f"/studies/{filled.slug}/").content.decode()
    assert 'id="start-run"' in page and "No analysis has run yet." in page
    with django_capture_on_commit_callbacks(execute=True):
        response = owner_client.post(f"/studies/{filled.slug}/runs/")
    run = AnalysisRun.objects.get(study=filled)
    # Straight to the run's own page (was the dashboard, where the link came only on the next poll).
    assert response.status_code == 302 and response["Location"] == f"/studies/{filled.slug}/runs/{run.pk}/"
    assert run.status == "done" and run.requested_by == "owner"
    status = owner_client.get(f"/studies/{filled.slug}/runs/{run.pk}.json").json()
    assert status["status"] == "done"
    page = owner_client.get(f"/studies/{filled.slug}/").content.decode()
    assert 'data-run-status="done"' in page and f"/studies/{filled.slug}/runs/{run.pk}/" in page


def test_the_results_page_of_a_queued_run_waits_for_its_tables_instead_of_answering_404(owner_client, filled):
    response = owner_client.post(f"/studies/{filled.slug}/runs/")  # on_commit never fires here: the run stays queued
    run = AnalysisRun.objects.get(study=filled)
    assert run.status == "queued" and response["Location"] == f"/studies/{filled.slug}/runs/{run.pk}/"
    page = owner_client.get(response["Location"])
    assert page.status_code == 200
    text = page.content.decode()
    assert "(queued)" in text and "Waiting for a worker" in text
    # The page polls the run's status and reloads when a worker takes it.
    assert "run_progress.js" in text and 'data-status="queued"' in text
    dashboard = owner_client.get(f"/studies/{filled.slug}/").content.decode()
    assert f'href="/studies/{filled.slug}/runs/{run.pk}/">Results as they land' in dashboard


def figures_of(page: str) -> dict:
    match = re.search(r'<script id="figures-data" type="application/json">(.*?)</script>', page, re.S)
    return json.loads(html.unescape(match.group(1)))


def section_rows(page: str, name: str) -> list[list[str]]:
    section = re.search(rf'<section class="result-table" data-table="{name}">(.*?)</section>', page, re.S).group(1)
    body = re.search(r"<tbody>(.*?)</tbody>", section, re.S).group(1)
    return [re.findall(r"<td>(.*?)</td>", row, re.S) for row in re.findall(r"<tr>(.*?)</tr>", body, re.S)]


@pytest.mark.slow(reason="a full analysis run with every model (~20 s)")
def test_the_results_page_shows_every_table_of_a_full_run_and_the_figures(owner_client, filled):
    run = finished_run(filled)  # every analysis, as in production (~20 s)
    page = owner_client.get(f"/studies/{filled.slug}/runs/{run.pk}/").content.decode()
    names = selectors.result_table_names(run=run)
    missing = [name for name in names if f'id="t-{name}"' not in page]
    assert not missing, f"tables without a section on the results page: {missing}"
    figures = figures_of(page)
    assert {"rating_means", "win_grid"} <= set(figures)
    maps = [key for key in figures if key.startswith("map_")]
    assert len(maps) == filled.scenarios.count()
    assert figures[maps[0]]["data"][0]["type"] == "choropleth"


def test_the_results_page_renders_the_runs_tables_and_maps(owner_client, done_run):
    page = owner_client.get(f"/studies/{done_run.study.slug}/runs/{done_run.pk}/").content.decode()
    shown = [a.name for a in registry.REGISTERED if a.name in selectors.result_table_names(run=done_run)]
    assert shown and all(f'id="t-{name}"' in page for name in shown)
    figures = figures_of(page)
    choropleth = figures[next(key for key in figures if key.startswith("map_"))]["data"][0]
    assert choropleth["type"] == "choropleth" and choropleth["locationmode"] == "USA-states"
    assert len(choropleth["locations"]) > 40  # every state, coloured by its region
    assert 'data-topojson-url="/static/vendor/topojson/"' in page


def test_the_level_switch_shows_one_level_at_a_time(owner_client, done_run):
    url = f"/studies/{done_run.study.slug}/runs/{done_run.pk}/"
    frame = selectors.result_table_frame(run=done_run, name="region_means")
    at = list(frame.columns).index("level")
    for level in ("participant", "rating"):
        rows = section_rows(owner_client.get(url, {"level": level}).content.decode(), "region_means")
        assert len(rows) == (frame["level"] == level).sum() and {row[at] for row in rows} == {level}
    page = owner_client.get(url, {"level": "nonsense"}).content.decode()
    assert {row[at] for row in section_rows(page, "region_means")} == {"participant"}


def test_a_long_table_shows_its_first_rows_and_says_the_csv_has_them_all(owner_client, done_run):
    from analysis.models import ResultTable
    from analysis.views import ROWS_SHOWN

    rows = [[f"p{i:04d}", 24, 0.5, 0.01, "none", ""] for i in range(ROWS_SHOWN + 50)]
    ResultTable.objects.create(run=done_run, name="rater_loo", rows=rows,
                               columns=["participant_id", "n_items", "spearman_r", "p", "holm_family", "note"])
    page = owner_client.get(f"/studies/{done_run.study.slug}/runs/{done_run.pk}/").content.decode()
    shown = section_rows(page, "rater_loo")
    assert len(shown) == ROWS_SHOWN and shown[0][0] == "p0000"
    assert f"{ROWS_SHOWN + 50} rows (the first {ROWS_SHOWN} shown; the CSV has them all)" in page
    csv_lines = owner_client.get(f"/studies/{done_run.study.slug}/runs/{done_run.pk}/tables/rater_loo.csv")
    assert len(b"".join(csv_lines.streaming_content).decode().splitlines()) == ROWS_SHOWN + 51


def test_the_page_sends_plotlys_template_once_and_every_figure_without_it(owner_client, done_run):
    page = owner_client.get(f"/studies/{done_run.study.slug}/runs/{done_run.pk}/").content.decode()
    figures = figures_of(page)
    template = json.loads(html.unescape(re.search(
        r'<script id="figures-template" type="application/json">(.*?)</script>', page, re.S).group(1)))
    assert figures and all("template" not in figure["layout"] for figure in figures.values())
    assert "layout" in template and "data" in template


def test_results_of_a_failed_run_are_404(owner_client, study):
    # A queued run's page waits for its tables (test_the_results_page_of_a_queued_run_...); a failed one has none.
    run = AnalysisRun.objects.create(study=study, status="failed", error="quality: boom")
    assert owner_client.get(f"/studies/{study.slug}/runs/{run.pk}/").status_code == 404


# ---------------------------------------------------------------- import upload


def files(participants, ratings) -> dict:
    return {
        "kind": "responses",
        "participants": SimpleUploadedFile("participants.csv", csv_text(participants).encode(), "text/csv"),
        "ratings": SimpleUploadedFile("ratings.csv", csv_text(ratings).encode(), "text/csv"),
    }


def test_a_valid_upload_creates_the_rows(owner_client, study):
    response = owner_client.post(f"/studies/{study.slug}/import/", files(base_participants(), base_ratings()))
    page = response.content.decode()
    assert response.status_code == 200 and "ImportReport(" not in page
    assert "Imported 2 participants: 4 blocks, 20 responses shown and 15 ratings, in " in page
    assert Participant.objects.filter(study=study, source="import").count() == 2
    assert Rating.objects.filter(placement__visit__participant__study=study).count() == 15


def test_a_bad_row_is_listed_with_file_line_and_column_and_nothing_is_written(owner_client, study):
    ratings = base_ratings()
    ratings[7][3] = "seven"  # position of the 7th rating row (line 8 of the file)
    participants = base_participants()
    participants[2][1] = "yesterday"
    response = owner_client.post(f"/studies/{study.slug}/import/", files(participants, ratings))
    assert response.status_code == 400
    page = html.unescape(response.content.decode())
    assert "Nothing was imported" in page
    assert "participants.csv:3:started_at:" in page and "ratings.csv:8:position:" in page
    assert Participant.objects.count() == 0 and Rating.objects.count() == 0


def test_a_gold_upload_reports_its_problems(owner_client, study):
    gold = SimpleUploadedFile("gold.csv", b"response_id,gold_score\nQ99-R1,3\n", "text/csv")
    response = owner_client.post(f"/studies/{study.slug}/import/", {"kind": "gold", "gold": gold})
    assert response.status_code == 400 and 'gold.csv:2:response_id: unknown response "Q99-R1"' in html.unescape(
        response.content.decode())


# ---------------------------------------------------------------- sign-in rate limit


def test_ten_failed_sign_ins_lock_the_account_with_a_429_page(client, owner):
    for _ in range(10):
        response = client.post("/accounts/login/", {"username": "owner", "password": "wrong"})
        assert response.status_code == 200
    locked = client.post("/accounts/login/", {"username": "owner", "password": PASSWORD})
    assert locked.status_code == 429 and "Too many sign-in attempts" in locked.content.decode()
    # Another address guessing another name is not locked out.
    other = client.post("/accounts/login/", {"username": "someone", "password": "x"}, REMOTE_ADDR="10.0.0.9")
    assert other.status_code == 200


def test_password_spraying_from_one_address_never_locks_out_another_account(client, owner):
    from web.accounts import MAX_ADDRESS_FAILURES

    shared_proxy = {"REMOTE_ADDR": "10.1.2.3"}
    for i in range(MAX_ADDRESS_FAILURES):  # an attacker tries one password on many made-up accounts
        assert client.post("/accounts/login/", {"username": f"made-up-{i}", "password": "x"},
                           **shared_proxy).status_code == 200
    # The attacker is refused on the accounts it already failed on ...
    assert client.post("/accounts/login/", {"username": "made-up-0", "password": "y"}, **shared_proxy).status_code == 429
    # ... while the real researcher behind the same address signs in.
    signed_in = client.post("/accounts/login/", {"username": "owner", "password": PASSWORD}, **shared_proxy)
    assert signed_in.status_code == 302


def test_signing_out_lands_on_the_sign_in_page_not_the_admins(owner_client):
    response = owner_client.post("/accounts/logout/", follow=True)
    assert response.redirect_chain == [("/accounts/login/", 302)]
    page = response.content.decode()
    assert "Researcher sign-in" in page and "Logged out" not in page
    assert owner_client.get("/studies/").status_code == 302  # signed out indeed


def test_a_researcher_who_is_not_staff_is_told_the_admin_is_not_for_them_instead_of_a_redirect_loop(owner_client):
    response = owner_client.get("/admin/", follow=True)
    assert response.status_code == 403
    assert response.redirect_chain == [("/admin/login/?next=/admin/", 302)]
    assert "The admin is for staff" in response.content.decode() and 'href="/studies/"' in response.content.decode()


def test_staff_signed_in_go_on_from_the_admin_sign_in_to_the_admin(client, staff):
    client.force_login(staff)
    assert client.get("/admin/login/?next=/admin/")["Location"] == "/admin/"
    assert client.get("/admin/").status_code == 200


def test_favicon_ico_is_the_sites_icon(client):
    from django.contrib.staticfiles import finders

    response = client.get("/favicon.ico")
    assert response.status_code == 301 and response["Location"] == "/static/favicon.ico"
    icon = finders.find("favicon.ico")
    assert icon and open(icon, "rb").read(4) == b"\x00\x00\x01\x00"  # an ICO file


def test_researcher_pages_downloads_and_the_api_are_never_stored(owner_client, done_run, owner_token):
    slug = done_run.study.slug
    for path in (f"/studies/{slug}/", f"/studies/{slug}/runs/{done_run.pk}/", f"/studies/{slug}/exports/",
                 f"/studies/{slug}/exports/ratings.csv", f"/studies/{slug}/exports/identifiers.csv?confirm=1"):
        response = owner_client.get(path)
        assert response.status_code == 200, path
        assert "no-store" in response["Cache-Control"] and "private" in response["Cache-Control"], path
    for path in (f"/api/studies/{slug}/restricted/identifiers.csv", f"/api/studies/{slug}/runs/", "/api/studies/"):
        response = owner_client.get(path, HTTP_AUTHORIZATION=f"Token {owner_token}")
        assert response.status_code == 200, path
        assert "no-store" in response["Cache-Control"], path
    assert "no-store" in owner_client.get("/api/studies/nope/").get("Cache-Control", "")  # errors too
    assert "no-store" in Client().get("/accounts/login/")["Cache-Control"]
