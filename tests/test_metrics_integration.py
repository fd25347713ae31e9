"""The automatic-metrics run wired into Django (issue 9): task, cache, pages, API.

The tests that load the encoder need the optional stack and skip without it,
except under WITH_METRICS=1 (CI installs it), where a missing package fails.
The "not installed" path runs everywhere: it simulates the missing stack.
"""

from __future__ import annotations

import importlib.util
import os

import numpy as np
import pytest
from django.contrib.auth import get_user_model

from analysis import selectors
from analysis.automatic_metrics import metrics, metrics_run
from analysis.models import AnalysisRun, EmbeddingCache, MetricsRun, MetricsTable
from analysis.tasks import run_analysis, run_metrics
from bots.drive import run_with_services
from bots.personas import Persona
from surveys.definition import parse_definition
from surveys.loader import study_load

STACK_MISSING = [m for m in metrics_run.REQUIRED_MODULES if importlib.util.find_spec(m) is None]
needs_stack = pytest.mark.skipif(
    bool(STACK_MISSING) and os.environ.get("WITH_METRICS") != "1",
    reason=f"optional metrics stack not installed ({', '.join(STACK_MISSING)}): pip install -r requirements-metrics.txt",
)
# Three TIDE blocks of three scenarios, all in question set 1: 15 responses, 3 references.
BLOCKS = ("Q1", "Q5", "Q9")


@pytest.fixture(autouse=True)
def few_resamples(settings):
    settings.METRICS_N_BOOT = 200


def tide_blocks_study(tide_definition: dict, blocks: tuple[str, ...], slug: str):
    definition = dict(tide_definition, slug=slug, title=f"TIDE, blocks {', '.join(blocks)}")
    definition["blocks"] = [b for b in tide_definition["blocks"] if b["id"] in blocks]
    definition["quality"] = dict(definition["quality"], duration_min_minutes=1)
    definition["recruitment"] = dict(definition["recruitment"], target_completions=None)
    return study_load(definition=parse_definition(definition)).study


def rated_by_bots(study, n: int = 5):
    for seed in range(n):
        run_with_services(persona=Persona(), study=study, seed=seed)
    return study


@pytest.fixture
def mini_study(db, tide_definition):
    return tide_blocks_study(tide_definition, BLOCKS, "tide-mini")


@pytest.fixture
def rated_mini_study(mini_study):
    """The three blocks rated by five honest bots."""
    return rated_by_bots(mini_study)


@pytest.fixture
def mini_study_owner(client, mini_study):
    """The owner of the mini study, signed in on pytest-django's ``client``."""
    user = get_user_model().objects.create_user("researcher", password="pw-123456789")
    mini_study.owners.add(user)
    client.force_login(user)
    return user


def _compute(study) -> MetricsRun:
    run = MetricsRun.objects.create(study=study)
    assert run_metrics(run.pk) == "done", MetricsRun.objects.get(pk=run.pk).error
    run.refresh_from_db()
    return run


class EncoderCalls:
    """Counts the texts that reach the transformer (every encoder pass goes through metrics.encode_texts)."""

    def __init__(self, monkeypatch):
        self.texts = 0
        original = metrics.encode_texts

        def counting(texts, *args, **kwargs):
            self.texts += len(list(texts))
            return original(texts, *args, **kwargs)

        monkeypatch.setattr(metrics, "encode_texts", counting)


# --------------------------------------------------------------------------- the run


