"""The REST API: runs, result tables, exports, imports, participants and ratings, docs."""

from __future__ import annotations

import re

import pytest
from rest_framework.test import APIClient

from analysis.models import AnalysisRun, GoldScore
from surveys.models import Participant, Rating
from tests.support.downloads import csv_rows
from tests.support.response_files import base_participants, base_ratings, csv_file

# Throttle counters live in the cache, keyed by user id; ids repeat between tests.
pytestmark = pytest.mark.usefixtures("fresh_cache")


@pytest.fixture
def other_api(other) -> APIClient:
    client = APIClient()
    client.force_authenticate(other)
    return client


# ---------------------------------------------------------------- auth


def test_it_needs_a_signed_in_user(study):
    assert APIClient().get("/api/studies/").status_code == 403
    assert APIClient().get(f"/api/studies/{study.slug}/runs/").status_code == 403


def test_it_accepts_a_token_and_lists_only_own_studies(owner_api, study, other_study):
    response = owner_api.get("/api/studies/")
    assert response.status_code == 200
    assert [s["slug"] for s in response.json()["results"]] == [study.slug]


# ---------------------------------------------------------------- runs


def test_it_starts_a_run_with_202_and_the_status_url_reports_it_done(owner_api, filled, quick_stats,
                                                                     django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        response = owner_api.post(f"/api/studies/{filled.slug}/runs/")
    assert response.status_code == 202
    body = response.json()
    run = AnalysisRun.objects.get(pk=body["id"])
    assert body["status_url"] == f"/api/runs/{run.pk}/" and run.requested_by == "owner"
    status = owner_api.get(body["status_url"]).json()
    assert status["status"] == "done" and status["n_participants"] == 12
    assert status["tables_url"] == f"/api/studies/{filled.slug}/runs/{run.pk}/tables/"
    assert owner_api.get(f"/api/studies/{filled.slug}/runs/{run.pk}/").json() == status
    listing = owner_api.get(f"/api/studies/{filled.slug}/runs/").json()
    assert listing["count"] == 1 and listing["results"][0]["id"] == run.pk


def test_a_queued_run_has_no_tables_yet(owner_api, study):
    run = AnalysisRun.objects.create(study=study)
    assert owner_api.get(f"/api/runs/{run.pk}/").json()["tables_url"] is None
    response = owner_api.get(f"/api/studies/{study.slug}/runs/{run.pk}/tables/")
    assert response.status_code == 409 and "queued" in response.json()["detail"]


def test_runs_of_another_researchers_study_are_404(other_api, study):
    run = AnalysisRun.objects.create(study=study)
    for url in (f"/api/runs/{run.pk}/", f"/api/studies/{study.slug}/runs/", f"/api/studies/{study.slug}/runs/{run.pk}/"):
        assert other_api.get(url).status_code == 404, url
    assert other_api.post(f"/api/studies/{study.slug}/runs/").status_code == 404
    assert AnalysisRun.objects.count() == 1


def test_an_absurd_run_id_is_404_not_500(owner_api, study):
    assert owner_api.get(f"/api/runs/{2**70}/").status_code == 404


def test_starting_runs_is_throttled(owner_api, study, monkeypatch):
    from analysis.api import ExpensiveRequestThrottle

    monkeypatch.setattr(ExpensiveRequestThrottle, "THROTTLE_RATES", {"expensive": "2/hour"})
    codes = [owner_api.post(f"/api/studies/{study.slug}/runs/").status_code for _ in range(3)]
    assert codes == [202, 202, 429]
    assert owner_api.get(f"/api/studies/{study.slug}/runs/").status_code == 200  # reads are not the expensive kind


# ---------------------------------------------------------------- result tables


def test_it_lists_a_runs_tables_and_returns_one_as_columns_and_rows(owner_api, done_run):
    base = f"/api/studies/{done_run.study.slug}/runs/{done_run.pk}/tables/"
    listing = owner_api.get(base).json()
    names = [t["name"] for t in listing]
    assert {"filter_flow", "win_table", "region_means", "descriptives"} <= set(names)
    flow = owner_api.get(base + "filter_flow/").json()
    assert flow["columns"] == ["step", "rule", "excluded", "remaining", "flagged_alone"]
    assert flow["rows"][0][:2] == [0, "enrolled"] or flow["rows"][0][3] == 12
    records = owner_api.get(base + "filter_flow/?orient=records").json()["records"]
    assert records[0] == dict(zip(flow["columns"], flow["rows"][0]))
    summary = next(t for t in listing if t["name"] == "filter_flow")
    assert summary["n_rows"] == len(flow["rows"]) and summary["url"] == base + "filter_flow/"


def test_the_level_filter_keeps_one_level(owner_api, done_run):
    url = f"/api/studies/{done_run.study.slug}/runs/{done_run.pk}/tables/region_means/"
    whole = owner_api.get(url).json()
    at = whole["columns"].index("level")
    assert {row[at] for row in whole["rows"]} == {"participant", "rating"}
    for level in ("participant", "rating"):
        rows = owner_api.get(url, {"level": level}).json()["rows"]
        assert rows and {row[at] for row in rows} == {level}
    bad = owner_api.get(url, {"level": "everyone"})
    assert bad.status_code == 400 and "level" in bad.json()
    assert owner_api.get(url, {"orient": "sideways"}).status_code == 400


def test_an_unknown_table_is_404(owner_api, done_run):
    response = owner_api.get(f"/api/studies/{done_run.study.slug}/runs/{done_run.pk}/tables/nope/")
    assert response.status_code == 404


# ---------------------------------------------------------------- exports


def test_it_streams_the_cleaned_ratings_of_retained_participants(owner_api, done_run):
    response = owner_api.get(f"/api/studies/{done_run.study.slug}/exports/ratings.csv")
    assert response.status_code == 200 and response.streaming
    assert response["Content-Type"].startswith("text/csv")
    rows = csv_rows(response)
    assert rows[0][:4] == ["participant_id", "block_id", "scenario", "response_id"]
    retained = done_run.participant_results.filter(excluded_by="").values_list("participant_id", flat=True)
    assert len(rows) - 1 == Rating.objects.filter(placement__visit__participant__in=list(retained)).count()


def test_it_lists_pseudonymous_exports_only(owner_api, done_run):
    listing = owner_api.get(f"/api/studies/{done_run.study.slug}/exports/").json()
    names = [e["name"] for e in listing]
    assert names[:2] == ["participants", "ratings"] and "win-table" in names and "identifiers" not in names
    assert all(e["url"].endswith(".csv") for e in listing)


def test_identifiers_come_only_from_the_restricted_endpoint_and_only_for_owners_and_staff(owner_api, other_api, staff,
                                                                                           done_run):
    slug = done_run.study.slug
    assert owner_api.get(f"/api/studies/{slug}/exports/identifiers.csv").status_code == 404
    rows = csv_rows(owner_api.get(f"/api/studies/{slug}/restricted/identifiers.csv"))
    assert rows[0] == ["participant_id", "external_id", "payable", "reject_reason", "completion_code"]
    externals = set(Participant.objects.filter(study=done_run.study).values_list("external_id", flat=True))
    assert {row[1] for row in rows[1:]} == externals
    assert other_api.get(f"/api/studies/{slug}/restricted/identifiers.csv").status_code == 404
    staff_api = APIClient()
    staff_api.force_authenticate(staff)
    assert staff_api.get(f"/api/studies/{slug}/restricted/identifiers.csv").status_code == 200


def test_exports_before_any_finished_run_are_404_with_a_reason(owner_api, study):
    response = owner_api.get(f"/api/studies/{study.slug}/exports/participants.csv")
    assert response.status_code == 404 and "no finished analysis run" in response.json()["detail"]


# ---------------------------------------------------------------- imports


def test_it_imports_responses_and_answers_201_with_the_report(owner_api, study):
    response = owner_api.post(f"/api/studies/{study.slug}/imports/responses/", {
        "participants": csv_file(base_participants(), "participants.csv"),
        "ratings": csv_file(base_ratings(), "ratings.csv"),
    }, format="multipart")
    assert response.status_code == 201, response.content
    assert response.json()["participants_created"] == 2 and response.json()["ratings_created"] == 15
    assert Participant.objects.filter(study=study, source="import").count() == 2


def test_a_bad_row_answers_400_with_every_problem_and_writes_nothing(owner_api, study):
    ratings = base_ratings()
    ratings[3][4] = "9"
    response = owner_api.post(f"/api/studies/{study.slug}/imports/responses/", {
        "participants": csv_file(base_participants(), "participants.csv"),
        "ratings": csv_file(ratings, "ratings.csv"),
    }, format="multipart")
    assert response.status_code == 400
    assert any(p.startswith("ratings.csv:4:rating:") for p in response.json()["problems"])
    assert Participant.objects.count() == 0 and Rating.objects.count() == 0


def test_a_missing_file_is_a_field_error(owner_api, study):
    response = owner_api.post(f"/api/studies/{study.slug}/imports/responses/",
                              {"participants": csv_file(base_participants(), "participants.csv")}, format="multipart")
    assert response.status_code == 400 and "ratings" in response.json()


def test_it_imports_gold_scores(owner_api, study):
    gold = [["response_id", "gold_score"], ["Q1-R1", "3.5"], ["Q1-R2", "2"]]
    response = owner_api.post(f"/api/studies/{study.slug}/imports/gold/", {"gold": csv_file(gold, "gold.csv")},
                              format="multipart")
    assert response.status_code == 201 and response.json() == {"scores_written": 2, "scores_unchanged": 0}
    bad = owner_api.post(f"/api/studies/{study.slug}/imports/gold/",
                         {"gold": csv_file([["response_id", "gold_score"], ["Q1-R1", "high"]], "gold.csv")}, format="multipart")
    assert bad.status_code == 400 and bad.json()["problems"] == ['gold.csv:2:gold_score: "high" is not a number']
    assert GoldScore.objects.get(item__key="Q1-R1").score == 3.5


def test_imports_into_another_researchers_study_are_404(other_api, study):
    response = other_api.post(f"/api/studies/{study.slug}/imports/gold/",
                              {"gold": csv_file([["response_id", "gold_score"]], "gold.csv")}, format="multipart")
    assert response.status_code == 404


# ---------------------------------------------------------------- participants and ratings


def test_participants_are_pseudonymous_paginated_and_filterable(owner_api, filled):
    url = f"/api/studies/{filled.slug}/participants/"
    body = owner_api.get(url).json()
    assert body["count"] == 12
    assert all("external_id" not in row for row in body["results"])
    externals = set(Participant.objects.values_list("external_id", flat=True))
    assert not any(e in owner_api.get(url).content.decode() for e in externals)
    completed = Participant.objects.filter(study=filled, status="completed").count()
    assert owner_api.get(url, {"status": "completed"}).json()["count"] == completed
    one = Participant.objects.filter(study=filled).first()
    assert [r["participant_id"] for r in owner_api.get(url, {"participant_id": one.pseudonym}).json()["results"]] == [
        one.pseudonym]
    bad = owner_api.get(url, {"status": "sleeping"})
    assert bad.status_code == 400 and "status" in bad.json()


def test_ratings_are_paginated_and_filterable(owner_api, filled):
    url = f"/api/studies/{filled.slug}/ratings/"
    assert owner_api.get(url).json()["count"] == Rating.objects.count()
    assert len(owner_api.get(url).json()["results"]) == 100
    q1 = owner_api.get(url, {"block_id": "Q1"}).json()
    assert q1["count"] == Rating.objects.filter(placement__item__block__key="Q1").count()
    assert {r["block_id"] for r in q1["results"]} == {"Q1"}
    one = owner_api.get(url, {"response_id": "Q1-R3", "status": "completed"}).json()
    assert {r["response_id"] for r in one["results"]} == {"Q1-R3"}
    p = Participant.objects.filter(study=filled).first()
    mine = owner_api.get(url, {"participant_id": p.pseudonym}).json()
    assert mine["count"] == Rating.objects.filter(placement__visit__participant=p).count()
    assert owner_api.get(url, {"status": "x"}).status_code == 400


def test_a_page_of_ratings_read_before_a_withdrawal_loses_only_the_withdrawn_rows(filled):
    """The page's rows and its visits are two reads: a participant who withdraws between them is left out."""
    from django.db.models import F

    from analysis.ratings_api import _with_visit_columns
    from surveys import withdrawal

    def page() -> list[dict]:
        return list(Rating.objects.filter(placement__visit__participant__study=filled).order_by("id").values(
            participant_id=F("placement__visit__participant__pseudonym"),
            visit=F("placement__visit_id"), participant=F("placement__visit__participant_id")))

    gone = Participant.objects.filter(study=filled, visits__placements__ratings__isnull=False).distinct().first()
    whole = _with_visit_columns(page(), study_id=filled.pk)
    rows = page()
    withdrawal.participant_withdraw(participant_id=gone.pk, channel=withdrawal.Channel.RESEARCHER)
    kept = _with_visit_columns(rows, study_id=filled.pk)
    assert kept == [row for row in whole if row["participant_id"] != gone.pseudonym]
    assert len(kept) < len(whole)


# ---------------------------------------------------------------- schema and docs


def test_the_docs_page_loads_everything_from_our_own_server(client):
    response = client.get("/api/docs/")
    assert response.status_code == 200
    html = response.content.decode()
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", html), "no external URL in the docs page"
    assets = re.findall(r"""(?:src|href)=["']([^"']+)["']""", html)
    assert any("swagger-ui" in a for a in assets)
    for asset in assets:
        assert asset.startswith("/"), asset
    assert client.get("/api/schema/").status_code == 200


def test_the_schema_describes_every_api_route(client):
    import yaml

    schema = yaml.safe_load(client.get("/api/schema/").content)
    paths = set(schema["paths"])
    for expected in ("/api/studies/{slug}/runs/", "/api/runs/{run_id}/", "/api/studies/{slug}/runs/{run_id}/tables/{name}/",
                     "/api/studies/{slug}/exports/{name}.csv", "/api/studies/{slug}/restricted/identifiers.csv",
                     "/api/studies/{slug}/imports/responses/", "/api/studies/{slug}/imports/gold/"):
        assert expected in paths
    created = schema["paths"]["/api/studies/{slug}/runs/"]["post"]["responses"]
    assert "202" in created and "404" in created


def test_a_download_with_an_empty_or_unknown_format_is_refused(owner_api, done_run):
    url = f"/api/studies/{done_run.study.slug}/exports/ratings.csv"
    assert owner_api.get(url + "?format=").status_code == 400
    assert owner_api.get(url + "?format=xml").status_code in (400, 404)
    assert owner_api.get(url + "?format=csv").status_code == 200


def test_a_repeated_page_number_is_refused_not_answered_with_the_last_one(owner_api, study):
    response = owner_api.get("/api/studies/?page=1&page=2")
    assert response.status_code == 404  # as DRF answers a page that does not exist
    assert response.json() == {"detail": "Invalid page: give one page number."}
    assert owner_api.get("/api/studies/?page=1").status_code == 200


@pytest.mark.parametrize("page", ["", "last", "x", "-1", "1.0", " 1"])
def test_a_page_that_is_not_a_whole_number_is_refused_not_answered_with_the_first_or_last(owner_api, study, page):
    response = owner_api.get("/api/studies/", {"page": page})
    assert response.status_code == 404
    assert response.json() == {"detail": "Invalid page: a page is a whole number from 1."}
