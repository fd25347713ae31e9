"""REST endpoints of the analysis app: runs, result tables, exports and imports.

Same rules as the researcher pages: the study is resolved through
``surveys.permissions.require`` (404 outside the study's team, 403 for a role without the API), reads come from
selectors and writes from one service per view.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator

from django.http import StreamingHttpResponse
from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import generics, status
from rest_framework.exceptions import APIException, NotFound, ValidationError
from rest_framework.parsers import MultiPartParser
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from surveys.api import ApiAutoSchema, ErrorSerializer
from surveys.coverage import block_coverage_rows, coverage_summary
from surveys.permissions import Capability, require, studies_visible_to
from surveys.questions import best_worst, free_text, pairwise, question_type
from web.signals import announce_action
from web.throttles import UserRateThrottle

from . import frames, selectors
from .exporting import exports, slots
from .running import runs
from .imports import importers
from .models import AnalysisRun, ResultTable
from .serializers import (
    AnalysisRunSerializer, ChoiceRecordSerializer, CoverageSerializer, ExportSerializer, FreeTextRecordSerializer, GoldImportReportSerializer, GoldImportSerializer, ImportReportSerializer,
    PairwiseRecordSerializer,
    ResponsesImportSerializer, ResultTableSerializer, ResultTableSummarySerializer, RunCreatedSerializer,
    TableQuerySerializer,
)


class ExpensiveRequestThrottle(UserRateThrottle):
    """Analysis runs and imports cost CPU minutes; a tighter per-user rate than reads.

    The rate is ``REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]["expensive"]`` when set.
    """

    scope = "expensive"

    def get_rate(self) -> str:
        return self.THROTTLE_RATES.get(self.scope) or "120/hour"


class _ThrottlePosts:
    def get_throttles(self):
        throttles = super().get_throttles()
        if self.request.method == "POST":
            throttles.append(ExpensiveRequestThrottle())
        return throttles


class RunNotDone(APIException):
    """Results were asked of a run that is still queued or running, or failed."""

    status_code = status.HTTP_409_CONFLICT

    def __init__(self, run: AnalysisRun):
        super().__init__(f"Run {run.pk} is {run.status}; results exist only once it is done.")


def _run_or_404(request: Request, *, run_id: int, slug: str | None = None) -> AnalysisRun:
    studies = studies_visible_to(request.user, Capability.EXPORT)
    if slug is not None:
        studies = studies.filter(pk=require(request.user, slug, Capability.EXPORT, request=request).pk)
    run = selectors.analysis_run_in(studies=studies, run_id=run_id)
    if run is None:
        raise NotFound("No such analysis run.")
    return run


def _done_run_or_409(request: Request, *, slug: str, run_id: int) -> AnalysisRun:
    run = _run_or_404(request, run_id=run_id, slug=slug)
    if run.status != AnalysisRun.Status.DONE:
        raise RunNotDone(run)
    return run


# ---------------------------------------------------------------- runs


class RunList(_ThrottlePosts, generics.ListAPIView):
    """The study's analysis runs, newest first; POST starts a new run."""

    serializer_class = AnalysisRunSerializer
    schema = ApiAutoSchema()

    def get_queryset(self):
        return selectors.analysis_runs_of(study=require(self.request.user, self.kwargs["slug"], Capability.EXPORT, request=self.request))

    @extend_schema(request=None, responses={202: RunCreatedSerializer})
    def post(self, request: Request, slug: str) -> Response:
        study = require(request.user, slug, Capability.RUN, request=request)
        run = runs.analysis_run_create(study=study, requested_by=request.user.get_username())
        announce_action(actor=request.user, study=study, action="run.start", object=f"run {run.pk}", detail="API",
                        request=request)
        body = {"id": run.pk, "status": run.status, "status_url": reverse("api-run-detail", kwargs={"run_id": run.pk})}
        return Response(RunCreatedSerializer(body).data, status=status.HTTP_202_ACCEPTED)


class RunDetail(APIView):
    """One run's status (poll it after starting a run)."""

    schema = ApiAutoSchema()

    @extend_schema(responses={200: AnalysisRunSerializer})
    def get(self, request: Request, run_id: int, slug: str | None = None) -> Response:
        return Response(AnalysisRunSerializer(_run_or_404(request, run_id=run_id, slug=slug)).data)


