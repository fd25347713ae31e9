"""The radio group of the participant pages, written in Python.

A block page holds a radio group per response and question, each of five to eleven options; drawn by an
included template, they were the largest part of the CPU a block request cost (issue 31). The markup is
the one ``surveys/_radio_group.html`` drew, byte for byte.
"""

from __future__ import annotations

from django import template
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe
from django.utils.translation import gettext

from ..questions.controls import Control

register = template.Library()


@register.simple_tag
def radio_group(control: Control) -> SafeString:
    has_error = bool(control.error)
    invalid = mark_safe(' aria-invalid="true"') if has_error else ""
    options = format_html_join(
        "",
        '\n    <label class="scale-option" for="{0}"><input type="radio" id="{0}" name="{1}" value="{2}"{3}{4}>'
        ' <span>{5}</span></label>\n    ',
        (
            (option.input_id, control.name, option.value, mark_safe(" checked") if option.selected else "", invalid,
             option.label)
            for option in control.options
        ),
    )
    if has_error:
        opening = format_html('<fieldset class="scale has-error" id="fs-{}" aria-describedby="{}">',
                              control.name, control.error_id)
        message = format_html(
            '<p class="error-message" id="{}"><span class="visually-hidden">{} </span>{}</p>',
            control.error_id, gettext("Error:"), control.error,
        )
    else:
        opening, message = format_html('<fieldset class="scale" id="fs-{}">', control.name), ""
    return format_html(
        '{}\n  <legend>{}</legend>\n  {}\n  <div class="scale-options">\n    {}\n  </div>\n</fieldset>\n',
        opening, control.label, message, options,
    )
