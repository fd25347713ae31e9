"""Generate DESIGN 3.1 CSVs (participants.csv, ratings.csv, gold.csv) for N synthetic TIDE participants.

Everything is vectorised with numpy (10,000 participants = 1.2 million
rating rows in a few seconds). Behaviours, seeded:

- honest (about 78%): rating = gold score + the participant's leniency + a
  small fine-tuning effect + noise, ranks follow the ratings, 30-120 s a block;
- speeder (5%): 2-9 s on most blocks, random ratings;
- straight-liner (5%): the same extreme rating (1 or 5) everywhere;
- attention failer (4%): honest answers but ``attention_passed=false``;
- early exit (5%): leaves after 1-23 blocks (the last one shown, not submitted);
- random (3%): uniform ratings and ranks.

Demographics are spread over the TIDE fixture's wording (its Table 3
categories: ages in years, genders, races, education, employment) and US states of every Census
region, with some blanks, "Outside the US" and "Prefer not to answer".

Usage::

    python bench/generate.py --participants 500 --out /tmp/bench-500
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
BEHAVIOURS = ("honest", "speeder", "straightliner", "attention", "early_exit", "random")
SHARES = (0.78, 0.05, 0.05, 0.04, 0.05, 0.03)

AGES = ["22", "27", "31", "38", "44", "49", "53", "58", "61", "64", "68", "74", "Prefer not to answer"]
AGE_P = [0.09, 0.1, 0.1, 0.11, 0.1, 0.1, 0.09, 0.09, 0.07, 0.05, 0.05, 0.03, 0.02]
SEXES = ["Female", "Male", "Intersex", "Prefer not to answer", ""]
SEX_P = [0.5, 0.46, 0.01, 0.02, 0.01]
GENDERS = ["Woman", "Man", "Non-binary", "Other/Unknown", "Prefer not to answer", ""]
GENDER_P = [0.49, 0.44, 0.03, 0.01, 0.02, 0.01]
RACES = ["White or Caucasian", "Black or African American", "Asian", "American Indian or Alaska Native",
         "Native Hawaiian or Other Pacific Islander", "Two or more races", "Other/Unknown", "Prefer not to answer"]
RACE_P = [0.6, 0.13, 0.1, 0.02, 0.01, 0.08, 0.03, 0.03]
HISPANIC = ["Yes", "No", "Prefer not to answer", ""]
HISPANIC_P = [0.15, 0.8, 0.03, 0.02]
EDUCATION = ["High school diploma or GED", "Some college, but no degree", "Associate degree", "Bachelor's degree",
             "Graduate or professional degree", "Prefer not to answer"]
EDUCATION_P = [0.15, 0.2, 0.1, 0.33, 0.2, 0.02]
EMPLOYMENT = ["Working full-time", "Working part-time", "Not working and not looking for work",
              "Unemployed and looking for work", "Student", "Retired", "Other/Unknown", "Prefer not to answer"]
EMPLOYMENT_P = [0.4, 0.14, 0.1, 0.08, 0.1, 0.12, 0.04, 0.02]
STATES = ("AL AK AZ AR CA CO CT DE DC FL GA HI ID IL IN IA KS KY LA ME MD MA MI MN MS MO MT NE NV NH NJ NM "
          "NY NC ND OH OK OR PA RI SC SD TN TX UT VT VA WA WV WI WY").split()
BLOCK_SECONDS = (30, 120)


def study_items(definition_path: Path = ROOT / "fixtures" / "tide.json") -> pd.DataFrame:
    """block_id, response_id, condition per item of the study definition, in block order."""
    definition = json.loads(definition_path.read_text())
    return pd.DataFrame(
        [{"block_id": b["id"], "response_id": r["id"], "condition": r["condition"]}
         for b in definition["blocks"] for r in b["responses"]]
    )


def _pick(rng: np.random.Generator, choices: list[str], p: list[float], n: int) -> np.ndarray:
    p = np.asarray(p, dtype=float)
    return np.asarray(choices, dtype=object)[rng.choice(len(choices), size=n, p=p / p.sum())]


def _iso(seconds: np.ndarray) -> np.ndarray:
    """Epoch seconds -> "2025-03-03T09:00:00Z"."""
    text = np.datetime_as_string(seconds.astype("datetime64[s]"), unit="s")
    return np.char.add(text, "Z").astype(object)


def generate(n: int, seed: int = 0) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(participants, ratings, gold) frames of text columns, as the CSVs hold them."""
    rng = np.random.default_rng(seed)
    items = study_items()
    block_keys = items["block_id"].unique()
    n_blocks, per_block = len(block_keys), len(items) // len(block_keys)
    gold = rng.uniform(1.8, 4.6, len(items)).round(2)
    gold[items["condition"].to_numpy() == "reference"] += 0.3
    gold = np.clip(gold, 1, 5)
    fine_tuned = np.where(items["condition"].to_numpy() == "fine-tuned", 0.2, 0.0)

    behaviour = rng.choice(len(BEHAVIOURS), size=n, p=SHARES)
    kind = np.asarray(BEHAVIOURS, dtype=object)[behaviour]
    start = (np.datetime64("2025-03-01T08:00:00", "s").astype(np.int64)
             + rng.integers(0, 14 * 24 * 3600, n))
    n_shown = np.where(kind == "early_exit", rng.integers(1, n_blocks, n), n_blocks)

    # One row per (participant, display slot) with the block shown there.
    order = np.argsort(rng.random((n, n_blocks)), axis=1)
    seconds = rng.uniform(*BLOCK_SECONDS, (n, n_blocks))
    speeding = (kind == "speeder")[:, None] & (rng.random((n, n_blocks)) < 0.8)
    seconds = np.where(speeding, rng.uniform(2, 9, (n, n_blocks)), seconds).round()
    gaps = rng.uniform(3, 15, (n, n_blocks)).round()
    block_start = start[:, None] + 60 + np.cumsum(seconds + gaps, axis=1) - seconds
    block_end = block_start + seconds
    shown = np.arange(n_blocks)[None, :] < n_shown[:, None]
    submitted = shown & ~((kind == "early_exit")[:, None] & (np.arange(n_blocks)[None, :] == n_shown[:, None] - 1))
    last_end = np.where(submitted, block_end, 0).max(axis=1)
    finished = np.where(kind == "early_exit", -1, last_end + rng.uniform(60, 300, n).round())

    # Expand to one row per rating: participant x slot x position.
    p_index, slot = np.nonzero(shown)
    block = order[p_index, slot]
    rows = np.repeat(np.arange(len(p_index)), per_block)
    p_of = p_index[rows]
    item = block[rows] * per_block + np.tile(np.arange(per_block), len(p_index))
    position = (np.argsort(rng.random((len(p_index), per_block)), axis=1) + 1).ravel()

    leniency = rng.normal(0, 0.4, n)
    rating = gold[item] + fine_tuned[item] + leniency[p_of] + rng.normal(0, 0.7, len(item))
    random_like = np.isin(kind[p_of], ["speeder", "random"])
    rating = np.where(random_like, rng.uniform(0.5, 5.5, len(item)), rating)
    extreme = np.where(rng.random(n) < 0.5, 1.0, 5.0)
    rating = np.where(kind[p_of] == "straightliner", extreme[p_of], rating)
    rating = np.clip(np.rint(rating), 1, 5).astype(np.int64)
    # Rank 1 = highest rating; ties broken at random.
    noisy = (-rating + rng.random(len(rating)) * 0.9).reshape(-1, per_block)
    rank = (np.argsort(np.argsort(noisy, axis=1), axis=1) + 1).ravel()
    is_submitted = submitted[p_index, slot][rows]

    ids = np.char.add("P", np.char.zfill(np.arange(1, n + 1).astype(str), 6)).astype(object)
    ratings = pd.DataFrame({
        "participant_id": ids[p_of],
        "block_id": block_keys[block[rows]],
        "response_id": items["response_id"].to_numpy()[item],
        "position": position,
        "rating": np.where(is_submitted, rating.astype(str), ""),
        "rank": np.where(is_submitted, rank.astype(str), ""),
        "block_started_at": _iso(block_start[p_index, slot])[rows],
        "block_submitted_at": np.where(is_submitted, _iso(block_end[p_index, slot])[rows], ""),
    })

    attention = np.where(kind == "attention", "false", "true").astype(object)
    attention[(kind == "early_exit")] = ""
    state = np.asarray(STATES + ["", "Outside the US", "Prefer not to answer"], dtype=object)[
        rng.choice(len(STATES) + 3, size=n, p=np.r_[np.full(len(STATES), 0.94 / len(STATES)), 0.03, 0.02, 0.01])
    ]
    participants = pd.DataFrame({
        "participant_id": ids,
        "started_at": _iso(start),
        "finished_at": np.where(finished >= 0, _iso(np.maximum(finished, 0)), ""),
        "attention_passed": attention,
        "age": _pick(rng, AGES, AGE_P, n),
        "sex": _pick(rng, SEXES, SEX_P, n),
        "gender": _pick(rng, GENDERS, GENDER_P, n),
        "race": _pick(rng, RACES, RACE_P, n),
        "hispanic": _pick(rng, HISPANIC, HISPANIC_P, n),
        "education": _pick(rng, EDUCATION, EDUCATION_P, n),
        "employment": _pick(rng, EMPLOYMENT, EMPLOYMENT_P, n),
        "state": state,
    })
    gold_frame = pd.DataFrame({"response_id": items["response_id"], "gold_score": gold.round(2)})
    return participants, ratings, gold_frame


def write(out: Path, n: int, seed: int = 0) -> dict[str, Path]:
    """Write the three CSVs into ``out``; returns their paths."""
    out.mkdir(parents=True, exist_ok=True)
    participants, ratings, gold = generate(n, seed)
    paths = {"participants": out / "participants.csv", "ratings": out / "ratings.csv", "gold": out / "gold.csv"}
    participants.to_csv(paths["participants"], index=False)
    ratings.to_csv(paths["ratings"], index=False)
    gold.to_csv(paths["gold"], index=False)
    return paths


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--participants", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=ROOT / "var" / "bench")
    args = parser.parse_args()
    began = time.perf_counter()
    paths = write(args.out, args.participants, args.seed)
    rows = sum(1 for _ in paths["ratings"].open()) - 1
    print(f"{args.participants} participants, {rows} rating rows -> {args.out} in {time.perf_counter() - began:.1f} s")


if __name__ == "__main__":
    main()
