"""Reads of the analysis app. Only runs whose status is ``done`` expose results,
except to the results page, which shows a running run's tables as they land."""

from __future__ import annotations

from typing import Any

import pandas as pd
from django.db.models import F, Max, Min, QuerySet

from analysis.design import study_design
from analysis.models import AnalysisRun, MetricsRun, MetricsTable, ParticipantResult, ResultTable
from surveys.models import BlockVisit, FreeTextAnswer, Study


def analysis_run_latest(*, study: Study) -> AnalysisRun | None:
    """The newest run in any status (for the monitor)."""
    return AnalysisRun.objects.filter(study=study).order_by("-created_at", "-id").first()


def analysis_runs_unfinished(*, study: Study) -> QuerySet[AnalysisRun]:
    """The study's runs still queued or running, newest first (for the monitor: a stuck one must show)."""
    return AnalysisRun.objects.filter(
        study=study, status__in=[AnalysisRun.Status.QUEUED, AnalysisRun.Status.RUNNING]
    ).order_by("-created_at", "-id")


def analysis_run_latest_done(*, study: Study) -> AnalysisRun | None:
    return (
        AnalysisRun.objects.filter(study=study, status=AnalysisRun.Status.DONE)
        .order_by("-finished_at", "-id")
        .first()
    )


def result_table_frame(*, run: AnalysisRun, name: str) -> pd.DataFrame | None:
    """A persisted table of a finished run as a DataFrame; None when absent or the run is not done."""
    table = ResultTable.objects.filter(run=run, run__status=AnalysisRun.Status.DONE, name=name).first()
    if table is None:
        return None
    return pd.DataFrame(table.rows, columns=table.columns)


def result_table_names(*, run: AnalysisRun) -> list[str]:
    return list(
        ResultTable.objects.filter(run=run, run__status=AnalysisRun.Status.DONE).order_by("name").values_list("name", flat=True)
    )


def participant_results(*, run: AnalysisRun) -> QuerySet[ParticipantResult]:
    """The run's per-participant results with their participant, in enrolment order (done runs only)."""
    return (
        ParticipantResult.objects.filter(run=run, run__status=AnalysisRun.Status.DONE)
        .select_related("participant")
        .order_by("participant_id")
    )


def result_tables_so_far(*, run: AnalysisRun) -> dict[str, pd.DataFrame]:
    """The tables a run has landed, by name: every one of a done run, those so far of a running one.

    For the results page only, which says which tables are still computing;
    exports and the API wait until the run is done.
    """
    landed = ResultTable.objects.filter(run=run, run__status__in=[AnalysisRun.Status.RUNNING, AnalysisRun.Status.DONE])
    return {table.name: pd.DataFrame(table.rows, columns=table.columns) for table in landed.order_by("name")}


def retained_participant_ids(*, run: AnalysisRun) -> QuerySet[ParticipantResult]:
    """The ids of the participants the run retained (``excluded_by`` empty), as a subquery (done runs only)."""
    return ParticipantResult.objects.filter(run=run, run__status=AnalysisRun.Status.DONE, excluded_by="").values(
        "participant_id")


def pairwise_visit_ids(*, run: AnalysisRun) -> QuerySet[BlockVisit]:
    """The ids of the answered pairwise blocks of the run's retained participants, in pairwise.csv's order
    (participant in enrolment order, blocks as shown): the rows of ``frames.pairwise_frame`` page by page."""
    return (
        BlockVisit.objects.filter(participant_id__in=retained_participant_ids(run=run), block__isnull=False,
                                  submitted_at__isnull=False)
        .exclude(preference="")
        .order_by("participant_id", "sequence")
        .values_list("id", flat=True)
    )


