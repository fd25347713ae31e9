"""The judges' API: the judges with their progress and cost, their agreement with the people, the import."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import NotFound
from rest_framework.parsers import MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from analysis import selectors as analysis_selectors
from analysis.api import _IMPORT_PROBLEMS, _ThrottlePosts
from analysis.serializers import _CsvUploadField
from judges import importers, selectors
from surveys.permissions import Capability, require
from surveys.api import ApiAutoSchema, ErrorSerializer


class JudgementsImportSerializer(serializers.Serializer):
    judgements = _CsvUploadField(help_text="judge, block_id, response_id, dimension, value (optional kind, position); "
                                 "or judge, block_id, left_response_id, right_response_id, preference")


class JudgementsReportSerializer(serializers.Serializer):
    judges_created = serializers.IntegerField()
    answers_written = serializers.IntegerField()
    answers_replaced = serializers.IntegerField()


class JudgeSerializer(serializers.Serializer):
    judge = serializers.CharField()
    kind = serializers.CharField()
    model = serializers.CharField(allow_blank=True)
    seed = serializers.IntegerField()
    n_ratings = serializers.IntegerField()
    n_pairwise = serializers.IntegerField()
    calls = serializers.IntegerField()
    unparsed = serializers.IntegerField(help_text="replies that could not be parsed (stored, never guessed)")
    cost = serializers.FloatField()


class JudgeRunProgressSerializer(serializers.Serializer):
    judge = serializers.CharField()
    status = serializers.CharField()
    calls_done = serializers.IntegerField()
    calls_planned = serializers.IntegerField()
    unparsed = serializers.IntegerField()
    cost = serializers.DecimalField(max_digits=10, decimal_places=4)
    cost_cap = serializers.DecimalField(max_digits=10, decimal_places=4)
    error = serializers.CharField(allow_blank=True)


class JudgesBodySerializer(serializers.Serializer):
    judges = JudgeSerializer(many=True)
    runs = JudgeRunProgressSerializer(many=True, help_text="the latest run of each LLM judge")


class JudgeList(APIView):
    """The study's judges (judges.csv's columns plus calls, unparsed replies and cost) and their runs' progress."""

    schema = ApiAutoSchema()

    @extend_schema(responses={200: JudgesBodySerializer})
    def get(self, request: Request, slug: str) -> Response:
        study = require(request.user, slug, Capability.EXPORT, request=request)
        body = {"judges": selectors.judges_table(study).to_dict("records"),
                "runs": selectors.judge_runs_progress(study=study)}
        return Response(JudgesBodySerializer(body).data)


class JudgeAgreement(APIView):
    """judge_agreement of the study's latest finished analysis run, one record per judge x dimension x level x
    method (404 when no finished run has judges)."""

    schema = ApiAutoSchema()

    @extend_schema(responses={200: OpenApiTypes.OBJECT, 404: ErrorSerializer})
    def get(self, request: Request, slug: str) -> Response:
        study = require(request.user, slug, Capability.EXPORT, request=request)
        run = analysis_selectors.analysis_run_latest_done(study=study)
        table = analysis_selectors.result_table(run=run, name="judge_agreement") if run else None
        if table is None:
            raise NotFound("No finished analysis run has judges' agreement: import or run a judge, then run the "
                           "analysis.")
        return Response({"run": run.pk, "columns": table.columns, "note": table.note,
                         "records": [dict(zip(table.columns, row)) for row in table.rows]})


class JudgementsImport(_ThrottlePosts, APIView):
    """Import judgements.csv: every bad line is reported and nothing is written."""

    parser_classes = [MultiPartParser]
    schema = ApiAutoSchema()

    @extend_schema(request={"multipart/form-data": JudgementsImportSerializer},
                   responses={201: JudgementsReportSerializer, 400: _IMPORT_PROBLEMS})
    def post(self, request: Request, slug: str) -> Response:
        study = require(request.user, slug, Capability.MANAGE, request=request)
        upload = JudgementsImportSerializer(data=request.data)
        upload.is_valid(raise_exception=True)
        try:
            report = importers.judgements_import(study=study, file=upload.validated_data["judgements"])
        except importers.ImportProblems as exc:
            return Response({"problems": exc.problems}, status=status.HTTP_400_BAD_REQUEST)
        return Response(JudgementsReportSerializer(report).data, status=status.HTTP_201_CREATED)


__all__ = ["JudgeList", "JudgeAgreement", "JudgementsImport", "OpenApiResponse"]
