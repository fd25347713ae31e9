"""Item quality: what an honest participant would tend to answer, for bots that may look behind the page."""

from __future__ import annotations

import hashlib

from surveys.models import Item, ItemPlacement, Study

from .personas import Quality

CONDITION_QUALITY = {"reference": 4.2, "fine-tuned": 3.6, "zero-shot": 2.9, "human": 4.0}


def item_quality(item: Item, gold: float | None = None) -> float:
    """A stable expected rating per item: the gold score if any, else by condition."""
    if gold is not None:
        return gold
    base = CONDITION_QUALITY.get(item.condition.name, 3.2)
    jitter = int(hashlib.sha256(item.key.encode()).hexdigest()[:4], 16) / 0xFFFF - 0.5
    return base + jitter


def quality_from_db(study: Study) -> Quality:
    """placement id -> item quality, for bots that may look behind the page (tests, demo)."""
    items = {i.pk: i for i in Item.objects.filter(study=study).select_related("condition")}
    gold = _gold_scores(study)
    cache: dict[int, float] = {}

    def quality(pid: int) -> float | None:
        if pid not in cache:
            # One query per page: every placement of the visit that holds this one.
            for other, item_id in ItemPlacement.objects.filter(visit__placements__pk=pid).values_list("pk", "item_id"):
                cache[other] = item_quality(items[item_id], gold.get(item_id)) if item_id in items else None
        return cache.get(pid)

    return quality


def _gold_scores(study: Study) -> dict[int, float]:
    try:
        from analysis.models import GoldScore
    except ImportError:  # pragma: no cover - the analysis app is always installed here
        return {}
    return dict(GoldScore.objects.filter(item__study=study).values_list("item_id", "score"))
