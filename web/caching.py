"""Researcher pages, downloads and API answers are never stored by a browser or a proxy.

They hold study data (identifiers.csv holds panel ids): ``Cache-Control: no-store``
keeps them out of the browser's disk cache and out of any shared cache between
the researcher and the server. (Participant pages mark themselves with
``never_cache`` in ``surveys/views.py``.)
"""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.utils.cache import patch_cache_control

#: Paths whose answers are never stored (researcher pages, exports, the API, the admin, sign-in).
DEFAULT_NO_STORE_PREFIXES = ("/studies/", "/api/", "/admin/", "/accounts/")


class NoStoreMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response
        self.prefixes = tuple(getattr(settings, "NO_STORE_PATH_PREFIXES", DEFAULT_NO_STORE_PREFIXES))

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if request.path.startswith(self.prefixes):
            patch_cache_control(response, no_store=True, private=True)
        return response