# ---------------------------------------------------------------- result tables


class RunTableList(APIView):
    """The names, columns and sizes of a finished run's result tables."""

    schema = ApiAutoSchema()

    @extend_schema(responses={200: ResultTableSummarySerializer(many=True), 409: ErrorSerializer})
    def get(self, request: Request, slug: str, run_id: int) -> Response:
        run = _done_run_or_409(request, slug=slug, run_id=run_id)
        summaries = [
            {"name": table.name, "columns": table.columns, "n_rows": len(table.rows), "note": table.note,
             "url": reverse("api-run-table", kwargs={"slug": run.study.slug, "run_id": run.pk, "name": table.name})}
            for table in selectors.result_tables_of(run=run)
        ]
        return Response(ResultTableSummarySerializer(summaries, many=True).data)


def _table_body(table: ResultTable, *, level: str | None, orient: str) -> dict:
    rows = table.rows
    if level and "level" in table.columns:
        at = table.columns.index("level")
        rows = [row for row in rows if row[at] == level]
    body = {"name": table.name, "columns": table.columns, "note": table.note}
    if orient == "records":
        body["records"] = [dict(zip(table.columns, row)) for row in rows]
    else:
        body["rows"] = rows
    return body


class RunTableDetail(APIView):
    """One result table as ``{name, columns, rows}`` (or records), optionally one level only."""

    query_serializer = TableQuerySerializer
    schema = ApiAutoSchema()

    @extend_schema(parameters=[TableQuerySerializer], responses={200: ResultTableSerializer, 409: ErrorSerializer})
    def get(self, request: Request, slug: str, run_id: int, name: str) -> Response:
        query = TableQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        run = _done_run_or_409(request, slug=slug, run_id=run_id)
        table = selectors.result_table(run=run, name=name)
        if table is None:
            raise NotFound(f'Run {run.pk} has no table "{name}".')
        body = _table_body(table, level=query.validated_data.get("level"), orient=query.validated_data["orient"])
        return Response(ResultTableSerializer(body).data)


# ---------------------------------------------------------------- exports


class CSVRenderer(BaseRenderer):
    """Lets clients ask for ``Accept: text/csv``; error bodies are then JSON text."""

    media_type = "text/csv"
    format = "csv"
    charset = "utf-8"

    def render(self, data, accepted_media_type=None, renderer_context=None) -> bytes:
        return json.dumps(data).encode() if data is not None else b""


def _csv_bytes(header: list[str], batches: Iterator[exports.Batch]) -> Iterator[bytes]:
    return exports.csv_batch_bytes(itertools.chain([[header]], batches))


class ExportsBusy(APIException):
    """Every export slot of the server's machine is taken (analysis.exporting.slots)."""

    status_code = 503
    default_detail = "Another export is being prepared on this server. Try again in a few seconds."
    default_code = "exports_busy"
    wait = slots.RETRY_AFTER_SECONDS  # DRF sends it as Retry-After


# The renderers a CSV download negotiates (DRF's ?format= override).
_DOWNLOAD_FORMATS = ("json", "csv")


