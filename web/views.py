"""Views that belong to no app: the liveness probe, the site's icon."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, HttpResponsePermanentRedirect
from django.templatetags.static import static


def healthz(request: HttpRequest) -> HttpResponse:
    """Liveness without the database: the baseline of bench/capacity.py and the stack's readiness probe."""
    return HttpResponse("ok", content_type="text/plain")


def favicon(request: HttpRequest) -> HttpResponse:
    """``/favicon.ico``, which browsers ask for on pages without an icon link, is the static file
    (its hashed, long-cached name in production: resolved per request, once the manifest exists)."""
    return HttpResponsePermanentRedirect(static("favicon.ico"))
