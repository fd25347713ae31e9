"""Item quality: what an honest participant would tend to answer, for bots that may look behind the page."""

from __future__ import annotations

import hashlib

from analysis.design import Design, study_design
from surveys.models import Item, ItemPlacement, Study

from .personas import Quality

# The expected rating of a condition by its role in the study's design (a plausible effect for demos and tests).
ROLE_QUALITY = {"references": 4.1, "treatment": 3.6, "baseline": 2.9}
OTHER_QUALITY = 3.2


def condition_quality(design: Design) -> dict[str, float]:
    """Condition name -> expected rating, from the roles the study's design gives its conditions."""
    roles = {name: ROLE_QUALITY["references"] for name in design.references}
    if design.baseline:
        roles[design.baseline] = ROLE_QUALITY["baseline"]
    if design.treatment:
        roles[design.treatment] = ROLE_QUALITY["treatment"]
    return roles


def item_quality(item: Item, gold: float | None = None, by_condition: dict[str, float] | None = None) -> float:
    """A stable expected rating per item: the gold score if any, else by the role of its condition."""
    if gold is not None:
        return gold
    base = (by_condition or {}).get(item.condition.name, OTHER_QUALITY)
    jitter = int(hashlib.sha256(item.key.encode()).hexdigest()[:4], 16) / 0xFFFF - 0.5
    return base + jitter


def quality_from_db(study: Study) -> Quality:
    """placement id -> item quality, for bots that may look behind the page (tests, demo)."""
    items = {i.pk: i for i in Item.objects.filter(study=study).select_related("condition")}
    gold = _gold_scores(study)
    by_condition = condition_quality(study_design(study.pk))
    cache: dict[int, float] = {}

    def quality(pid: int) -> float | None:
        if pid not in cache:
            # One query per page: every placement of the visit that holds this one.
            for other, item_id in ItemPlacement.objects.filter(visit__placements__pk=pid).values_list("pk", "item_id"):
                cache[other] = item_quality(items[item_id], gold.get(item_id), by_condition) if item_id in items else None
        return cache.get(pid)

    return quality


def _gold_scores(study: Study) -> dict[int, float]:
    try:
        from analysis.models import GoldScore
    except ImportError:  # pragma: no cover - the analysis app is always installed here
        return {}
    return dict(GoldScore.objects.filter(item__study=study).values_list("item_id", "score"))
