"""Generated model outputs and the study definition built from them, for allocation tests and benchmarks.

``outputs_rows`` writes what a researcher's outputs file holds (one row per response: prompt_id, prompt,
system, condition, response); ``definition_from_outputs`` samples prompts reproducibly and fills scenarios
and blocks, the way ``manage.py new_study`` does (issue 25; until that command lands here, this helper
stands in for it, and the lead switches the tests to it).
"""

from __future__ import annotations

import random
from typing import Any

SYSTEMS = ("alpha", "beta", "gamma", "delta")


def outputs_rows(n_prompts: int, systems: tuple[str, ...] = SYSTEMS, *, seed: int = 0) -> list[dict[str, str]]:
    rng = random.Random(seed)
    return [
        {"prompt_id": f"P{p:05d}", "prompt": f"Prompt {p}: I feel {rng.choice(['low', 'anxious', 'alone'])} today.",
         "system": system, "condition": "fine-tuned" if k % 2 else "zero-shot",
         "response": f"{system} answers prompt {p}: that sounds hard ({rng.randint(1, 999)})."}
        for p in range(n_prompts) for k, system in enumerate(systems)
    ]


def definition_from_outputs(
    rows: list[dict[str, str]],
    *,
    slug: str = "generated",
    sample: dict[str, Any] | None = None,
    allocation: dict[str, int] | str = "all",
    blocks_per_prompt: int = 1,
    pairwise: bool = False,
    attention_checks: bool = True,
    recruitment: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A complete definition: ``sample`` ({prompts, seed}) draws prompts; each prompt gives
    ``blocks_per_prompt`` blocks (with 4 systems and 4 blocks per prompt: the cyclic pairs AB, BC, CD, DA;
    with 1: every system in one block)."""
    by_prompt: dict[str, list[dict[str, str]]] = {}
    for row in rows:
        by_prompt.setdefault(row["prompt_id"], []).append(row)
    prompt_ids = sorted(by_prompt)
    if sample is not None:
        prompt_ids = sorted(random.Random(sample["seed"]).sample(prompt_ids, sample["prompts"]))
    systems = sorted({row["system"] for row in rows})
    blocks = []
    for prompt_id in prompt_ids:
        responses = by_prompt[prompt_id]
        groups = ([responses] if blocks_per_prompt == 1 else
                  [[responses[b % len(responses)], responses[(b + 1) % len(responses)]] for b in range(blocks_per_prompt)])
        for b, group in enumerate(groups):
            key = prompt_id if blocks_per_prompt == 1 else f"{prompt_id}-{b + 1}"
            blocks.append({"id": key, "scenario": prompt_id, "responses": [
                {"id": f"{key}-{r['system']}", "system": r["system"], "condition": r["condition"], "text": r["response"]}
                for r in group]})
    definition: dict[str, Any] = {
        "slug": slug, "title": "Generated study", "consent": "You rate replies.", "instructions": "Rate each reply.",
        "construct": "helpful", "systems": systems, "conditions": ["zero-shot", "fine-tuned"],
        "scenarios": [{"id": p, "user_input": by_prompt[p][0]["prompt"]} for p in prompt_ids],
        "blocks": blocks,
        "recruitment": recruitment or {"mode": "panel", "completion_code": "GENERATED1"},
        "allocation": allocation,
    }
    if sample is not None:
        definition["sample"] = sample
    if pairwise:
        definition["pairwise"] = True
    else:
        definition["dimensions"] = [{"key": "helpfulness", "label": "How helpful is this reply?", "min": 1, "max": 5}]
        if attention_checks:
            definition["attention_checks"] = [
                {"id": "AC1", "text": "To show you read this statement, select 2 on the scale.", "expected": 2}]
    return definition


def without_sample(definition: dict[str, Any]) -> dict[str, Any]:
    """The definition as the loader takes it until the ``sample`` field is in the schema (outputs' branch)."""
    return {key: value for key, value in definition.items() if key != "sample"}
