"""Reads for the live dashboard. Each function is a fixed number of queries,
whatever the number of participants."""

from __future__ import annotations

from datetime import timedelta
from statistics import median
from typing import Any

from django.db.models import Count, Q, Sum
from django.db.models.functions import TruncHour

from web import clock

from .coverage import block_counts, block_coverage_rows, coverage_summary
from .models import BlockVisit, ConsentDecline, Item, ItemPlacement, Participant, Study, TurnAway
from .places import live_hold

IDLE_AFTER = timedelta(minutes=15)


def study_funnel(study: Study) -> dict[str, Any]:
    now = clock.now()
    counts = Participant.objects.filter(study=study, is_preview=False).aggregate(
        holding=Count("id", filter=live_hold(now)),
        # Still in progress after their hold lapsed: their place may go to a newcomer.
        time_up=Count("id", filter=Q(status=Participant.Status.IN_PROGRESS, hold_expires_at__lte=now)),
        consented=Count("id"),
        in_progress=Count("id", filter=Q(status=Participant.Status.IN_PROGRESS)),
        completed=Count("id", filter=Q(status=Participant.Status.COMPLETED)),
        exited=Count("id", filter=Q(status=Participant.Status.EXITED)),
        idle=Count(
            "id",
            filter=Q(status=Participant.Status.IN_PROGRESS)
            & (Q(last_seen_at__lt=now - IDLE_AFTER) | Q(last_seen_at__isnull=True, started_at__lt=now - IDLE_AFTER)),
        ),
    )
    declined = ConsentDecline.objects.filter(study=study).aggregate(n=Sum("count"))["n"] or 0
    turned_away = TurnAway.objects.filter(study=study).aggregate(n=Sum("count"))["n"] or 0
    # People who entered but left before consenting leave no trace by design.
    entered = counts["consented"] + declined + turned_away
    target = study.target_completions
    places_left = None if target is None else max(target - counts["completed"] - counts["holding"], 0)
    return {**counts, "declined": declined, "turned_away": turned_away, "entered": entered,
            "target": target, "places_left": places_left}


def completions_by_hour(study: Study) -> list[dict[str, Any]]:
    rows = (
        Participant.objects.filter(study=study, is_preview=False, status=Participant.Status.COMPLETED)
        .annotate(hour=TruncHour("finished_at"))
        .values("hour")
        .annotate(n=Count("id"))
        .order_by("hour")
    )
    return [{"hour": r["hour"].isoformat(), "n": r["n"]} for r in rows]


def duration_summary(study: Study) -> dict[str, Any]:
    pairs = Participant.objects.filter(
        study=study, is_preview=False, status=Participant.Status.COMPLETED, started_at__isnull=False
    ).values_list("started_at", "finished_at")
    minutes = sorted(round((finished - started).total_seconds() / 60, 2) for started, finished in pairs)
    return {"n": len(minutes), "median": median(minutes) if minutes else None, "minutes": minutes}


def attention_summary(study: Study) -> dict[str, int]:
    # Through the study's attention checks (their visits are its participants'), not its participants: the
    # planner then reads the checks' visits from their index whatever it believes of the tables' sizes, where
    # from the participants it may visit every page of each (0.06-0.19 s at 2,000 participants, statistics stale).
    return BlockVisit.objects.filter(
        attention_check__study=study, participant__is_preview=False, submitted_at__isnull=False
    ).aggregate(
        answered=Count("id"),
        failed=Count("id", filter=Q(attention_passed=False)),
        participants_failing=Count("participant", filter=Q(attention_passed=False), distinct=True),
    )


def _position_counts(study: Study) -> dict[int, dict[int, int]]:
    """Showings per item and position, previews left out: item id -> {position: n}, positions never used absent.

    Grouped over the placements of the study's items (a hash join to 16,000 items), less the previews' (a few
    participants): filtering by participant instead joins every placement to its visit and participant, three
    times the work at 80,000 placements."""
    counted: dict[int, dict[int, int]] = {}
    for item_id, position, n in (ItemPlacement.objects.filter(item__study=study)
                                 .values_list("item_id", "position").annotate(n=Count("pk")).order_by()
                                 .values_list("item_id", "position", "n")):
        counted.setdefault(item_id, {})[position] = n
    for item_id, position, n in (ItemPlacement.objects.filter(visit__participant__study=study,
                                                              visit__participant__is_preview=True)
                                 .values_list("item_id", "position").annotate(n=Count("pk")).order_by()
                                 .values_list("item_id", "position", "n")):
        by_position = counted[item_id]
        by_position[position] -= n
        if not by_position[position]:  # shown in previews only: as if never shown
            del by_position[position]
            if not by_position:
                del counted[item_id]
    return counted


def _item_positions(study: Study) -> list[tuple[str, str, dict[int, int], list[int]]]:
    """Per item shown at least once, in the definition's order: its key, its block's key, its showings per
    position and the positions its block used (sorted; where the item was never shown, it counts 0)."""
    counted = _position_counts(study)
    items = [(item_id, key, block) for item_id, key, block in
             Item.objects.filter(study=study).order_by("block__order", "option", "pk")
             .values_list("pk", "key", "block__key") if item_id in counted]
    positions: dict[str, set[int]] = {}
    for item_id, _, block in items:
        positions.setdefault(block, set()).update(counted[item_id])
    sorted_positions = {block: sorted(used) for block, used in positions.items()}
    return [(key, block, counted[item_id], sorted_positions[block]) for item_id, key, block in items]


