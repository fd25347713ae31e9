"""What a page asks: its questions, read from the HTML or straight from the database."""

from __future__ import annotations

import re
from html.parser import HTMLParser

from surveys.models import Study
from surveys.selectors import VisitPage

from .page_spec import PageSpec
from .question_bots import question_bots


class _PageParser(HTMLParser):
    """Collects the form controls, the CSRF token and a few data- markers of a page."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.kind = ""
        self.hidden: dict[str, str] = {}
        self.radios: dict[str, list[str]] = {}
        self.selects: dict[str, list[str]] = {}
        self.textareas: dict[str, int] = {}
        self.required: set[str] = set()
        self.numbers: dict[str, tuple[float, float, bool]] = {}
        self.inputs: dict[str, dict[str, str]] = {}  # any other named input (a range, say): name -> attributes
        self.legends: list[str] = []
        self.code = ""
        self.finished = False  # the completion page (with no code on an open or invited link)
        self.placements: list[int] = []  # the response cards (data-placement), in page order
        self._select: str | None = None
        self._in_legend = False
        self._in_code = False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "form" and "data-page" in a and not self.kind:
            self.kind = a["data-page"] or ""
        elif tag == "input" and a.get("type") == "hidden" and a.get("name"):
            self.hidden[a["name"]] = a.get("value", "")
        elif tag == "input" and a.get("type") == "radio":
            self.radios.setdefault(a["name"], []).append(a.get("value", ""))
        elif tag == "input" and a.get("type") == "number" and a.get("name"):
            self.numbers[a["name"]] = (float(a.get("min", 0)), float(a.get("max", 100)), a.get("step") == "1")
        elif tag == "input" and a.get("type") == "text" and a.get("name"):
            self.textareas[a["name"]] = int(a.get("maxlength") or 10000)
        elif tag == "input" and a.get("name"):
            self.inputs[a["name"]] = {key: value or "" for key, value in a.items()}
        elif tag == "select":
            self._select = a.get("name")
            self.selects[self._select] = []
        elif tag == "option" and self._select and a.get("value"):
            self.selects[self._select].append(a["value"])
        elif tag == "textarea":
            self.textareas[a["name"]] = int(a.get("maxlength") or 10000)
            if "required" in a:
                self.required.add(a["name"])
        elif tag == "legend":
            self._in_legend = True
            self.legends.append("")
        elif tag == "section" and a.get("data-placement"):
            self.placements.append(int(a["data-placement"]))
        elif "data-completion-code" in a:
            self._in_code = True
        elif "data-finished-on" in a:
            self.finished = True

    def handle_endtag(self, tag):
        if tag == "select":
            self._select = None
        elif tag == "legend":
            self._in_legend = False
        elif self._in_code:
            self._in_code = False

    def handle_data(self, data):
        if self._in_legend:
            self.legends[-1] += data
        if self._in_code:
            self.code += data.strip()


def page_spec_from_html(html: str) -> PageSpec:
    parser = _PageParser()
    parser.feed(html)
    spec = PageSpec(kind=parser.kind, csrf_token=parser.hidden.get("csrfmiddlewaretoken", ""))
    if parser.code or parser.finished:
        spec.kind, spec.completion_code = "done", parser.code
    if parser.hidden.get("visit"):
        spec.visit_id = int(parser.hidden["visit"])
    spec.placements = list(parser.placements)
    spec.texts = dict(parser.textareas)
    spec.required = set(parser.required)
    spec.numbers = dict(parser.numbers)
    # Each question type takes what it recognises; the selects left are demographic questions.
    selects = dict(parser.selects)
    for bot in question_bots():
        bot.read_spec(spec, radios=parser.radios, selects=selects, inputs=parser.inputs)
    if "attention" in parser.radios:
        spec.check_points = [int(v) for v in parser.radios["attention"]]
        spec.statement = parser.legends[0].strip() if parser.legends else ""
    spec.selects = selects
    return spec


def page_spec_from_db(*, page: VisitPage, study: Study) -> PageSpec:
    """The same PageSpec straight from the selectors (the services driver)."""
    if page.is_check:
        return PageSpec(
            kind="check",
            visit_id=page.visit.pk,
            statement=page.visit.attention_check.text,
            check_points=page.dimensions[0].points,
        )
    spec = PageSpec(kind="block", visit_id=page.visit.pk, placements=[p.pk for p in page.placements])
    for bot in question_bots():
        bot.read_page(spec, page=page, study=study)
    return spec
