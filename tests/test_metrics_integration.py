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

from analysis import metrics, metrics_run, selectors
from analysis.models import AnalysisRun, EmbeddingCache, MetricsRun, MetricsTable
from analysis.tasks import run_analysis, run_metrics
from surveys import bots
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


@pytest.fixture
def small_study(db, tide_definition):
    definition = dict(tide_definition, slug="tide-mini", title="TIDE, three blocks")
    definition["blocks"] = [b for b in tide_definition["blocks"] if b["id"] in BLOCKS]
    definition["quality"] = dict(definition["quality"], duration_min_minutes=1)
    definition["recruitment"] = dict(definition["recruitment"], target_completions=None)
    study = study_load(definition=parse_definition(definition)).study
    for seed in range(5):
        bots.run_with_services(persona=bots.Persona(), study=study, seed=seed)
    return study


@pytest.fixture
def researcher(client, small_study):
    user = get_user_model().objects.create_user("researcher", password="pw-123456789")
    small_study.owners.add(user)
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
@pytest.mark.slow
def test_it_computes_every_table_of_a_small_study_with_the_real_encoder(small_study):
    analysis = AnalysisRun.objects.create(study=small_study, thresholds=small_study.quality_thresholds)
    assert run_analysis(analysis.pk) == "done"
    run = _compute(small_study)

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
