"""Participant pages speak their study's language (the definition's "language").

Researcher pages stay in the site's language (settings.LANGUAGE_CODE). The
language is switched per request around the view, not by LocaleMiddleware:
participants do not choose it (their browser's Accept-Language is not asked),
the study does, and nothing may leak into the next request of the same thread.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.utils import translation

from . import selectors


def in_study_language(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """Run a participant view (one taking ``slug``) in the study's language, and say so in
    the Content-Language header; an unknown study runs in the site's language (its 404)."""

    @wraps(view)
    def wrapped(request: HttpRequest, slug: str, *args, **kwargs) -> HttpResponse:
        language = selectors.study_language(slug=slug) or settings.LANGUAGE_CODE
        with translation.override(language):
            response = view(request, slug, *args, **kwargs)
        response.headers.setdefault("Content-Language", language)
        return response

    return wrapped
