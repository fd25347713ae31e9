"""Generated TIDE-like study data with planted effects, for tests of analysis.stats.

Layout as in the TIDE fixture: 6 scenarios x 4 model pairings = 24 blocks
(Q1..Q24), each showing 5 responses (model A zero-shot, A fine-tuned, model B
zero-shot, B fine-tuned, reference) in a random order. Every participant sees
every block.

Planted effects (all others are null):

* ``AGE_SYSTEM`` is rated ``AGE_EFFECT`` higher by participants aged 60+;
* in ``REGION_SCENARIO`` participants from ``TOP_REGION`` rate everything
  ``REGION_EFFECT`` higher;
* ``FT_SYSTEM``'s fine-tuned responses are rated ``FT_EFFECT`` higher than its
  zero-shot ones (no other system has a condition effect);
* the reference is rated ``REFERENCE_EFFECT`` higher than any system.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

MODEL_PAIRS = [
    ("Phi-3.5-mini-instruct", "Granite-3.1-3B"),
    ("Qwen2.5-3B", "Qwen2.5-1.5B"),
    ("Qwen2.5-0.5B", "DeepSeek-R1-Distill-Qwen-1.5B"),
    ("Llama-3.2-3B", "Llama-3.2-1B"),
]
REFERENCE_MODEL = "Claude-3.5-Sonnet"
SCENARIOS = [f"S{i}" for i in range(1, 7)]
REGIONS = ["Northeast", "Midwest", "South", "West"]

AGE_SYSTEM, AGE_EFFECT = "Qwen2.5-3B", 1.0
REGION_SCENARIO, TOP_REGION, REGION_EFFECT = "S3", "West", 1.0
FT_SYSTEM, FT_EFFECT = "Llama-3.2-1B", 1.0
REFERENCE_EFFECT = 0.8


def tide_items() -> pd.DataFrame:
    """The 120 items: block_id, scenario, response_id, model, condition."""
    rows = []
    for question in range(1, 25):
        scenario = SCENARIOS[(question - 1) // 4]
        model_a, model_b = MODEL_PAIRS[(question - 1) % 4]
        sources = [(model_a, "zero-shot"), (model_a, "fine-tuned"), (model_b, "zero-shot"),
                   (model_b, "fine-tuned"), (REFERENCE_MODEL, "reference")]
        for option, (model, condition) in enumerate(sources, start=1):
            rows.append({"block_id": f"Q{question}", "scenario": scenario,
                         "response_id": f"Q{question}-R{option}", "model": model, "condition": condition})
    return pd.DataFrame(rows)


def make_participants(n_participants: int = 120, seed: int = 0) -> pd.DataFrame:
    """Participants with ages in years (as TIDE asks) and a share of non-answers in every field."""
    rng = np.random.default_rng(seed)
    ids = [f"P{i:03d}" for i in range(n_participants)]
    ages = []
    for _ in ids:
        kind = rng.random()
        older = rng.random() < 0.4
        if kind < 0.9:
            ages.append(str(int(rng.integers(60, 85) if older else rng.integers(18, 60))))
        else:
            ages.append(str(rng.choice(["Prefer not to answer", "", "sixty"])))
    regions = rng.choice(REGIONS + [""], size=n_participants, p=[0.22, 0.22, 0.22, 0.26, 0.08])
    return pd.DataFrame({
        "participant_id": ids,
        "age": ages,
        "sex": rng.choice(["Female", "Male"], n_participants),
        "gender": rng.choice(["Woman", "Man", "Non-binary", "Prefer not to answer"], n_participants,
                             p=[0.47, 0.45, 0.04, 0.04]),
        "race": rng.choice(["White or Caucasian", "Black or African American", "Asian", "Other/Unknown",
                            "Prefer not to answer"], n_participants, p=[0.6, 0.15, 0.15, 0.05, 0.05]),
        "education": rng.choice(["Graduate or professional degree", "Bachelor's degree",
                                 "Some college but no degree", "Prefer not to answer"], n_participants,
                                p=[0.3, 0.35, 0.3, 0.05]),
        "state": "",
        "region": regions,
    })


def make_ratings(participants: pd.DataFrame, seed: int = 1,
                 dimensions: tuple[str, ...] = ("empathy",)) -> pd.DataFrame:
    """One row per rating, with ranks and best/worst derived from a latent score."""
    rng = np.random.default_rng(seed)
    items = tide_items()
    item_effect = item_effects()
    older = participants["age"].map(_is_older).to_numpy()
    frames = []
    for index, person in enumerate(participants["participant_id"]):
        person_items = items.copy()
        person_items["participant_id"] = person
        positions = np.concatenate([rng.permutation(5) + 1 for _ in range(24)])
        person_items["position"] = positions
        person_items["block_order"] = np.repeat(rng.permutation(24) + 1, 5)
        person_items["seconds_on_block"] = np.repeat(rng.uniform(15, 90, 24), 5)
        latent = (
            2.8
            + rng.normal(0, 0.4)  # participant leniency
            + person_items["response_id"].map(item_effect).to_numpy()
            + REFERENCE_EFFECT * (person_items["condition"] == "reference").to_numpy()
            + FT_EFFECT * ((person_items["model"] == FT_SYSTEM) & (person_items["condition"] == "fine-tuned")).to_numpy()
            + AGE_EFFECT * older[index] * (person_items["model"] == AGE_SYSTEM).to_numpy()
            + REGION_EFFECT * (participants["region"].iloc[index] == TOP_REGION)
            * (person_items["scenario"] == REGION_SCENARIO).to_numpy()
        )
        for dimension in dimensions:
            noisy = latent + rng.normal(0, 0.7, len(latent))
            rated = person_items.assign(dimension=dimension, rating=np.clip(np.round(noisy), 1, 5).astype(float))
            order_score = noisy + rng.normal(0, 0.3, len(noisy))
            rated["rank"] = (
                pd.Series(-order_score, index=rated.index).groupby(rated["block_id"]).rank(method="first")
            )
            rated["best"] = rated["rank"] == 1
            rated["worst"] = rated["rank"] == 5
            frames.append(rated)
    ratings = pd.concat(frames, ignore_index=True)
    columns = ["participant_id", "block_id", "scenario", "response_id", "model", "condition", "dimension",
               "position", "rating", "rank", "block_order", "seconds_on_block", "best", "worst"]
    return ratings[columns]


def item_effects(seed: int = 100) -> dict[str, float]:
    """Each response's own quality, shared by the human ratings and the gold scores.

    A system's zero-shot and fine-tuned responses in a block share one
    quality, so the only condition effect is the planted one.
    """
    items = tide_items()
    source = items["block_id"] + ":" + items["model"]
    quality = dict(zip(source.unique(), np.random.default_rng(seed).normal(0, 0.25, source.nunique())))
    return dict(zip(items["response_id"], source.map(quality)))


def make_gold(seed: int = 2) -> pd.DataFrame:
    """Gold scores that track the planted item quality (reference highest)."""
    rng = np.random.default_rng(seed)
    items = tide_items()
    score = (2.8 + REFERENCE_EFFECT * (items["condition"] == "reference")
             + items["response_id"].map(item_effects()) + rng.normal(0, 0.1, len(items)))
    return pd.DataFrame({"response_id": items["response_id"], "gold_score": score.round(2)})


def _is_older(age: str) -> bool:
    text = str(age)
    if text.isdigit():
        return int(text) >= 60
    return text in {"60-69", "70+"}


def make_study(n_participants: int = 120, seed: int = 0) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(ratings, participants) of a full TIDE-like study."""
    participants = make_participants(n_participants, seed)
    return make_ratings(participants, seed + 1), participants


