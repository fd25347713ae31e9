"""REST endpoints of the automatic metrics (issue 9): start a run, read its state, score texts."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.parsers import JSONParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from surveys.api import ApiAutoSchema, ErrorSerializer
from surveys.permissions import Capability, require
from web.signals import announce_action

from .. import selectors
from . import metrics_run
from .metrics import ENCODER_NAME, MetricsUnavailable
from ..models import MetricsRun


class MetricsRunSerializer(serializers.ModelSerializer):
    tables = serializers.SerializerMethodField()

    class Meta:
        model = MetricsRun
        fields = ["id", "status", "step", "error", "created_at", "finished_at", "human_basis", "cache_hits",
                  "cache_misses", "tables"]

    def get_tables(self, run: MetricsRun) -> list[str]:
        return sorted(selectors.metrics_tables(run=run)) if run.status == MetricsRun.Status.DONE else []


class PredictRequestSerializer(serializers.Serializer):
    texts = serializers.ListField(
        # A text is scored as written: spaces are not trimmed away.
        child=serializers.CharField(min_length=1, max_length=metrics_run.MAX_PREDICT_CHARS, trim_whitespace=False),
        min_length=1, max_length=metrics_run.MAX_PREDICT_TEXTS,
    )


class PredictionSerializer(serializers.Serializer):
    text = serializers.CharField()
    predicted_rating = serializers.FloatField()
    cv_mse = serializers.FloatField()
    cv_mae = serializers.FloatField()
    cv_rmse = serializers.FloatField()


class PredictResponseSerializer(serializers.Serializer):
    metrics_run = serializers.IntegerField(help_text="the metrics run whose predictor scored the texts")
    encoder = serializers.CharField()
    cv_spearman = serializers.FloatField(allow_null=True)
    baseline_cv_mae = serializers.FloatField(allow_null=True)
    predictions = PredictionSerializer(many=True)


class MetricsRuns(APIView):
    """GET: the latest metrics run of the study (404 when none). POST: start a new one (202; runs as a Celery task)."""

    schema = ApiAutoSchema()

    @extend_schema(responses={200: MetricsRunSerializer})
    def get(self, request: Request, slug: str) -> Response:
        study = require(request.user, slug, Capability.EXPORT, request=request)
        run = selectors.metrics_run_latest(study=study)
        if run is None:
            return Response({"detail": "No metrics run yet."}, status=status.HTTP_404_NOT_FOUND)
        return Response(MetricsRunSerializer(run).data)

    @extend_schema(request=None, responses={202: MetricsRunSerializer})
    def post(self, request: Request, slug: str) -> Response:
        study = require(request.user, slug, Capability.RUN, request=request)
        run = metrics_run.metrics_run_create(study=study, requested_by=request.user.get_username())
        announce_action(actor=request.user, study=study, action="run.start", object=f"metrics run {run.pk}",
                        detail="API", request=request)
        run.refresh_from_db()
        body = MetricsRunSerializer(run).data
        reason = metrics_run.unavailable_reason()
        if reason:
            body["warning"] = reason
        return Response(body, status=status.HTTP_202_ACCEPTED)


class Predict(APIView):
    """Predicted mean human rating of each text, with the predictor's cross-validated error.

    409 when no predictor has been fitted for the study, 503 when this server
    lacks the optional metrics stack.
    """

    parser_classes = [JSONParser]  # a list of texts: a form would lose empty and repeated ones' order and type
    schema = ApiAutoSchema()

    @extend_schema(request=PredictRequestSerializer,
                   responses={200: PredictResponseSerializer,
                              409: OpenApiResponse(ErrorSerializer, description="no predictor fitted for the study yet"),
                              503: OpenApiResponse(ErrorSerializer, description="no metrics stack on this server")})
    def post(self, request: Request, slug: str) -> Response:
        study = require(request.user, slug, Capability.RUN, request=request)
        payload = PredictRequestSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        try:
            frame, run = metrics_run.study_predict(study=study, texts=payload.validated_data["texts"])
        except metrics_run.PredictorNotTrained as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_409_CONFLICT)
        except MetricsUnavailable as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_503_SERVICE_UNAVAILABLE)
        rows = frame[["text", "predicted_rating", "cv_mse", "cv_mae", "cv_rmse"]].to_dict(orient="records")
        return Response({
            "metrics_run": run.pk,
            "encoder": ENCODER_NAME,
            "cv_spearman": _finite(frame["cv_spearman"].iloc[0]),
            "baseline_cv_mae": _finite(frame["baseline_cv_mae"].iloc[0]),
            "predictions": PredictionSerializer(rows, many=True).data,
        })


def _finite(value: float) -> float | None:
    return None if value != value else float(value)
