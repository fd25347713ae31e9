"""False-positive rates of the baseline vs treatment tests under the null, per design (issue 26, item 1).

Simulates studies where the treatment's benefit has mean 0 but varies (by item
for a panel of raters and for an incomplete design, by participant for a crowd
that judges everything), runs ``analysis.stats.dimension_wilcoxon`` on each,
and prints per level the share of studies with p < .05. The levels a design's
table leads with (``valid_for_design``) should stay within 0.03-0.07; the
rater x item pairing is printed for comparison (it treats pairs as independent
and over-rejects when the benefit varies by item).

    .venv/bin/python bench/null_rates.py [--studies 1000] [--seed 1] [--benefit-sd 1.0]

Pure: no Django, no database (``analysis.stats`` imports without settings).
tests/test_stats_clustered.py runs the same simulation (slow test) and a small
deterministic version of it.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from analysis.stats.paired_dimensions import TABLE_LEVELS, dimension_wilcoxon  # noqa: E402

ALPHA = 0.05
BASELINE, TREATMENT = "base", "tuned"


@dataclass(frozen=True)
class NullDesign:
    """One simulated design: who judges what, and where the (mean-zero) benefit varies."""

    name: str
    raters: int
    items: int
    per_rater: int  # items each rater judges (== items: everyone judges everything)
    item_benefit_sd: float = 0.0
    rater_benefit_sd: float = 0.0

    @property
    def complete(self) -> bool:
        return self.per_rater == self.items


DESIGNS = (
    # CUHK's counselor panel: 5 raters judge 100 dialogues; the benefit varies by dialogue.
    NullDesign("5 raters x 100 items", raters=5, items=100, per_rater=100, item_benefit_sd=0.5),
    # TIDE-like crowd: 150 participants judge all 24 blocks; the benefit varies by participant.
    NullDesign("150 participants x 24 blocks", raters=150, items=24, per_rater=24, rater_benefit_sd=0.5),
    # Incomplete: 60 participants judge 8 of 40 items each (12 judgements per item); benefit varies by item.
    NullDesign("incomplete: 60 participants x 8 of 40 items", raters=60, items=40, per_rater=8,
               item_benefit_sd=0.5),
)


def simulate(design: NullDesign, rng: np.random.Generator) -> pd.DataFrame:
    """One study's ratings (1-5 integers) under the null: the benefit's mean is 0 in the population."""
    leniency = rng.normal(0, 0.4, design.raters)
    difficulty = rng.normal(0, 0.5, design.items)
    item_benefit = rng.normal(0, design.item_benefit_sd, design.items)
    rater_benefit = rng.normal(0, design.rater_benefit_sd, design.raters)
    raters = np.repeat(np.arange(design.raters), design.per_rater)
    # A balanced rotation: rater r judges items r*k .. r*k+k-1 (mod items), so each item is judged equally often.
    items = (raters * design.per_rater + np.tile(np.arange(design.per_rater), design.raters)) % design.items
    rows = len(raters)
    base = 3 + leniency[raters] + difficulty[items]
    gain = item_benefit[items] + rater_benefit[raters]
    ratings = np.concatenate([base + rng.normal(0, 0.9, rows), base + gain + rng.normal(0, 0.9, rows)])
    return pd.DataFrame({
        "participant_id": np.tile(raters, 2).astype(str),
        "block_id": np.tile(items, 2).astype(str),
        "condition": np.repeat([BASELINE, TREATMENT], rows),
        "dimension": "overall",
        "rating": np.clip(np.round(ratings), 1, 5),
    })


def null_rates(design: NullDesign, studies: int, seed: int = 1) -> tuple[dict[str, float], tuple[str, ...]]:
    """Share of ``studies`` simulated null studies with p < ALPHA per level, and the levels valid for the design."""
    rng = np.random.default_rng(seed)
    rejections = dict.fromkeys(TABLE_LEVELS, 0)
    tested = dict.fromkeys(TABLE_LEVELS, 0)
    valid: tuple[str, ...] = ()
    for _ in range(studies):
        table = dimension_wilcoxon(simulate(design, rng), baseline=BASELINE, treatment=TREATMENT,
                                   complete_blocks=design.complete)
        valid = tuple(table.loc[table["valid_for_design"].astype(bool), "level"])
        for level, p in zip(table["level"], table["p"]):
            if np.isfinite(p):
                tested[level] += 1
                rejections[level] += p < ALPHA
    rates = {level: rejections[level] / tested[level] for level in TABLE_LEVELS if tested[level]}
    return rates, valid


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--studies", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--benefit-sd", type=float, default=None,
                        help="SD of the benefit across items (or participants) instead of 0.5")
    args = parser.parse_args()
    for design in DESIGNS:
        if args.benefit_sd is not None:
            design = replace(design, item_benefit_sd=args.benefit_sd if design.item_benefit_sd else 0.0,
                             rater_benefit_sd=args.benefit_sd if design.rater_benefit_sd else 0.0)
        began = time.perf_counter()
        rates, valid = null_rates(design, args.studies, args.seed)
        print(f"{design.name}: {args.studies} null studies ({time.perf_counter() - began:.1f} s)")
        for level, rate in rates.items():
            mark = "valid, leads" if level in valid else "not valid for this design"
            passed = 0.03 <= rate <= 0.07
            verdict = f"  target 0.03-0.07: {'PASS' if passed else 'FAIL'}" if level in valid else ""
            print(f"  {level:<11} p<.05 in {rate:.3f} of studies  ({mark}){verdict}")


if __name__ == "__main__":
    main()