@needs_stack
@pytest.mark.slow(reason="the optional metrics stack encodes texts with its real model")
def test_it_computes_every_table_of_a_small_study_with_the_real_encoder(rated_mini_study):
    analysis = AnalysisRun.objects.create(study=rated_mini_study, thresholds=rated_mini_study.quality_thresholds)
    assert run_analysis(analysis.pk) == "done"
    run = _compute(rated_mini_study)

    tables = selectors.metrics_tables(run=run)
    assert set(tables) == set(metrics_run.TABLES)
    per_response, _ = tables["per_response"]
    assert len(per_response) == 15
    generated = per_response[per_response["condition"] != "reference"]
    references = per_response[per_response["condition"] == "reference"]
    assert generated[list(metrics.REFERENCE_METRICS)].notna().all().all()
    assert references[list(metrics.REFERENCE_METRICS)].isna().all().all()
    assert generated["embedding_cosine"].between(-1, 1).all() and generated["rouge_l"].between(0, 1).all()
    assert (per_response["n_ratings"] == 5).all() and per_response["mean_rating"].between(1, 5).all()

    table, note = tables["metrics_table"]
    assert {"model", "condition", "n", "bertscore_f1_mean", "distinct_2"} <= set(table.columns)
    assert "retained participants of analysis run #%d" % analysis.pk in note
    assert run.source_run_id == analysis.pk and "analysis run" in run.human_basis

    agreement, _ = tables["metric_agreement"]
    overall = agreement[(agreement["model"] == "all") & (agreement["method"] == "spearman")]
    assert len(overall) == 4 and (overall["n"] == 12).all() and overall["ci_low"].le(overall["ci_high"]).all()

    cv, _ = tables["predictor_cv"]
    assert set(cv["held_out"]) == {"all", "S1", "S2", "S3"} and set(cv["predictor"]) == {"ridge", "mean_baseline"}
    robustness, _ = tables["robustness"]
    assert len(robustness) == 7 and (robustness["n"] == 3).all()
    assert run.predictor is not None and b"rating-predictor/1" in bytes(run.predictor)
    assert {"encoder", "metrics", "agreement", "predictor", "robustness", "total"} <= set(run.timings)


@needs_stack
@pytest.mark.slow(reason="the optional metrics stack encodes texts with its real model")
def test_it_counts_a_reference_shown_in_several_blocks_once(db, tide_definition):
    # Q1 and Q2 are two blocks of scenario S1 and show the same reference text; Q5 is scenario S2.
    study = rated_by_bots(tide_blocks_study(tide_definition, ("Q1", "Q2", "Q5"), "tide-shared-reference"), n=3)
    run = _compute(study)
    tables = selectors.metrics_tables(run=run)
    per_response, _ = tables["per_response"]
    references = per_response[per_response["condition"] == "reference"]
    distinct = list(dict.fromkeys(references["text"]))
    assert len(references) == 3 and len(distinct) == 2

    robustness, note = tables["robustness"]
    assert len(robustness) == 7 and (robustness["n"] == 2).all() and "2 distinct reference" in note
    table, _ = tables["metrics_table"]
    row = table[table["condition"] == "reference"].iloc[0]
    assert row["n"] == 3
    assert row["distinct_1"] == pytest.approx(metrics.distinct_n(distinct, 1))
    assert row["distinct_2"] == pytest.approx(metrics.distinct_n(distinct, 2))


@needs_stack
@pytest.mark.slow(reason="the optional metrics stack encodes texts with its real model")
def test_it_encodes_nothing_on_a_second_run_of_an_unchanged_study(rated_mini_study, monkeypatch):
    calls = EncoderCalls(monkeypatch)
    first = _compute(rated_mini_study)
    encoded_first = calls.texts
    assert encoded_first > 0 and first.cache_misses > 0
    assert "all 5 participants" in first.human_basis and first.source_run_id is None
    n_cached = EmbeddingCache.objects.count()

    second = _compute(rated_mini_study)
    assert calls.texts == encoded_first, "the second run encoded texts again"
    assert second.cache_misses == 0 and second.cache_hits > 0
    assert EmbeddingCache.objects.count() == n_cached
    one, two = (selectors.metrics_tables(run=r)["per_response"][0] for r in (first, second))
    np.testing.assert_allclose(one["embedding_cosine"], two["embedding_cosine"], atol=1e-6, equal_nan=True)
    np.testing.assert_allclose(one["bertscore_f1"], two["bertscore_f1"], atol=1e-6, equal_nan=True)
    assert bytes(first.predictor) == bytes(second.predictor)


