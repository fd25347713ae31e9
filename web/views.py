"""Views that belong to no app: the liveness probe."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse


def healthz(request: HttpRequest) -> HttpResponse:
    """Liveness without the database: the baseline of bench/capacity.py and the stack's readiness probe."""
    return HttpResponse("ok", content_type="text/plain")
