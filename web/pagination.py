"""The API's page numbers: one per request."""

from __future__ import annotations

from rest_framework.exceptions import ValidationError
from rest_framework.pagination import PageNumberPagination


class OnePageNumberPagination(PageNumberPagination):
    """DRF's page numbers, except that a repeated ``page`` (``?page=1&page=2``) is refused with 400 rather than
    silently answered with its last value: a client that sent two did not get what it asked for."""

    def paginate_queryset(self, queryset, request, view=None):
        if len(request.query_params.getlist(self.page_query_param)) > 1:
            raise ValidationError({self.page_query_param: ["Give one page number."]})
        return super().paginate_queryset(queryset, request, view)
