"""Participant pages speak their study's language (the definition's "language").

Researcher pages stay in the site's language (settings.LANGUAGE_CODE). The
language is switched per request around the view, not by LocaleMiddleware:
participants do not choose it (their browser's Accept-Language is not asked),
the study does, and nothing may leak into the next request of the same thread.

The language is known before the view runs from this process's memory of each
study's language (asked of the database only the first time), which saves a
query on every participant page. The view then reads the study row anyway; it
calls ``study_language_confirm`` with it before rendering anything, so a
language changed by a reload in another process is used from the next request.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.utils import translation

from . import selectors
from .models import Study

# slug -> language code, as last read from the study's row in this process.
_remembered: dict[str, str] = {}


def in_study_language(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """Run a participant view (one taking ``slug``) in the study's language, and say so in
    the Content-Language header; an unknown study runs in the site's language (its 404)."""

    @wraps(view)
    def wrapped(request: HttpRequest, slug: str, *args, **kwargs) -> HttpResponse:
        language = _remembered.get(slug)
        if language is None:
            language = selectors.study_language(slug=slug) or settings.LANGUAGE_CODE
        with translation.override(language):
            response = view(request, slug, *args, **kwargs)
            # The view may have corrected it (study_language_confirm).
            language = translation.get_language() or language
        response.headers.setdefault("Content-Language", language)
        return response

    return wrapped


def study_language_confirm(study: Study) -> None:
    """The view holds the study's row: its language is the one to speak (and to remember)."""
    _remembered[study.slug] = study.language
    if translation.get_language() != study.language:
        translation.activate(study.language)
