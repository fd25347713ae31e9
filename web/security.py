"""Security headers Django 5.2 does not set itself, and masking of panel ids in logs."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from functools import lru_cache, wraps
from urllib.parse import unquote

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


# --- panel ids kept out of every log line -------------------------------------------------
#
# A study names its id parameter as it likes (PROLIFIC_PID, workerId, id, email), and a
# mistyped link may use any name, so the query string of every URL in a log line (the
# request line, a Referer, an error message) has all its values masked except those of
# the platform's own parameters, which never identify anyone. Elsewhere in a line:
# ``name=value`` pairs whose name looks like an identifier, anything that looks like an
# e-mail address (also percent-encoded), Prolific's 24-hex ids, the key values of a
# database constraint error, and the literals of logged SQL.

#: Query parameters of researcher pages and the API: their values are kept in logs.
PLAIN_QUERY_PARAMETERS = frozenset({"format", "level", "excel", "confirm", "page", "page_size", "next", "status"})

_URL_QUERY = re.compile(r"(/[^\s?#\"'<>]*\?)([^\s#\"'<>]*)")
_NAMED_ID = re.compile(
    r"(?<![\w-])([\w-]*(?:id|session|participant|email|mail|worker|user)=)[^&\s\"'<>]+", re.IGNORECASE)
_EMAIL = re.compile(r"(?<![\w.%+-])[\w.%+-]+(?:@|%40)[\w-]+(?:\.[\w-]+)+")
_HEX_ID = re.compile(r"\b[0-9a-f]{24}\b", re.IGNORECASE)
_KEY_DETAIL = re.compile(r"(Key \([^)]*\)=\()[^)]*(\))")  # PostgreSQL: Key (study_id, external_id)=(3, W123)
_SQL_LITERAL = re.compile(r"'(?:[^']|'')*'")
MASK = "[masked]"


def _mask_query(match: re.Match) -> str:
    return match.group(1) + _masked_pairs(match.group(2))


def _masked_pairs(query: str) -> str:
    pairs = []
    for pair in query.split("&"):
        name, has_value, value = pair.partition("=")
        if has_value and name.lower() in PLAIN_QUERY_PARAMETERS and not _EMAIL.search(value):
            pairs.append(f"{name}={_masked_nested_url(value)}")
        elif has_value:
            pairs.append(f"{name}={MASK}")
        else:
            pairs.append(MASK if pair else "")
    return "&".join(pairs)


def _masked_nested_url(value: str) -> str:
    """A kept value (``next=``) may be a URL with a query of its own, percent-encoded once or more
    (``next=/s/x/%3Finvite%3DTOKEN``): that query's values are masked like the outer one's."""
    decoded = value
    for _ in range(3):
        if (unquoted := unquote(decoded)) == decoded:
            break
        decoded = unquoted
    path, has_query, query = decoded.partition("?")
    if not has_query:
        return value
    return f"{path}?{_masked_pairs(query)}"


def mask_identifiers(text: str) -> str:
    text = _URL_QUERY.sub(_mask_query, text)
    text = _NAMED_ID.sub(rf"\1{MASK}", text)
    text = _KEY_DETAIL.sub(rf"\1{MASK}\2", text)
    text = _EMAIL.sub("[email]", text)
    return _HEX_ID.sub("[id]", text)


class MaskParticipantIdsFilter(logging.Filter):
    """Keeps panel ids out of every log line (request logs, errors and their tracebacks,
    SQL, gunicorn's access log)."""

    def filter(self, record: logging.LogRecord) -> bool:
        # The filter sits on loggers and on the handler they share (config/gunicorn.conf.py, config/settings.py):
        # a record the logger's filter masked is not masked again by the handler's (about a seventh of
        # gunicorn's access-log cost per request).
        if getattr(record, "ids_masked", False):
            return True
        record.ids_masked = True
        message = record.getMessage()
        masked = mask_identifiers(message)
        if record.name.startswith("django.db.backends"):
            # Logged queries carry their parameters (an external id among them) as literals.
            masked = _SQL_LITERAL.sub(f"'{MASK}'", masked)
        if masked != message:
            record.msg, record.args = masked, None
        if record.exc_info and not record.exc_text:
            record.exc_text = mask_identifiers(logging.Formatter().formatException(record.exc_info))
        if record.stack_info:
            record.stack_info = mask_identifiers(record.stack_info)
        return True
