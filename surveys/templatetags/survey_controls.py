"""The participant pages' repeated controls, written in Python: the radio groups and a select's options.

A block page holds a radio group per response and question, each of five to eleven options, and a rank
select per response; drawn by the template engine, node by node, they were the largest part of the CPU a
block request cost (issue 31). The markup is the one the templates drew, byte for byte.
"""

from __future__ import annotations

import html

from django import template
from django.utils.safestring import SafeString, mark_safe
from django.utils.translation import gettext

from ..questions.controls import Control

register = template.Library()


def _escaped(value: object) -> str:
    """What ``django.utils.html.conditional_escape`` gives (safe text as it is, the rest through
    ``html.escape``), without its check for lazy strings on every call: a page escapes hundreds of values."""
    if hasattr(value, "__html__"):
        return value.__html__()
    return html.escape(str(value))


@register.simple_tag
def radio_group(control: Control) -> SafeString:
    name = _escaped(control.name)
    attributes = ' aria-invalid="true"' if control.error else ""
    options = "".join(
        f'\n    <label class="scale-option" for="{input_id}"><input type="radio" id="{input_id}" name="{name}"'
        f' value="{_escaped(option.value)}"{" checked" if option.selected else ""}{attributes}>'
        f" <span>{_escaped(option.label)}</span></label>\n    "
        for option in control.options
        for input_id in (_escaped(option.input_id),)
    )
    if control.error:
        error_id = _escaped(control.error_id)
        opening = f'<fieldset class="scale has-error" id="fs-{name}" aria-describedby="{error_id}">'
        message = (f'<p class="error-message" id="{error_id}"><span class="visually-hidden">'
                   f'{_escaped(gettext("Error:"))} </span>{_escaped(control.error)}</p>')
    else:
        opening, message = f'<fieldset class="scale" id="fs-{name}">', ""
    return mark_safe(
        f"{opening}\n  <legend>{_escaped(control.label)}</legend>\n  {message}\n"
        f'  <div class="scale-options">\n    {options}\n  </div>\n</fieldset>\n'
    )


@register.simple_tag
def select_options(control: Control) -> SafeString:
    """The ``<option>`` elements of a select, the chosen one ``selected``."""
    return mark_safe("".join(
        f'<option value="{_escaped(option.value)}"{" selected" if option.selected else ""}>{_escaped(option.label)}'
        "</option>"
        for option in control.options
    ))
