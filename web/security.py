"""Security headers Django 5.2 does not set itself, and masking of panel ids in logs."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from functools import lru_cache, wraps

from django.conf import settings
from django.http import HttpRequest, HttpResponse

from web.inline_style import participant_stylesheet

DEFAULT_CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; "
    "font-src 'self'; connect-src 'self'; object-src 'none'; base-uri 'self'; "
    "form-action 'self'; frame-ancestors 'none'"
)


# plotly.js positions its legends, mode bar and hover labels with inline styles;
# the researcher pages that draw charts allow inline styles (never inline scripts).
CHART_PAGE_CSP = DEFAULT_CSP.replace("style-src 'self'", "style-src 'self' 'unsafe-inline'")


def chart_page_csp(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    @wraps(view)
    def wrapped(request: HttpRequest, *args, **kwargs) -> HttpResponse:
        response = view(request, *args, **kwargs)
        response["Content-Security-Policy"] = CHART_PAGE_CSP
        return response

    return wrapped


class ContentSecurityPolicyMiddleware:
    """A strict CSP: every script and style comes from our own static files, except
    the participant stylesheet inlined in the pages' <head>, allowed by its hash."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response
        self.policy = getattr(settings, "CONTENT_SECURITY_POLICY", DEFAULT_CSP)
        if self.policy:
            # At start-up: a missing stylesheet stops the server, not a participant's page.
            participant_stylesheet()

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if self.policy and "Content-Security-Policy" not in response:
            response["Content-Security-Policy"] = with_style_source(self.policy, participant_stylesheet().source)
        return response


@lru_cache(maxsize=8)
def with_style_source(policy: str, source: str) -> str:
    """``policy`` that also admits the styles ``source`` allows (a hash).

    The source joins style-src and style-src-elem where they exist, or a style-src
    copied from default-src (which styles fall back on). A directive that has
    'unsafe-inline' is left alone: next to a hash, browsers ignore 'unsafe-inline'.
    """
    directives = [part.split() for part in policy.split(";") if part.strip()]
    names = [directive[0].lower() for directive in directives]
    styles = [directive for directive in directives if directive[0].lower() in ("style-src", "style-src-elem")]
    if not styles and "default-src" in names:
        fallback = [value for value in directives[names.index("default-src")][1:] if value != "'none'"]
        styles = [["style-src", *fallback]]
        directives.append(styles[0])
    for directive in styles:
        if "'unsafe-inline'" not in directive:
            directive[:] = [value for value in directive if value != "'none'"] + [source]
    return "; ".join(" ".join(directive) for directive in directives)


# Any query parameter whose name ends in PID/_ID/SESSION, and bare 24-hex ids.
_ID_PARAM = re.compile(r"((?:[A-Za-z_]*(?:PID|_ID|SESSION_ID|participant|external_id))=)[^&\s\"']+", re.IGNORECASE)
_HEX_ID = re.compile(r"\b[0-9a-f]{24}\b", re.IGNORECASE)


def mask_identifiers(text: str) -> str:
    return _HEX_ID.sub("[id]", _ID_PARAM.sub(r"\1[masked]", text))


class MaskParticipantIdsFilter(logging.Filter):
    """Keeps panel ids out of every log line (request logs, errors, gunicorn access)."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        masked = mask_identifiers(message)
        if masked != message:
            record.msg, record.args = masked, None
        return True
