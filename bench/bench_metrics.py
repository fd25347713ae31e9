"""Time the automatic metrics on N synthetic responses (default 10,000) on 2 cores.

Responses are made by recombining sentences from a small pool (3-5 each,
seeded), 24 blocks with one reference each, as in the TIDE design. Prints one
line per stage: seconds and responses per second.

Usage::

    python bench/bench_metrics.py            # 10,000 responses, 2 threads
    python bench/bench_metrics.py --n 2000 --threads 1
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

SENTENCES = [
    "I'm really sorry you're going through this.",
    "That sounds incredibly hard, and your feelings make sense.",
    "It's okay to feel overwhelmed when so much is happening at once.",
    "Have you been able to talk to anyone you trust about it?",
    "You don't have to figure everything out today.",
    "Taking a short walk or a few slow breaths can help a little.",
    "Losing someone you love leaves a space nothing else fills.",
    "It might help to write down what worries you most.",
    "A counselor or your doctor could offer support too.",
    "You reached out, and that takes courage.",
    "Try to get some sleep and eat something small.",
    "Many people feel this way after a breakup.",
    "Your boss's comments sound unfair and stressful.",
    "It is normal to feel anxious before a big exam.",
    "Please be gentle with yourself this week.",
    "If you ever feel unsafe, call a local crisis line right away.",
    "Moving to a new city can feel lonely at first.",
    "Small steps still count as progress.",
    "I hear how tired you are.",
    "What would make tomorrow a little easier?",
]
MODELS = ("model-a", "model-b")
CONDITIONS = ("zero-shot", "fine-tuned")


def synthetic_responses(n: int, seed: int = 0) -> pd.DataFrame:
    """N responses in 24 blocks over 6 scenarios, each block with one reference text."""
    rng = np.random.default_rng(seed)

    def paragraph() -> str:
        picks = rng.choice(len(SENTENCES), size=rng.integers(3, 6), replace=False)
        return " ".join(SENTENCES[i] for i in picks)

    references = {f"Q{b}": paragraph() for b in range(1, 25)}
    rows = []
    for i in range(n):
        block = f"Q{i % 24 + 1}"
        rows.append({
            "response_id": f"{block}-{i}", "model": MODELS[i % 2], "condition": CONDITIONS[(i // 2) % 2],
            "scenario": f"S{(i % 24) // 4 + 1}", "block_id": block, "text": paragraph(),
            "reference_text": references[block],
        })
    return pd.DataFrame(rows)


def timed(label: str, n: int, action: Callable[[], Any]) -> Any:
    start = time.perf_counter()
    result = action()
    seconds = time.perf_counter() - start
    rate = f"{n / seconds:10.1f} responses/s" if n else ""
    print(f"{label:<48} {seconds:8.2f} s {rate}", flush=True)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--boot", type=int, default=1000)
    args = parser.parse_args()

    import torch

    torch.set_num_threads(args.threads)
    from analysis.automatic_metrics import metrics, perturb, predictor

    frame = synthetic_responses(args.n)
    words = frame["text"].str.split().str.len()
    print(f"{args.n} responses, {words.mean():.1f} words on average; torch {torch.__version__}, "
          f"{torch.get_num_threads()} threads, {os.cpu_count()} cores")
    # Other jobs on the machine slow every stage; the load average says how far to trust the figures.
    print("load average at start: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))

    encoder = timed("load encoder (first call, incl. imports)", 0, metrics.load_encoder)
    cache = metrics.InMemoryEmbeddingCache()
    texts = frame["text"].tolist()
    vectors = timed("embed, cold cache", args.n, lambda: metrics.embed(texts, encoder, cache=cache))
    timed("embed, warm cache", args.n, lambda: metrics.embed(texts, encoder, cache=cache))
    refs = frame["reference_text"].tolist()
    timed("rouge_l", args.n, lambda: metrics.rouge_l(texts, refs))
    timed("meteor (" + "+".join(metrics.meteor_stages()) + ")", args.n, lambda: metrics.meteor(texts, refs))
    per_response = timed("response_metrics (all four, one encoder pass)", args.n,
                         lambda: metrics.response_metrics(frame, encoder=encoder))
    timed("metrics_table", args.n, lambda: metrics.metrics_table(per_response))

    rng = np.random.default_rng(1)
    human = pd.DataFrame({"response_id": frame["response_id"], "mean_rating": rng.uniform(1, 5, args.n)})
    timed(f"metric_human_agreement ({args.boot} resamples)", args.n,
          lambda: metrics.metric_human_agreement(per_response, human, n_boot=args.boot))
    rated = frame.assign(mean_rating=human["mean_rating"])
    fitted = timed("fit_predictor (6-fold by scenario, cached vectors)", args.n,
                   lambda: predictor.fit_predictor(rated, embeddings=vectors))
    sample = texts[:200]
    timed("robustness_table (200 texts x 7 perturbations)", 1600,
          lambda: perturb.robustness_table(fitted, sample))
    print("load average at end:   {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))


if __name__ == "__main__":
    main()
