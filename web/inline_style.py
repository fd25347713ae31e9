"""The participant stylesheet, inlined into the page's <head> and allowed by its CSP hash.

On a slow mobile link every request costs a round trip before the first paint
(562.5 ms on DevTools' "Fast 3G"), so the participant pages carry ``site.css`` in
a ``<style>`` element instead of linking it. The strict CSP (``style-src 'self'``)
admits that element through the sha256 of its exact text, never 'unsafe-inline'.
``static/css/site.css`` stays the single source: the text comes from the file.
"""

from __future__ import annotations

import base64
import hashlib
import os
from dataclasses import dataclass
from functools import cache, lru_cache

from django.conf import settings
from django.contrib.staticfiles import finders
from django.contrib.staticfiles.storage import staticfiles_storage
from django.core.exceptions import ImproperlyConfigured

PARTICIPANT_STYLESHEET = "css/site.css"


@dataclass(frozen=True)
class InlineStylesheet:
    css: str
    source: str  # the CSP source expression, e.g. 'sha256-…' (with its quotes)


def participant_stylesheet() -> InlineStylesheet:
    """The participant stylesheet's text and hash, read once per process.

    With DEBUG on, an edited file is read again (runserver does not restart on CSS).
    """
    path = _stylesheet_path(PARTICIPANT_STYLESHEET)
    version = os.stat(path).st_mtime_ns if settings.DEBUG else 0
    return _load(path, version)


def style_hash(css: str) -> str:
    """The CSP source that allows a <style> element whose text is exactly ``css``."""
    digest = hashlib.sha256(css.encode("utf-8")).digest()
    return f"'sha256-{base64.b64encode(digest).decode('ascii')}'"


@cache
def _stylesheet_path(name: str) -> str:
    # The finders read the source tree (STATICFILES_DIRS), so this works with DEBUG
    # off and before collectstatic; the collected copy is the fallback for a
    # deployment that ships STATIC_ROOT alone.
    path = finders.find(name)
    if path:
        return path
    try:
        path = staticfiles_storage.path(name)
    except NotImplementedError:  # a remote storage: no local file to read
        path = ""
    if path and os.path.exists(path):
        return path
    raise ImproperlyConfigured(f"the participant stylesheet {name} is neither in the static dirs nor in STATIC_ROOT")


@lru_cache(maxsize=4)
def _load(path: str, version: int) -> InlineStylesheet:
    with open(path, encoding="utf-8-sig") as file:
        css = file.read()
    # The browser hashes the element's text after HTML parsing, which turns CR LF
    # and lone CR into LF: hash (and render) the same text.
    css = css.replace("\r\n", "\n").replace("\r", "\n")
    if "</style" in css.lower():
        raise ImproperlyConfigured(f"{path} contains '</style', which would end the inline <style> element")
    return InlineStylesheet(css=css, source=style_hash(css))
