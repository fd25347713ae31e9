"""A new participant's sequence, drawn from their random generator: pure functions, no database.

Enrolment reads what they need (the blocks, checks, items and how often each item was shown first) and
writes what they return; both enrolment paths (``surveys.services`` and, on PostgreSQL with allocation,
``surveys.enrolment_pg``) call them in the same order, so one seed and one set of blocks give one sequence.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterable
from typing import TypeVar

Page = TypeVar("Page")


def pages_order(blocks: list[Page], checks: list[Page], rng: random.Random) -> list[Page]:
    """``blocks`` shuffled (in place), with the attention checks inserted among them."""
    rng.shuffle(blocks)
    pages = list(blocks)
    checks = list(checks)
    for slot in sorted(_check_slots(len(blocks), len(checks), rng), reverse=True):
        pages.insert(slot, checks.pop())
    return pages


def _check_slots(n_blocks: int, n_checks: int, rng: random.Random) -> list[int]:
    """Insertion indexes for the checks: never before the first block, and
    between blocks when there is room, so two checks never follow each other."""
    if n_checks == 0:
        return []
    inner = list(range(1, n_blocks))
    if len(inner) >= n_checks:
        return rng.sample(inner, n_checks)
    return [rng.randint(1, max(n_blocks, 1)) for _ in range(n_checks)]


def items_by_block(rows: Iterable[tuple[int, int]]) -> dict[int, list[int]]:
    """``(item, block)`` rows in the items' display-base order (option, id) grouped by block, the blocks in
    the order their first item comes (the order ``rotations`` draws them in)."""
    grouped: dict[int, list[int]] = {}
    for item_id, block_id in rows:
        grouped.setdefault(block_id, []).append(item_id)
    return grouped


def rotations(*, study_key: str, items: dict[int, list[int]], first_counts: Counter,
              rng: random.Random) -> dict[int, list[int]]:
    """The display order of every block's items for a new participant.

    Each block's order is a rotation of a fixed base permutation (a cyclic Latin square), so over
    participants each item appears in each position equally often. A rotation is identified by the item it
    puts first: the least-shown-first items' rotations are the candidates, one drawn at random."""
    orders = {}
    for block_id, item_ids in items.items():
        base = base_permutation(study_key, block_id, item_ids)
        least = min(first_counts[item_id] for item_id in base)
        candidates = [r for r, item_id in enumerate(base) if first_counts[item_id] == least]
        r = rng.choice(candidates)
        orders[block_id] = base[r:] + base[:r]
    return orders


def base_permutation(study_key: str, block_id: int, item_ids: list[int]) -> list[int]:
    # Fixed per block (not per participant), so rotations of it form a Latin square.
    base = list(item_ids)
    random.Random(f"{study_key}:{block_id}").shuffle(base)
    return base