@needs_stack
@pytest.mark.slow(reason="the optional metrics stack encodes texts with its real model")
def test_it_ignores_a_redelivered_message_for_a_finished_run(rated_mini_study, monkeypatch):
    run = _compute(rated_mini_study)
    tables = list(MetricsTable.objects.filter(run=run).order_by("name").values_list("id", flat=True))
    calls = EncoderCalls(monkeypatch)
    assert run_metrics(run.pk) == "done"
    run.refresh_from_db()
    assert run.attempts == 1 and calls.texts == 0
    assert list(MetricsTable.objects.filter(run=run).order_by("name").values_list("id", flat=True)) == tables


@needs_stack
@pytest.mark.slow(reason="the optional metrics stack encodes texts with its real model")
def test_it_overwrites_the_tables_when_a_dead_attempt_is_taken_over(rated_mini_study, settings):
    run = _compute(rated_mini_study)
    # A worker died mid-run: the row says running, with a lease long expired.
    settings.ANALYSIS_RUN_LEASE_SECONDS = 0
    MetricsRun.objects.filter(pk=run.pk).update(status="running", finished_at=None)
    assert run_metrics(run.pk) == "done"
    run.refresh_from_db()
    assert run.attempts == 2
    assert MetricsTable.objects.filter(run=run).count() == len(metrics_run.TABLES)


# --------------------------------------------------------------------------- pages and API


@needs_stack
@pytest.mark.slow(reason="the optional metrics stack encodes texts with its real model")
def test_it_scores_texts_through_the_api_and_the_form(rated_mini_study, mini_study_owner, client,
                                                      django_capture_on_commit_callbacks):
    url = f"/api/studies/{rated_mini_study.slug}/predict/"
    untrained = client.post(url, {"texts": ["I hear you."]}, content_type="application/json")
    assert untrained.status_code == 409 and "Compute automatic metrics" in untrained.json()["detail"]

    with django_capture_on_commit_callbacks(execute=True):
        started = client.post(f"/api/studies/{rated_mini_study.slug}/metrics/")
    assert started.status_code == 202 and started.json()["status"] == "queued"
    assert client.get(f"/api/studies/{rated_mini_study.slug}/metrics/").json()["status"] == "done"

    response = client.post(url, {"texts": ["I am so sorry, that sounds painful.", "ok"]}, content_type="application/json")
    assert response.status_code == 200, response.content
    body = response.json()
    assert [p["text"] for p in body["predictions"]] == ["I am so sorry, that sounds painful.", "ok"]
    for prediction in body["predictions"]:
        assert np.isfinite(prediction["predicted_rating"]) and prediction["cv_mae"] > 0
        assert prediction["cv_rmse"] == pytest.approx(prediction["cv_mse"] ** 0.5)

    page = client.post(f"/studies/{rated_mini_study.slug}/metrics/predict/", {"text": "That must be so hard."})
    assert page.status_code == 200 and b'id="score-result"' in page.content


@pytest.mark.parametrize("payload", [{}, {"texts": []}, {"texts": "just a string"}, {"texts": [""]},
                                     {"texts": ["x" * 5001]}, {"texts": ["a"] * 21}, {"texts": [3, None]}])
def test_it_rejects_bad_predict_input(mini_study, mini_study_owner, client, payload):
    response = client.post(f"/api/studies/{mini_study.slug}/predict/", payload, content_type="application/json")
    assert response.status_code == 400


def test_it_answers_409_when_no_predictor_is_trained(mini_study, mini_study_owner, client):
    response = client.post(f"/api/studies/{mini_study.slug}/predict/", {"texts": ["hi"]}, content_type="application/json")
    assert response.status_code == 409


def test_it_hides_the_endpoints_of_another_researchers_study(mini_study, client):
    stranger = get_user_model().objects.create_user("stranger", password="pw-123456789")
    client.force_login(stranger)
    assert client.post(f"/api/studies/{mini_study.slug}/predict/", {"texts": ["hi"]},
                       content_type="application/json").status_code == 404
    assert client.post(f"/api/studies/{mini_study.slug}/metrics/").status_code == 404
    assert client.get(f"/studies/{mini_study.slug}/metrics/").status_code == 404


