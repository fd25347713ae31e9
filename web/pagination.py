"""The API's page numbers: one per request."""

from __future__ import annotations

from rest_framework.exceptions import NotFound
from rest_framework.pagination import PageNumberPagination


class OnePageNumberPagination(PageNumberPagination):
    """DRF's page numbers, except that a repeated ``page`` (``?page=1&page=2``) is refused rather than silently
    answered with its last value: a client that sent two did not get what it asked for. The answer is DRF's own
    to a page that does not exist (404, documented on every paginated operation)."""

    def paginate_queryset(self, queryset, request, view=None):
        if len(request.query_params.getlist(self.page_query_param)) > 1:
            raise NotFound("Invalid page: give one page number.")
        return super().paginate_queryset(queryset, request, view)