def registered_analyses() -> dict:
    """The registry's analyses that take the ratings frame (and the participants frame), by name."""
    from analysis import registry

    return {a.name: a for a in registry.REGISTERED
            if a.function is not None and set(a.inputs) <= {"ratings", "participants"}}


def tide_design():
    """The design of the TIDE fixture (zero-shot -> fine-tuned, a reference, DESIGN 3.3's subgroups, US regions)."""
    import json

    from analysis.design import design_of
    from surveys.definition import parse_definition
    from tests.support.paths import FIXTURES

    return design_of(parse_definition(json.loads((FIXTURES / "tide.json").read_text())))


TIDE = tide_design()
#: Keyword arguments of the baseline-vs-treatment analyses for the generated TIDE-like frames.
PAIR = {"baseline": TIDE.baseline, "treatment": TIDE.treatment}
WIN = {**PAIR, "references": TIDE.references}
SUBGROUPS = TIDE.subgroups


def subgroups_named(*keys: str) -> tuple:
    return tuple(s for s in SUBGROUPS if s.key in keys)


def run_registered(name: str, ratings, participants, **options):
    """One registered analysis on these frames (with the TIDE design's keywords), inputs in registry order."""
    analysis = registered_analyses()[name]
    frames = {"ratings": ratings, "participants": participants}
    design = TIDE.options_for(analysis.design_options)
    return analysis.function(*(frames[i] for i in analysis.inputs), **(design | options))


def no_item_effect(seed: int) -> pd.DataFrame:
    """15 participants x 8 items with participant effects and noise only: the item variance is (about) zero."""
    rng = np.random.default_rng(seed)
    rows = []
    for p in range(15):
        shift = rng.normal(0, 0.8)
        for i in range(8):
            rows.append({"participant_id": f"p{p}", "response_id": f"r{i}", "model": "AB"[i % 4 >= 2],
                         "condition": (PAIR["baseline"], PAIR["treatment"])[i % 2],
                         "rating": float(np.clip(np.round(3 + shift + rng.normal(0, 0.7)), 1, 5))})
    return pd.DataFrame(rows)


def hand_holm(pvalues: list[float]) -> list[float]:
    """Holm step-down written out: sort, multiply by (m - i), enforce monotonicity, cap at 1."""
    m = len(pvalues)
    order = sorted(range(m), key=lambda i: pvalues[i])
    adjusted = [0.0] * m
    running = 0.0
    for step, index in enumerate(order):
        running = max(running, min(1.0, (m - step) * pvalues[index]))
        adjusted[index] = running
    return adjusted


def share_of_blocks(ratings: pd.DataFrame, blocks_per_participant: int, *, block: str = "block_id") -> pd.DataFrame:
    """The ratings of an allocated design: participant i keeps blocks i*k .. i*k + k - 1 (cyclically) only.

    With n participants and B blocks every block is judged n * k / B times (within 1), as an
    allocation of k blocks each would give; each participant's blocks are whole.
    """
    blocks = sorted(ratings[block].astype(str).unique())
    people = sorted(ratings["participant_id"].astype(str).unique())
    kept = {(person, blocks[(index * blocks_per_participant + offset) % len(blocks)])
            for index, person in enumerate(people) for offset in range(blocks_per_participant)}
    pairs = list(zip(ratings["participant_id"].astype(str), ratings[block].astype(str)))
    return ratings[[pair in kept for pair in pairs]].reset_index(drop=True)
