"""Participant pages name each response and question once, the same way everywhere (issue 30 item 17).

- the most/least options carry the letter the headings show ("Response 4 (D)", not "Response 4");
- the pairwise reason reads "Why? (optional)", not "(optional) (optional)".
"""

from __future__ import annotations

import re
from html.parser import HTMLParser

from surveys.models import ItemPlacement


class _Labels(HTMLParser):
    """The response headings (h2 id="response-...") and the text of every <label for=...>."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.headings: list[str] = []
        self.labels: dict[str, str] = {}
        self._into: tuple[str, str] | None = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "h2" and (a.get("id") or "").startswith("response-"):
            self.headings.append("")
            self._into = ("heading", "")
        elif tag == "label" and a.get("for"):
            self.labels[a["for"]] = ""
            self._into = ("label", a["for"])

    def handle_endtag(self, tag):
        if tag in ("h2", "label"):
            self._into = None

    def handle_data(self, data):
        if self._into and self._into[0] == "heading":
            self.headings[-1] += data
        elif self._into:
            self.labels[self._into[1]] += data


def _page_labels(client, study, steps) -> tuple[_Labels, list[int]]:
    steps.start(client, study)
    response, spec = steps.page(client, study)
    parser = _Labels()
    parser.feed(response.content.decode())
    return parser, spec.placements


def _squeeze(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def test_the_most_and_least_options_name_each_response_as_its_heading_does(client, most_least, steps):
    parser, placements = _page_labels(client, most_least, steps)
    letters = dict(ItemPlacement.objects.filter(pk__in=placements).values_list("pk", "position"))
    # Letters follow the display position (surveys.questions.controls.letter_label): A for the first shown.
    expected = [f"Response {letters[pid]} ({'ABCDE'[letters[pid] - 1]})" for pid in placements]
    assert [_squeeze(h) for h in parser.headings] == expected
    for field in ("most", "least"):
        assert [_squeeze(parser.labels[f"id-{field}-{pid}"]) for pid in placements] == expected, field


def test_a_study_without_labels_names_responses_by_number_only(client, tide, steps):
    parser, placements = _page_labels(client, tide, steps)
    expected = [f"Response {n}" for n in range(1, len(placements) + 1)]
    assert [_squeeze(h) for h in parser.headings] == expected
    assert [_squeeze(parser.labels[f"id-rank-{pid}"]) for pid in placements] == expected


def test_the_pairwise_reason_is_marked_optional_once(client, pairwise, steps):
    """The page marks an optional question itself; the fixture's prompt once said "(optional)" too."""
    parser, _ = _page_labels(client, pairwise, steps)
    assert _squeeze(parser.labels["id-text-reason"]) == "Why? (optional)"
