"""The API's page numbers: one per request, and a number."""

from __future__ import annotations

from rest_framework.exceptions import NotFound
from rest_framework.pagination import PageNumberPagination


class OnePageNumberPagination(PageNumberPagination):
    """DRF's page numbers, held to the schema's ``page: integer``.

    DRF answers ``?page=`` with the first page (an empty value falls back to 1) and ``?page=last`` with the
    last one; a repeated ``page`` (``?page=1&page=2``) gets its last value. A client that sent any of these
    did not send what the schema documents, so each is refused with DRF's own answer to a page that does not
    exist (404, documented on every paginated operation)."""

    last_page_strings = ()

    def paginate_queryset(self, queryset, request, view=None):
        pages = request.query_params.getlist(self.page_query_param)
        if len(pages) > 1:
            raise NotFound("Invalid page: give one page number.")
        if pages and not (pages[0].isascii() and pages[0].isdecimal()):
            raise NotFound("Invalid page: a page is a whole number from 1.")
        return super().paginate_queryset(queryset, request, view)
