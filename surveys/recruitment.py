"""The panel round trip: which ids may enter a study, and where a finisher is sent back.

Both settings come from the researcher and meet anonymous visitors, so they are
checked when a study is loaded (``surveys.definition``, the admin) and used
defensively at run time (``surveys.views``):

- ``completion_url`` is an http(s) URL whose only placeholder is ``{code}``;
  an empty one means there is no panel to return to.
- ``id_pattern`` is a regular expression that Python's backtracking engine
  runs on the id in the entry link. A pattern such as ``^(a+)+$`` takes time
  exponential in the id's length, so only patterns whose backtracking is
  bounded are accepted: no backreferences or lookarounds, no quantifier around
  something that can itself match in several ways, and at most
  ``MAX_MATCH_PATHS`` ways through the pattern on an id of the longest length
  accepted (``limits.EXTERNAL_ID``). Each way costs at most one step per
  character, so the match of an accepted pattern is bounded (milliseconds;
  tests/test_recruitment.py measures the worst case).
"""

from __future__ import annotations

import logging
import re
from functools import lru_cache
from urllib.parse import urlsplit

# The parser behind ``re.compile``: the tree the matcher runs, not a re-implementation.
from re import _constants as sre
from re import _parser as sre_parse

from . import limits

log = logging.getLogger(__name__)

CODE_PLACEHOLDER = "{code}"
_NOT_IN_URLS = re.compile(r'[\s\x00-\x1f\x7f<>"\\^`|]')


def completion_url_problem(url: str) -> str | None:
    """Why ``url`` cannot be a completion URL, or None when it can."""
    if url == "":
        return None
    must = "must be an http(s) URL containing {code}"
    if not url.startswith(("https://", "http://")):
        return must
    rest = url.replace(CODE_PLACEHOLDER, "CODE")
    if stray := re.search(r"\{[^{}]*\}?|\}", rest):
        return f'"{stray.group()}": the only placeholder is {{code}} (no other braces)'
    if rest == url:
        return must
    if bad := _NOT_IN_URLS.search(rest):
        return f"{bad.group()!r} is not allowed in a URL (encode it, e.g. %20 for a space)"
    try:
        parts = urlsplit(rest)
        parts.port  # noqa: B018  (raises ValueError on a port that is not a number)
    except ValueError as exc:
        return f"not a well-formed URL ({exc})"
    if not parts.hostname:
        return "not a well-formed URL (no host name)"
    return None


def completion_url_for(url: str, code: str) -> str:
    """Where a participant with ``code`` goes back to ("" when nowhere).

    A plain replacement, not ``str.format``: a study loaded before the URL was
    checked must not turn a finisher's page into an error."""
    return url.replace(CODE_PLACEHOLDER, code)


# ---------------------------------------------------------------- id patterns

MAX_MATCH_PATHS = 20_000
_SINGLE = {sre.LITERAL, sre.NOT_LITERAL, sre.ANY, sre.IN, sre.AT}
_REPEATS = {sre.MAX_REPEAT, sre.MIN_REPEAT, sre.POSSESSIVE_REPEAT}
_REFUSED = {
    sre.GROUPREF: "backreferences",
    sre.GROUPREF_EXISTS: "conditional groups",
    sre.ASSERT: "lookarounds",
    sre.ASSERT_NOT: "lookarounds",
}


class _Unsafe(Exception):
    pass


def id_pattern_problem(pattern: str) -> str | None:
    """Why ``pattern`` cannot check panel ids (invalid, or possibly slow), or None when it can."""
    try:
        parsed = sre_parse.parse(pattern)
    except re.error as exc:
        return f"not a valid regular expression: {exc}"
    try:
        paths = _paths(parsed.data, limits.EXTERNAL_ID)
    except _Unsafe as exc:
        return f"{exc}: such patterns can take minutes to check one id; use e.g. ^[0-9a-f]{{24}}$"
    if paths > MAX_MATCH_PATHS:
        return (
            f"too many ways to match (over {MAX_MATCH_PATHS:,} for a {limits.EXTERNAL_ID}-character id): "
            "use fewer open-ended quantifiers (+, *, {m,n}), e.g. ^[A-Za-z0-9]+$ or ^[0-9a-f]{24}$"
        )
    return None


def _paths(items: list, n: int) -> int:
    """An upper bound on the leaves of the matcher's search tree for ``items`` on ``n`` characters
    (saturating a little above the limit)."""
    total = 1
    for op, arg in items:
        total = min(total * _node_paths(op, arg, n), MAX_MATCH_PATHS + 1)
    return total


def _node_paths(op, arg, n: int) -> int:
    if op in _REFUSED:
        raise _Unsafe(f"{_REFUSED[op]} are not allowed")
    if op in _SINGLE:
        return 1
    if op is sre.SUBPATTERN:
        return _paths(arg[-1], n)
    if op is sre.ATOMIC_GROUP:
        return _paths(arg, n)
    if op is sre.BRANCH:
        return sum(_paths(alternative, n) for alternative in arg[1])
    if op in _REPEATS:
        low, high, body = arg
        inner = _paths(body, n)
        if high <= 1:
            return inner + (low == 0)
        if inner > 1:
            raise _Unsafe("a quantifier around something that can itself match in several ways "
                          "(nested quantifiers or alternatives, e.g. (a+)+ or (a|ab)*)")
        width = max(body.getwidth()[0], 1)
        return max(min(high, n // width) - low + 1, 1)
    raise _Unsafe(f"the construct {op} is not allowed")


@lru_cache(maxsize=256)
def _compiled_if_safe(pattern: str) -> re.Pattern | None:
    """The compiled pattern; None (said once per process in the log) when it is unsafe."""
    if problem := id_pattern_problem(pattern):
        log.error("id_pattern %r is unsafe (%s); every entry link is refused until the study is reloaded",
                  pattern, problem)
        return None
    return re.compile(pattern)


def external_id_valid(pattern: str, external_id: str | None) -> bool:
    """Does the id in an entry link pass the study's pattern?

    Ids longer than any panel's are refused before matching. A pattern stored
    before patterns were checked, and unsafe, refuses every id (and says so in
    the log) rather than let one link hold a worker for minutes."""
    if not external_id or len(external_id) > limits.EXTERNAL_ID:
        return False
    compiled = _compiled_if_safe(pattern)
    return compiled is not None and compiled.fullmatch(external_id) is not None
