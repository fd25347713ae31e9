"""Generated model-outputs files (issue 25): prompts x systems, one row per response, as a researcher has them."""

from __future__ import annotations

import csv
import io
import json

TEMPLATE = {
    "slug": "generated",
    "title": "Generated outputs",
    "consent": "A generated study.",
    "instructions": "Rate each response.",
    "construct": "helpful",
    "dimensions": [{"key": "helpfulness", "label": "Helpfulness", "min": 1, "max": 5,
                    "labels": {"1": "Not at all helpful", "5": "Very helpful"}}],
    "recruitment": {"mode": "open"},
}


def outputs_rows(prompts: int, systems: tuple[str, ...] = ("alpha", "beta", "gamma", "delta"), *,
                 strata: dict[str, int] | None = None) -> list[dict[str, str]]:
    """One row per (prompt, system); ``strata`` (name -> number of prompts, summing to ``prompts``) adds a
    ``topic`` column, prompts taking the strata in turn by their counts."""
    topics = [name for name, count in (strata or {}).items() for _ in range(count)]
    assert not strata or len(topics) == prompts
    rows = []
    for p in range(1, prompts + 1):
        for s, system in enumerate(systems):
            row = {"prompt_id": f"P{p:05d}", "prompt": f"Message number {p}: I feel stuck.", "system": system,
                   "condition": "base" if s % 2 == 0 else "tuned", "response": f"Reply {p} of {system}."}
            if strata:
                row["topic"] = topics[p - 1]
            rows.append(row)
    return rows


def csv_bytes(rows: list[dict], columns: list[str] | None = None) -> bytes:
    out = io.StringIO(newline="")
    writer = csv.DictWriter(out, fieldnames=columns or list(rows[0]), extrasaction="ignore")
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue().encode("utf-8")


def jsonl_bytes(rows: list[dict]) -> bytes:
    return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows).encode("utf-8")


def template_bytes(**fields) -> bytes:
    return json.dumps({**TEMPLATE, **fields}).encode("utf-8")
