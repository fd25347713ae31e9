"""REST endpoints for studies, participants and ratings (pseudonymous only)."""

from __future__ import annotations

from django.db.models import Count, F, Q
from drf_spectacular.utils import extend_schema
from rest_framework import generics, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from .access import studies_visible_to, study_for_user
from .definition import DefinitionError, parse_definition
from .loader import StudyLocked, study_load
from .models import Participant, Rating, Study
from .serializers import (
    DefinitionUploadSerializer, ParticipantSerializer, RatingRowSerializer, StudyDetailSerializer, StudySerializer,
)


def _with_counts(queryset):
    return queryset.annotate(
        n_participants=Count("participants", filter=Q(participants__is_preview=False), distinct=True),
        n_completed=Count("participants", filter=Q(participants__is_preview=False, participants__status="completed"), distinct=True),
    ).order_by("slug")


class StudyList(generics.ListAPIView):
    serializer_class = StudySerializer

    def get_queryset(self):
        return _with_counts(studies_visible_to(self.request.user))


class StudyDetail(generics.RetrieveAPIView):
    serializer_class = StudyDetailSerializer
    lookup_field = "slug"

    def get_queryset(self):
        return _with_counts(studies_visible_to(self.request.user)).annotate(
            n_blocks=Count("blocks", distinct=True), n_items=Count("items", distinct=True)
        )


class StudyLoad(APIView):
    """Create or update a study from a definition (same rules as ``load_study``)."""

    @extend_schema(request=DefinitionUploadSerializer, responses={201: StudyDetailSerializer, 200: StudyDetailSerializer})
    def post(self, request: Request) -> Response:
        upload = DefinitionUploadSerializer(data=request.data)
        upload.is_valid(raise_exception=True)
        try:
            definition = parse_definition(upload.validated_data["definition"])
        except DefinitionError as exc:
            return Response({"definition": exc.problems}, status=status.HTTP_400_BAD_REQUEST)
        existing = studies_visible_to(request.user).filter(slug=definition.slug).exists()
        if not existing and _slug_taken(definition.slug):
            return Response({"definition": [f'slug: "{definition.slug}" belongs to another researcher']},
                            status=status.HTTP_400_BAD_REQUEST)
        try:
            result = study_load(definition=definition)
        except StudyLocked as exc:
            return Response({"definition": [str(exc)]}, status=status.HTTP_409_CONFLICT)
        result.study.owners.add(request.user)
        annotated = StudyDetail(request=request).get_queryset().get(pk=result.study.pk)
        body = StudyDetailSerializer(annotated).data
        return Response(body, status=status.HTTP_201_CREATED if result.created else status.HTTP_200_OK)


def _slug_taken(slug: str) -> bool:
    return Study.objects.filter(slug=slug).exists()


class ParticipantList(generics.ListAPIView):
    serializer_class = ParticipantSerializer

    def get_queryset(self):
        study = study_for_user(self.request.user, self.kwargs["slug"])
        queryset = Participant.objects.filter(study=study, is_preview=False).order_by("id")
        wanted_status = self.request.query_params.get("status")
        if wanted_status:
            queryset = queryset.filter(status=wanted_status)
        return queryset


class RatingList(generics.ListAPIView):
    serializer_class = RatingRowSerializer

    def get_queryset(self):
        study = study_for_user(self.request.user, self.kwargs["slug"])
        queryset = Rating.objects.filter(
            placement__visit__participant__study=study, placement__visit__participant__is_preview=False
        )
        for param, field in (("block_id", "placement__item__block__key"), ("response_id", "placement__item__key"),
                             ("participant_id", "placement__visit__participant__pseudonym")):
            value = self.request.query_params.get(param)
            if value:
                queryset = queryset.filter(**{field: value})
        return queryset.order_by("id").values(
            participant_id=F("placement__visit__participant__pseudonym"),
            block_id=F("placement__item__block__key"),
            response_id=F("placement__item__key"),
            dimension_key=F("dimension__key"),
            position=F("placement__position"),
            rating=F("value"),
            rank=F("placement__rank"),
            block_order=F("placement__visit__sequence"),
        )
