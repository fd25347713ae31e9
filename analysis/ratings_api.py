"""The ratings API: every rating of a study, one row per response and dimension, with the visit columns
of the analyses, read from the frames beside it (``analysis.frames``)."""

from __future__ import annotations

import pandas as pd
from django.db.models import F
from drf_spectacular.utils import extend_schema
from rest_framework import generics
from rest_framework.request import Request
from rest_framework.response import Response

from analysis.frames import visits_frame
from analysis.serializers import RatingFilterSerializer, RatingRowSerializer
from surveys.api import ApiAutoSchema, query_filters
from surveys.models import Rating
from surveys.permissions import Capability, require

_RATING_FILTERS = {
    "status": "placement__visit__participant__status",
    "block_id": "placement__item__block__key",
    "response_id": "placement__item__key",
    "participant_id": "placement__visit__participant__pseudonym",
    "dimension": "dimension__key",
}


@extend_schema(parameters=[RatingFilterSerializer])
class RatingList(generics.ListAPIView):
    """Every rating of the study, one row per response and dimension, paginated.

    ``block_order``, ``seconds_on_block`` and ``rank_changed`` are those of the analyses and of
    ratings.csv (``analysis.derived``): read for the page's visits from
    ``analysis.frames.visits_frame``, never counted here.
    """

    serializer_class = RatingRowSerializer
    query_serializer = RatingFilterSerializer
    schema = ApiAutoSchema()

    def get_queryset(self):
        self.study = require(self.request.user, self.kwargs["slug"], Capability.EXPORT, request=self.request)
        wanted = query_filters(self.query_serializer, self.request)
        queryset = Rating.objects.filter(
            placement__visit__participant__study=self.study, placement__visit__participant__is_preview=False,
            **{_RATING_FILTERS[key]: value for key, value in wanted.items()},
        )
        return queryset.order_by("id").values(
            participant_id=F("placement__visit__participant__pseudonym"),
            block_id=F("placement__item__block__key"),
            response_id=F("placement__item__key"),
            dimension_key=F("dimension__key"),
            position=F("placement__position"),
            rating=F("value"),
            rank=F("placement__rank"),
            visit=F("placement__visit_id"),
            participant=F("placement__visit__participant_id"),
        )

    def list(self, request: Request, *args, **kwargs) -> Response:
        queryset = self.get_queryset()
        page = self.paginate_queryset(queryset)
        rows = _with_visit_columns(list(queryset if page is None else page), study_id=self.study.pk)
        body = self.get_serializer(rows, many=True).data
        return Response(body) if page is None else self.get_paginated_response(body)


def _with_visit_columns(rows: list[dict], *, study_id: int) -> list[dict]:
    """The rows with their visit's block_order, seconds_on_block and rank_changed (the database ids dropped)."""
    visit_ids = [row.pop("visit") for row in rows]
    participant_ids = sorted({row.pop("participant") for row in rows})
    visits = visits_frame(study_id, participant_ids=participant_ids)
    at = pd.Index(visits["visit"]).get_indexer(visit_ids)
    # A rating's visit is a block visit of the same non-preview participant, so it is missing only when
    # the participant was deleted (withdrew) between the two reads: their ratings are gone, so are the rows.
    kept = at >= 0
    if not kept.all():
        rows, at = [row for row, keep in zip(rows, kept) if keep], at[kept]
    orders = visits["block_order"].to_numpy()[at].tolist()
    seconds = visits["seconds_on_block"].to_numpy()[at].tolist()
    changed = visits["rank_changed"].array[at].to_numpy(dtype=object, na_value=None).tolist()
    for row, order, second, moved in zip(rows, orders, seconds, changed):
        row["block_order"], row["seconds_on_block"] = order, None if second != second else second
        row["rank_changed"] = moved
    return rows