def _export_response(request: Request, slug: str, name: str) -> StreamingHttpResponse:
    study = require(request.user, slug, Capability.IDENTIFIERS if name == "identifiers" else Capability.EXPORT,
                    request=request)
    wanted = request.query_params.get("format")
    if wanted is not None and wanted not in _DOWNLOAD_FORMATS:
        # DRF answers an unknown format with 404 but lets an empty one through; both are bad input.
        raise ValidationError({"format": [f"Use one of: {', '.join(_DOWNLOAD_FORMATS)}."]})
    try:
        run = exports.export_run(study=study)
        # export_csv raises ExportUnavailable before any byte is sent; ExportsBusy comes before it does any work.
        content = slots.streamed_in_slot(lambda: _csv_bytes(*exports.export_csv(run=run, what=name)))
        response = StreamingHttpResponse(content, content_type="text/csv; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="{exports.EXPORTS[name].filename}"'
        announce_action(actor=request.user, study=study,
                        action="export.identifiers" if name == "identifiers" else "export.download",
                        object=exports.EXPORTS[name].filename, detail=f"run {run.pk}, API", request=request)
        return response
    except slots.ExportsBusy:
        raise ExportsBusy() from None
    except exports.ExportUnavailable as exc:
        raise NotFound(str(exc)) from None


_CSV_RESPONSES = {(200, "text/csv"): OpenApiResponse(OpenApiTypes.STR, description="CSV, streamed"),
                  400: OpenApiResponse(OpenApiTypes.OBJECT, description="a bad format: field -> list of messages"),
                  404: OpenApiResponse(ErrorSerializer, description="no such study or export, or no finished run"),
                  503: OpenApiResponse(ErrorSerializer, description="another export is being prepared on this "
                                       "server: try again after the Retry-After seconds")}


class Coverage(APIView):
    """Judgements per block against the r each needs, blocks complete and the gaps, as they stand now
    (the dashboard's coverage; ``rows`` are coverage.csv's)."""

    schema = ApiAutoSchema()

    @extend_schema(responses={200: CoverageSerializer})
    def get(self, request: Request, slug: str) -> Response:
        study = require(request.user, slug, Capability.EXPORT, request=request)
        rows = block_coverage_rows(study)
        return Response(CoverageSerializer({**coverage_summary(study, rows), "rows": rows}).data)


class ExportList(APIView):
    """The pseudonymous exports of the study's latest finished run (identifiers are separate)."""

    schema = ApiAutoSchema()

    @extend_schema(responses={200: ExportSerializer(many=True)})
    def get(self, request: Request, slug: str) -> Response:
        study = require(request.user, slug, Capability.EXPORT, request=request)
        run = selectors.analysis_run_latest_done(study=study)
        names = exports.exports_of(run) if run else []
        body = [
            {"name": name, "filename": exports.EXPORTS[name].filename, "description": exports.EXPORTS[name].description,
             "url": reverse("api-export", kwargs={"slug": study.slug, "name": name})}
            for name in dict.fromkeys(names) if name in exports.PSEUDONYMOUS_EXPORTS
        ]
        return Response(ExportSerializer(body, many=True).data)


class ExportDownload(APIView):
    """One pseudonymous export of the latest finished run, as a streamed CSV file."""

    renderer_classes = [JSONRenderer, CSVRenderer]
    schema = ApiAutoSchema()

    @extend_schema(
        operation_id="studies_exports_download",
        parameters=[OpenApiParameter("name", str, OpenApiParameter.PATH, enum=exports.PSEUDONYMOUS_EXPORTS)],
        responses=_CSV_RESPONSES,
    )
    def get(self, request: Request, slug: str, name: str) -> StreamingHttpResponse:
        if name not in exports.PSEUDONYMOUS_EXPORTS:
            require(request.user, slug, Capability.EXPORT, request=request)  # an unknown study is still "no such study"
            raise NotFound(f'No export "{name}".')
        return _export_response(request, slug, name)


class IdentifiersDownload(APIView):
    """identifiers.csv: pseudonym -> panel id, payable, reject reason, completion code.

    Restricted: only the study's owners and staff (404 outside the team, 403 for other roles, and the
    attempt is in the audit trail). Use it
    to pay and reject on the panel; never keep it with the research data.
    """

    renderer_classes = [JSONRenderer, CSVRenderer]
    schema = ApiAutoSchema()

    @extend_schema(operation_id="studies_identifiers_download", responses=_CSV_RESPONSES)
    def get(self, request: Request, slug: str) -> StreamingHttpResponse:
        return _export_response(request, slug, "identifiers")


class _ExportRecords(generics.ListAPIView):
    """An answer export of the latest finished run as paginated JSON records (the CSV's columns and rows)."""

    schema = ApiAutoSchema()

    def get_queryset(self):
        study = require(self.request.user, self.kwargs["slug"], Capability.EXPORT, request=self.request)
        try:
            self.run = exports.export_run(study=study)
        except exports.ExportUnavailable as exc:
            raise NotFound(str(exc)) from None
        return self.rows(self.run)

    def list(self, request: Request, *args, **kwargs) -> Response:
        page = self.paginate_queryset(self.get_queryset())
        body = self.get_serializer([dict(zip(self.columns, row)) for row in self.records(page)], many=True).data
        return self.get_paginated_response(body)

    def records(self, rows: list[tuple]) -> Iterator[list]:
        return iter(rows)


class FreeTextRecords(_ExportRecords):
    """free_text.csv as JSON: the written answers of the retained participants of the latest finished run."""

    serializer_class = FreeTextRecordSerializer
    columns = free_text.FREE_TEXT_COLUMNS

    def rows(self, run: AnalysisRun):
        # The rows of free_text.csv, as the question type writes them (a queryset: paginated in the database).
        return question_type("free_text").answer_file_rows(
            "free-text", study_id=run.study_id, participant_ids=selectors.retained_participant_ids(run=run))


class ChoiceRecords(_ExportRecords):
    """choices.csv as JSON: the most and least choices of the retained participants of the latest finished run."""

    serializer_class = ChoiceRecordSerializer
    columns = best_worst.CHOICE_EXPORT_COLUMNS

    def rows(self, run: AnalysisRun):
        return best_worst.choice_rows(selectors.retained_participant_ids(run=run))

    def records(self, rows: list[tuple]) -> Iterator[list]:
        return best_worst.choice_records(rows, letter_labels=self.run.study.letter_labels)


class PairwiseRecords(_ExportRecords):
    """pairwise.csv as JSON: the pairwise preferences of the retained participants of the latest finished run."""

    serializer_class = PairwiseRecordSerializer
    columns = pairwise.PAIRWISE_COLUMNS

    def rows(self, run: AnalysisRun):
        return selectors.pairwise_visit_ids(run=run)

    def records(self, rows: list[int]) -> Iterator[list]:
        # A page is visit ids; its rows come from the analyses' frame, so they cannot differ from pairwise.csv.
        values = frames.pairwise_frame(self.run.study_id, visit_ids=rows)[self.columns].astype(object)
        return iter(values.where(values.notna(), None).to_numpy().tolist())  # NaN -> None (JSON null)


# ---------------------------------------------------------------- imports


_IMPORT_PROBLEMS = OpenApiResponse(
    OpenApiTypes.OBJECT,
    description='{"problems": ["file:line:column: message", ...]} when a file has bad rows (nothing is written), '
                'or {"<field>": ["message"]} when a file is missing or too large',
)


class ResponsesImport(_ThrottlePosts, APIView):
    """Import participants.csv + ratings.csv (DESIGN 3.1): all or nothing."""

    parser_classes = [MultiPartParser]  # files: a url-encoded form cannot carry them
    schema = ApiAutoSchema()

    @extend_schema(request={"multipart/form-data": ResponsesImportSerializer},
                   responses={201: ImportReportSerializer,
                              400: _IMPORT_PROBLEMS})
    def post(self, request: Request, slug: str) -> Response:
        study = require(request.user, slug, Capability.MANAGE, request=request)
        upload = ResponsesImportSerializer(data=request.data)
        upload.is_valid(raise_exception=True)
        try:
            report = importers.responses_import(study=study, participants_file=upload.validated_data["participants"],
                                                ratings_file=upload.validated_data["ratings"])
        except importers.ImportProblems as exc:
            return Response({"problems": exc.problems}, status=status.HTTP_400_BAD_REQUEST)
        return Response(ImportReportSerializer(report).data, status=status.HTTP_201_CREATED)


class GoldImport(_ThrottlePosts, APIView):
    """Import gold.csv (``response_id, gold_score``); existing scores are replaced."""

    parser_classes = [MultiPartParser]  # files: a url-encoded form cannot carry them
    schema = ApiAutoSchema()

    @extend_schema(request={"multipart/form-data": GoldImportSerializer},
                   responses={201: GoldImportReportSerializer, 400: _IMPORT_PROBLEMS})
    def post(self, request: Request, slug: str) -> Response:
        study = require(request.user, slug, Capability.MANAGE, request=request)
        upload = GoldImportSerializer(data=request.data)
        upload.is_valid(raise_exception=True)
        try:
            report = importers.gold_import(study=study, gold_file=upload.validated_data["gold"])
        except importers.ImportProblems as exc:
            return Response({"problems": exc.problems}, status=status.HTTP_400_BAD_REQUEST)
        return Response(GoldImportReportSerializer(report).data, status=status.HTTP_201_CREATED)
