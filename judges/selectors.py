"""Reads of the judges app: the judges' answers as frames, and their progress for the dashboard."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

import pandas as pd
from django.db.models import Count, Q, Sum

from analysis.stats.judges import JUDGE_RATING_FIELDS, RANK_DIMENSION
from judges.models import Judge, JudgeAnswer, JudgeCall, JudgeRun
from surveys.models import Dimension, Study

#: judges.csv: one row per judge.
JUDGE_COLUMNS = ["judge", "kind", "model", "seed", "n_ratings", "n_pairwise", "calls", "unparsed", "cost"]
#: The judges' ratings, in the columns of the ratings frame that the analyses use.
JUDGE_RATING_COLUMNS = JUDGE_RATING_FIELDS
JUDGE_PAIRWISE_COLUMNS = ["judge", "kind", "block_id", "scenario", "left_response_id", "right_response_id",
                          "left_model", "right_model", "left_condition", "right_condition", "preference"]


def judge_ratings_frame(study_id: int) -> pd.DataFrame:
    """One row per rating of a judge (``JUDGE_RATING_COLUMNS``), the automatic metrics included as judges of kind
    ``metric`` (their scores from the study's latest finished metrics run, on the dimension the metrics run
    compares with the people: the study's first)."""
    rows = JudgeAnswer.objects.filter(judge__study_id=study_id, question="rating").values_list(
        "judge__name", "judge__kind", "block__key", "block__scenario__key", "item__key", "item__system__name",
        "item__condition__name", "dimension__key", "position", "value").order_by("judge__name", "block_id", "item_id")
    ranks = JudgeAnswer.objects.filter(judge__study_id=study_id, question="rank").values_list(
        "judge__name", "judge__kind", "block__key", "block__scenario__key", "item__key", "item__system__name",
        "item__condition__name", "position", "value").order_by("judge__name", "block_id", "item_id")
    # A judge's rank of a response is compared with the people's mean rank, as the dimension "rank".
    ranked = pd.DataFrame([(*row[:7], RANK_DIMENSION, *row[7:]) for row in ranks], columns=JUDGE_RATING_COLUMNS)
    frames = [pd.DataFrame(list(rows), columns=JUDGE_RATING_COLUMNS), ranked, metric_judges_frame(study_id)]
    frames = [frame for frame in frames if not frame.empty]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=JUDGE_RATING_COLUMNS)


def metric_judges_frame(study_id: int) -> pd.DataFrame:
    """The reference-based metrics of the latest finished metrics run, one judge of kind ``metric`` each."""
    from analysis.automatic_metrics.metrics import REFERENCE_METRICS
    from analysis.models import MetricsRun, MetricsTable

    run = MetricsRun.objects.filter(study_id=study_id, status="done").order_by("-finished_at", "-id").first()
    table = MetricsTable.objects.filter(run=run, name="per_response").first() if run else None
    dimension = Dimension.objects.filter(study_id=study_id).order_by("order", "id").values_list("key", flat=True).first()
    if table is None or dimension is None:
        return pd.DataFrame(columns=JUDGE_RATING_COLUMNS)
    per_response = pd.DataFrame(table.rows, columns=table.columns)
    parts = []
    for metric in REFERENCE_METRICS:
        if metric in per_response.columns:
            scored = per_response.dropna(subset=[metric])
            parts.append(pd.DataFrame({
                "judge": metric, "kind": Judge.Kind.METRIC.value, "block_id": scored["block_id"],
                "scenario": scored["scenario"], "response_id": scored["response_id"], "model": scored["model"],
                "condition": scored["condition"], "dimension": dimension, "position": pd.NA,
                "rating": scored[metric].astype(float)}, columns=JUDGE_RATING_COLUMNS))
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=JUDGE_RATING_COLUMNS)


def judge_pairwise_frame(study_id: int) -> pd.DataFrame:
    """One row per pairwise choice of a judge, in each order it was asked (``JUDGE_PAIRWISE_COLUMNS``)."""
    rows = JudgeAnswer.objects.filter(judge__study_id=study_id, question="pairwise").values_list(
        "judge__name", "judge__kind", "block__key", "block__scenario__key", "left_item__key", "right_item__key",
        "left_item__system__name", "right_item__system__name", "left_item__condition__name",
        "right_item__condition__name", "preference").order_by("judge__name", "block_id", "id")
    return pd.DataFrame(list(rows), columns=JUDGE_PAIRWISE_COLUMNS)


def judges_table(study: Study) -> pd.DataFrame:
    """judges.csv: each judge with its answers, calls, unparsed replies and cost."""
    judges = Judge.objects.filter(study=study).annotate(
        n_ratings=Count("answers", filter=Q(answers__question__in=["rating", "rank"])),
        n_pairwise=Count("answers", filter=Q(answers__question="pairwise")),
    ).order_by("name")
    calls = {row["run__judge"]: row for row in JudgeCall.objects.filter(run__judge__study=study).values("run__judge")
             .annotate(calls=Count("id"), unparsed=Count("id", filter=Q(parsed=False)), cost=Sum("cost"))}
    rows = []
    for judge in judges:
        own = calls.get(judge.pk, {})
        rows.append([judge.name, judge.kind, judge.model, judge.seed, judge.n_ratings, judge.n_pairwise,
                     own.get("calls", 0), own.get("unparsed", 0), float(own.get("cost") or 0)])
    return pd.DataFrame(rows, columns=JUDGE_COLUMNS)


@dataclass(frozen=True)
class JudgeProgress:
    judge: str
    status: str
    calls_done: int
    calls_planned: int
    unparsed: int
    cost: Decimal
    cost_cap: Decimal
    error: str


def judge_runs_progress(*, study: Study) -> list[JudgeProgress]:
    """The latest run of each of the study's judges: calls done of planned, unparsed replies, cost of cap."""
    latest: dict[int, JudgeRun] = {}
    for run in JudgeRun.objects.filter(judge__study=study).select_related("judge").annotate(
            n_calls=Count("calls"), n_unparsed=Count("calls", filter=Q(calls__parsed=False))).order_by("-created_at", "-id"):
        latest.setdefault(run.judge_id, run)
    return [JudgeProgress(judge=run.judge.name, status=run.status, calls_done=run.n_calls,
                          calls_planned=len(run.plan), unparsed=run.n_unparsed, cost=run.cost,
                          cost_cap=run.cost_cap, error=run.error)
            for run in sorted(latest.values(), key=lambda r: r.judge.name)]
