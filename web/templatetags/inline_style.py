"""``{% participant_stylesheet %}``: site.css inlined in a <style> element (see web.inline_style)."""

from __future__ import annotations

from django import template
from django.utils.safestring import SafeString, mark_safe

from web.inline_style import participant_stylesheet as _participant_stylesheet

register = template.Library()


@register.simple_tag
def participant_stylesheet() -> SafeString:
    # Marked safe: autoescaping would turn the CSS's quotes and ">" into entities,
    # and the CSP hash covers the file's exact text.
    return mark_safe(f"<style>{_participant_stylesheet().css}</style>")
