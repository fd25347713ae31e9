"""REST endpoints for studies and participants (pseudonymous only); the ratings are analysis.ratings_api."""

from __future__ import annotations

from django.db.models import Count, Q
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import generics, serializers, status
from rest_framework.parsers import JSONParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from .permissions import Capability, can, require, studies_visible_to
from .definition import DefinitionError, parse_definition
from .loader import StudyLocked, study_load
from .models import Participant, Study
from .serializers import (
    DefinitionUploadSerializer, ParticipantFilterSerializer, ParticipantSerializer, StudyDetailSerializer,
    StudySerializer,
)


class ErrorSerializer(serializers.Serializer):
    detail = serializers.CharField()


class ApiAutoSchema(AutoSchema):
    """Documents the error responses every endpoint can give besides its own.

    403: not signed in (session or token); 404: a study or run one may not see
    (never 403, so existence is not revealed), or a page number out of range;
    429: throttled; 400: invalid input, as ``{"field": ["message"]}``, for
    writes and validated query strings.
    """

    def _get_response_bodies(self, direction="response"):
        responses = super()._get_response_bodies(direction)
        errors = {"403": ("Not signed in", ErrorSerializer), "429": ("Too many requests", ErrorSerializer)}
        not_found = []
        if "{" in self.path:
            not_found.append("No such object, or not visible to you")
        if self._is_list_view() and self._get_paginator() is not None:
            not_found.append('a page that is not a number or is past the last one ("Invalid page.")')
        if not_found:
            errors["404"] = ("; or ".join(not_found), ErrorSerializer)
        if self.method == "POST" or getattr(self.view, "query_serializer", None):
            errors["400"] = ("Invalid input: field -> list of messages", OpenApiTypes.OBJECT)
        for code, (description, body) in errors.items():
            if code not in responses:
                responses[code] = self._get_response_for_code(
                    OpenApiResponse(body, description=description), code, direction=direction
                )
        return responses


def _with_counts(queryset):
    return queryset.annotate(
        n_participants=Count("participants", filter=Q(participants__is_preview=False), distinct=True),
        n_completed=Count("participants", filter=Q(participants__is_preview=False, participants__status="completed"), distinct=True),
    ).order_by("slug")


class StudyList(generics.ListAPIView):
    serializer_class = StudySerializer
    schema = ApiAutoSchema()

    def get_queryset(self):
        return _with_counts(studies_visible_to(self.request.user, Capability.EXPORT))


class StudyDetail(generics.RetrieveAPIView):
    serializer_class = StudyDetailSerializer
    lookup_field = "slug"
    schema = ApiAutoSchema()

    def get_queryset(self):
        return _with_counts(studies_visible_to(self.request.user, Capability.EXPORT)).annotate(
            n_blocks=Count("blocks", distinct=True), n_items=Count("items", distinct=True)
        )

    def get_object(self):
        # 404 outside the team, 403 (audited) for a role without the API, as on every endpoint.
        require(self.request.user, self.kwargs["slug"], Capability.EXPORT, request=self.request)
        return super().get_object()


class StudyLoad(APIView):
    """Create or update a study from a definition (same rules as ``load_study``)."""

    parser_classes = [JSONParser]  # the definition is a JSON object, which no form field can carry
    schema = ApiAutoSchema()

    @extend_schema(request=DefinitionUploadSerializer,
                   responses={201: StudyDetailSerializer, 200: StudyDetailSerializer, 409: ErrorSerializer})
    def post(self, request: Request) -> Response:
        upload = DefinitionUploadSerializer(data=request.data)
        upload.is_valid(raise_exception=True)
        try:
            definition = parse_definition(upload.validated_data["definition"])
        except DefinitionError as exc:
            return Response({"definition": exc.problems}, status=status.HTTP_400_BAD_REQUEST)
        found = Study.objects.filter(slug=definition.slug).first()
        if found is not None and not can(request.user, found, Capability.MANAGE):
            return Response({"definition": [f'slug: "{definition.slug}" belongs to another researcher']},
                            status=status.HTTP_400_BAD_REQUEST)
        try:
            result = study_load(definition=definition, actor=request.user, request=request)
        except StudyLocked as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_409_CONFLICT)
        result.study.owners.add(request.user)
        annotated = StudyDetail(request=request).get_queryset().get(pk=result.study.pk)
        body = StudyDetailSerializer(annotated).data
        return Response(body, status=status.HTTP_201_CREATED if result.created else status.HTTP_200_OK)


def query_filters(serializer_class, request: Request) -> dict:
    """The validated query string of a list endpoint (a 400 when it is invalid)."""
    query = serializer_class(data=request.query_params)
    query.is_valid(raise_exception=True)
    return dict(query.validated_data)


@extend_schema(parameters=[ParticipantFilterSerializer])
class ParticipantList(generics.ListAPIView):
    """The study's participants by pseudonym (never the panel id), paginated."""

    serializer_class = ParticipantSerializer
    query_serializer = ParticipantFilterSerializer
    schema = ApiAutoSchema()

    def get_queryset(self):
        study = require(self.request.user, self.kwargs["slug"], Capability.EXPORT, request=self.request)
        wanted = query_filters(self.query_serializer, self.request)
        queryset = Participant.objects.filter(study=study, is_preview=False).order_by("id")
        if "status" in wanted:
            queryset = queryset.filter(status=wanted["status"])
        if "participant_id" in wanted:
            queryset = queryset.filter(pseudonym=wanted["participant_id"])
        return queryset