def position_coverage(study: Study) -> list[dict[str, Any]]:
    """How often each item was shown at each position (is counterbalancing holding?).

    One row per item and position of its block, zeros included. ``expected`` is what perfect
    counterbalancing gives: the item's showings spread evenly over its block's positions; ``deviation``
    is observed minus expected, so the heatmap shows imbalance rather than raw counts, where a
    difference of one looks as stark as a real skew.
    """
    return _coverage_dicts(_item_positions(study))


def _coverage_dicts(items: list[tuple[str, str, dict[int, int], list[int]]]) -> list[dict[str, Any]]:
    coverage = []
    for item, block, by_position, block_positions in items:
        expected = sum(by_position.values()) / len(block_positions)
        coverage.extend({"item": item, "block": block, "position": position, "n": by_position.get(position, 0),
                         "expected": round(expected, 3), "deviation": round(by_position.get(position, 0) - expected, 3)}
                        for position in block_positions)
    return coverage


#: The counterbalancing heatmap shows at most this many rows; beyond, items are grouped (``heatmap_rows``).
HEATMAP_ROWS = 100


def heatmap_rows(coverage: list[dict[str, Any]], limit: int = HEATMAP_ROWS) -> list[dict[str, Any]]:
    """``position_coverage`` as the dashboard draws it: per item up to ``limit`` items; beyond, consecutive
    items (in the definition's order) grouped into at most ``limit`` rows, each cell showing the item of its
    group whose deviation is furthest from 0, with that item's own ``n`` and ``expected`` (the worst
    imbalance is what the researcher looks for, and the hover's observed - expected must equal the colour).
    8,000 blocks of two responses gave 32,000 cells and a 3.4 MB snapshot; grouped, a few hundred.
    The first cell of a group at a position wins ties (of the deviations as rounded)."""
    items = list(dict.fromkeys(row["item"] for row in coverage))
    if len(items) <= limit:
        return coverage
    size = -(-len(items) // limit)
    group_of = {item: i // size for i, item in enumerate(items)}
    groups: dict[tuple[int, int], dict[str, Any]] = {}
    for row in coverage:
        g = group_of[row["item"]]
        cell = groups.get((g, row["position"]))
        if cell is None or abs(row["deviation"]) > abs(cell["deviation"]):
            groups[(g, row["position"])] = {"n": row["n"], "expected": row["expected"], "deviation": row["deviation"]}
    return [{"item": _group_label(g, size, len(items)), "block": "", "position": position, "n": cell["n"],
             "expected": round(cell["expected"], 3), "deviation": cell["deviation"]}
            for (g, position), cell in sorted(groups.items())]


def _group_label(g: int, size: int, items: int) -> str:
    return f"items {g * size + 1}-{min((g + 1) * size, items)} (worst)"


def position_heatmap(study: Study, limit: int = HEATMAP_ROWS) -> list[dict[str, Any]]:
    """``heatmap_rows(position_coverage(study), limit)``, without a dict or a rounding per cell: at 16,000
    items those 32,000 dicts and 64,000 roundings were most of the dashboard's Python time.

    A cell is rounded only when it is further from 0 than the one its group holds: the rounded distance
    never decreases as the distance grows, so a cell no further from 0 cannot beat the held one once rounded,
    and one further away beats it only if it still is once both are rounded (``heatmap_rows``' rule)."""
    items = _item_positions(study)
    if len(items) <= limit:
        return _coverage_dicts(items)
    size = -(-len(items) // limit)
    groups: dict[tuple[int, int], tuple[float, int, float]] = {}  # (group, position): (distance, n, expected)
    for i, (_, _, by_position, block_positions) in enumerate(items):
        g = i // size
        expected = sum(by_position.values()) / len(block_positions)
        for position in block_positions:
            n = by_position.get(position, 0)
            distance = abs(n - expected)
            held = groups.get((g, position))
            if held is None or (distance > held[0] and round(distance, 3) > round(held[0], 3)):
                groups[(g, position)] = (distance, n, expected)
    return [{"item": _group_label(g, size, len(items)), "block": "", "position": position, "n": n,
             "expected": round(expected, 3), "deviation": round(n - expected, 3)}
            for (g, position), (_, n, expected) in sorted(groups.items())]


def block_coverage(study: Study, counts: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """Shown and answered per block that has been given to anyone, from ``coverage.block_counts`` (read here
    unless given)."""
    return [{"block": block["key"], "shown": block["shown"], "answered": block["answered"]}
            for block in (block_counts(study) if counts is None else counts) if block["visits"]]


def dashboard_snapshot(study: Study) -> dict[str, Any]:
    counts = block_counts(study)  # one read for both the shown/answered table and the coverage
    return {
        "funnel": study_funnel(study),
        "completions_by_hour": completions_by_hour(study),
        "durations": duration_summary(study),
        "attention": attention_summary(study),
        "block_coverage": block_coverage(study, counts),
        "position_coverage": position_heatmap(study),
        "coverage": coverage_summary(study, block_coverage_rows(study, counts)),
    }