def free_text_answers(*, study: Study, question: str = "", block: str = "", contains: str = "") -> QuerySet[FreeTextAnswer]:
    """The written answers of the study's participants (previews left out) for the answers page, in the
    order of free_text.csv, with their question, block, scenario and the responses the participant saw
    on that block. Empty filters select everything."""
    answers = FreeTextAnswer.objects.filter(participant__study=study, participant__is_preview=False)
    if question:
        answers = answers.filter(question__key=question)
    if block:
        answers = answers.filter(visit__block__key=block)
    if contains:
        answers = answers.filter(text__icontains=contains)
    return (
        answers.select_related("participant", "question", "visit__block__scenario")
        .prefetch_related("visit__placements__item__system", "visit__placements__item__condition")
        .order_by("participant_id", F("visit__sequence").asc(nulls_last=True), "question__order", "question_id", "id")
    )


# Ids beyond a 64-bit integer cannot exist; asking the database for one fails
# (SQLite: OverflowError, PostgreSQL: out of range) instead of finding nothing.
_MAX_ID = 2**63 - 1


def analysis_runs_of(*, study: Study) -> QuerySet[AnalysisRun]:
    return AnalysisRun.objects.filter(study=study).select_related("study").order_by("-created_at", "-id")


def analysis_run_in(*, studies: QuerySet[Study], run_id: int) -> AnalysisRun | None:
    """The run ``run_id`` if it belongs to one of ``studies`` (any status)."""
    if not 0 < run_id <= _MAX_ID:
        return None
    return AnalysisRun.objects.filter(study__in=studies, pk=run_id).select_related("study").first()


def result_table(*, run: AnalysisRun, name: str) -> ResultTable | None:
    """One persisted table of a finished run (None when absent or the run is not done)."""
    return ResultTable.objects.filter(run=run, run__status=AnalysisRun.Status.DONE, name=name).first()


def result_tables_of(*, run: AnalysisRun) -> list[ResultTable]:
    return list(ResultTable.objects.filter(run=run, run__status=AnalysisRun.Status.DONE).order_by("name"))


# --------------------------------------------------------------------------- metrics runs (issue 9)


def metrics_run_latest(*, study: Study) -> MetricsRun | None:
    return MetricsRun.objects.filter(study=study).order_by("-created_at", "-id").first()


def metrics_run_latest_done(*, study: Study) -> MetricsRun | None:
    return MetricsRun.objects.filter(study=study, status=MetricsRun.Status.DONE).order_by("-finished_at", "-id").first()


def metrics_run_latest_with_predictor(*, study: Study) -> MetricsRun | None:
    return (
        MetricsRun.objects.filter(study=study, status=MetricsRun.Status.DONE, predictor__isnull=False)
        .order_by("-finished_at", "-id")
        .first()
    )


def metrics_tables(*, run: MetricsRun) -> dict[str, tuple[pd.DataFrame, str]]:
    """Every table of a finished metrics run by name, with its note."""
    return {
        table.name: (pd.DataFrame(table.rows, columns=table.columns), table.note)
        for table in MetricsTable.objects.filter(run=run, run__status=MetricsRun.Status.DONE)
    }


def study_rating_scale(*, study: Study) -> tuple[int, int] | None:
    """The lowest and highest point over the study's rating dimensions, for the charts' y axes."""
    bounds = study.dimensions.aggregate(low=Min("scale_min"), high=Max("scale_max"))
    return None if bounds["low"] is None else (bounds["low"], bounds["high"])


def scenario_labels_of(*, study: Study) -> dict[str, str]:
    """Scenario key -> its label (the key when the label is blank), for the charts' panel titles."""
    return {key: label or key for key, label in study.scenarios.values_list("key", "label")}


def figure_context(*, study: Study) -> dict[str, Any]:
    """What the results page's charts need to know of the study (``analysis.charts.results_figures``)."""
    design = study_design(study.pk)
    declared = [name for name in (design.baseline, design.treatment, *design.references) if name]
    others = sorted(set(study.conditions.values_list("name", flat=True)) - set(declared))
    return {
        "scale": study_rating_scale(study=study),
        "scenario_labels": scenario_labels_of(study=study),
        "conditions": declared + others,
        "baseline": design.baseline,
        "treatment": design.treatment,
        "us_map": design.us_map,
    }