@needs_stack
@pytest.mark.slow(reason="the optional metrics stack encodes texts with its real model")
def test_it_shows_the_metrics_on_the_results_page(rated_mini_study, mini_study_owner, client):
    analysis = AnalysisRun.objects.create(study=rated_mini_study, thresholds=rated_mini_study.quality_thresholds)
    assert run_analysis(analysis.pk) == "done"
    run = _compute(rated_mini_study)
    page = client.get(f"/studies/{rated_mini_study.slug}/runs/{analysis.pk}/")
    assert page.status_code == 200
    html = page.content.decode()
    for anchor in ('id="metrics-h"', 'id="m-metrics_table"', 'id="m-metric_agreement"', 'id="m-predictor_cv"',
                   'id="m-robustness"', 'data-metrics-figure="metric_bertscore_f1"', 'id="metrics-figures-data"',
                   'id="score-text"', 'id="start-metrics"'):
        assert anchor in html, anchor
    assert "<script>" not in html  # CSP: only src= scripts and JSON data blocks
    assert "unsafe-inline" not in page["Content-Security-Policy"].split("script-src")[1].split(";")[0]
    csv = client.get(f"/studies/{rated_mini_study.slug}/metrics/{run.pk}/tables/per_response.csv")
    assert csv.status_code == 200 and b"embedding_cosine" in b"".join(csv.streaming_content)
    assert client.get(f"/studies/{rated_mini_study.slug}/metrics/").status_code == 200


# --------------------------------------------------------------------------- without the optional stack


@pytest.fixture
def stack_missing(monkeypatch):
    """Simulates an install without torch: our own availability check and the loader both say so."""
    monkeypatch.setattr(metrics_run, "missing_modules", lambda: ["torch"])

    def unavailable():
        raise metrics.MetricsUnavailable(f"torch is missing: {metrics.INSTALL_HINT}")

    monkeypatch.setattr(metrics, "load_encoder", unavailable)


def test_it_fails_fast_and_readably_without_the_optional_stack(rated_mini_study, mini_study_owner, client, stack_missing,
                                                              django_capture_on_commit_callbacks):
    page = client.get(f"/studies/{rated_mini_study.slug}/metrics/")
    assert page.status_code == 200
    html = page.content.decode()
    assert 'id="metrics-unavailable"' in html and "pip install -r requirements-metrics.txt" in html
    assert 'id="start-metrics"' in html and "cannot compute them" in html

    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(f"/studies/{rated_mini_study.slug}/metrics/run/")
    assert response.status_code == 302
    run = MetricsRun.objects.get(study=rated_mini_study)
    assert run.status == "failed" and run.step == "encoder"
    assert run.error.startswith("encoder: MetricsUnavailable:") and "pip install -r requirements-metrics.txt" in run.error
    assert "pip install -r requirements-metrics.txt" in client.get(f"/studies/{rated_mini_study.slug}/metrics/").content.decode()

    # A predictor from an earlier install stays, but scoring needs the encoder here: 503 with the hint.
    MetricsRun.objects.filter(pk=run.pk).update(status="done", predictor=b"{}")
    response = client.post(f"/api/studies/{rated_mini_study.slug}/predict/", {"texts": ["hi"]}, content_type="application/json")
    assert response.status_code == 503 and "requirements-metrics.txt" in response.json()["detail"]
    form = client.post(f"/studies/{rated_mini_study.slug}/metrics/predict/", {"text": "hi"})
    assert form.status_code == 503 and b"requirements-metrics.txt" in form.content


@pytest.mark.slow(reason="the optional metrics stack encodes texts with its real model")
def test_the_dashboard_and_results_page_work_without_the_optional_stack(rated_mini_study, mini_study_owner, client, stack_missing):
    assert b'id="start-metrics"' in client.get(f"/studies/{rated_mini_study.slug}/").content
    analysis = AnalysisRun.objects.create(study=rated_mini_study, thresholds=rated_mini_study.quality_thresholds)
    assert run_analysis(analysis.pk) == "done"
    page = client.get(f"/studies/{rated_mini_study.slug}/runs/{analysis.pk}/")
    assert page.status_code == 200 and b'id="metrics-unavailable"' in page.content
