"""Blinding: no participant page names a system, a condition or the researchers' title.

Every participant page of every fixture study (and of generated definitions) is
walked through the real views: entry, consent (and its error), instructions,
every block and attention check (and a refused block), the conflict page, the
exit pages, demographics, the final questions, the completion page, the
notices, the refusals of each recruitment mode, an expired session, a bad link,
the CSRF refusal, "not found" and the outage page. Each page's visible text and
every attribute (the <title> included) is searched for the names the study
definition gives its systems and conditions and for its researcher-facing
``title``; participants see only ``participant_title``.
"""

from __future__ import annotations

import html
import itertools
import re
from html.parser import HTMLParser

import pytest
from django.template.loader import render_to_string
from django.test import Client
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from surveys.definition import parse_definition
from surveys.loader import study_load
from surveys.models import FreeTextQuestion, Participant, Study
from tests.support.studies import load_fixture
from tests.test_generated_studies import definitions

EXAMPLES = itertools.count(1)
FIXTURES = ["tide.json", "counselor.json", "counselor_zh.json", "most_least.json", "pairwise.json"]


class _Shown(HTMLParser):
    """What a browser shows or exposes: text outside <script>/<style>, and every attribute value."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._hidden_depth = 0

    def handle_starttag(self, tag, attrs):
        if tag in ("script", "style"):
            self._hidden_depth += 1
        self.parts += [value for _, value in attrs if value]

    def handle_endtag(self, tag):
        if tag in ("script", "style"):
            self._hidden_depth -= 1

    def handle_data(self, data):
        if not self._hidden_depth:
            self.parts.append(data)


def shown_text(html: str) -> str:
    parser = _Shown()
    parser.feed(html)
    return "\n".join(parser.parts)


def leaked_names(html: str, names: list[str]) -> list[str]:
    """The names that appear as whole words (case-insensitive) in what the page shows."""
    text = shown_text(html)
    return [name for name in names
            if re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", text, flags=re.IGNORECASE)]


def hidden_names(study: Study) -> list[str]:
    """From the definition the study was loaded from: what the blocks must not reveal."""
    definition = study.definition
    return [*definition["systems"], *definition["conditions"], definition["title"]]


class PageCollector:
    """Walks one participant through every page of ``study`` and keeps each page's HTML by name."""

    def __init__(self, study: Study):
        self.study = study
        self.base = f"/s/{study.slug}"
        self.pages: dict[str, str] = {}

    def keep(self, name: str, response, status: int = 200) -> None:
        assert response.status_code == status, (name, response.status_code)
        self.pages[name] = response.content.decode()

    def link(self, external_id: str) -> str:
        return f"{self.base}/?{self.study.id_param}={external_id}&STUDY_ID=st1&SESSION_ID=se1"

    def walk(self, steps) -> dict[str, str]:
        client = Client()
        self.keep("consent", client.get(self.link("a" * 24), follow=True))
        self.keep("consent refused", client.post(f"{self.base}/consent/", {}), status=400)
        self.keep("instructions", client.post(f"{self.base}/consent/", {"decision": "accept"}, follow=True))
        client.post(f"{self.base}/instructions/")
        self.keep("exit", client.get(f"{self.base}/exit/"))
        number = 0
        while True:
            response, spec = steps.page(client, self.study)
            if spec.kind not in {"block", "check"}:
                break
            number += 1
            self.keep(f"{spec.kind} {number}", response)
            if number == 1:
                refused = client.post(f"{self.base}/page/", {"visit": spec.visit_id})
                self.keep("block refused", refused, status=400)
                self.keep("conflict", client.post(f"{self.base}/page/", {"visit": "999999999"}), status=409)
            answers = steps.answers(spec)
            if spec.kind == "check" and answers["attention"] is None:  # a statement in another language
                answers["attention"] = spec.check_points[0]
            client.post(f"{self.base}/page/", answers)
        self.keep("demographics and final questions", response)
        self.keep("done", client.post(f"{self.base}/about-you/", self._final_answers(), follow=True))
        self._leaving()
        self._refusals()
        return self.pages

    def _final_answers(self) -> dict[str, str]:
        return {f"text-{q.key}": "A reason." for q in FreeTextQuestion.objects.filter(study=self.study, per_block=False)}

    def _leaving(self) -> None:
        client = Client()
        client.get(self.link("b" * 24))
        client.post(f"{self.base}/consent/", {"decision": "accept"})
        self.keep("left", client.post(f"{self.base}/exit/", follow=True))
        client.get(self.link("c" * 24))
        self.keep("declined", client.post(f"{self.base}/consent/", {"decision": "decline"}, follow=True))
        for kind in ("full", "closed", "time-up"):
            self.keep(f"notice {kind}", client.get(f"{self.base}/notice/{kind}/"))

    def _refusals(self) -> None:
        client = Client()
        self.keep("session expired", client.get(f"{self.base}/consent/"))
        self.keep("bad link", client.get(f"{self.base}/?{self.study.id_param}=not-an-id"), status=400)
        self.keep("not found", client.get(f"{self.base}/notice/unknown/"), status=404)
        strict = Client(enforce_csrf_checks=True)
        strict.get(self.link("d" * 24))
        self.keep("csrf refused", strict.post(f"{self.base}/consent/", {"decision": "accept"}), status=403)
        # The outage and error pages (web.errors) are static: no study reaches them.
        for template in ("400.html", "500.html", "503.html"):
            self.pages[template] = render_to_string(template)
        studies = Study.objects.filter(pk=self.study.pk)
        studies.update(recruitment_mode=Study.RecruitmentMode.INVITED)
        self.keep("invitation only", Client().get(f"{self.base}/"), status=403)
        self.keep("rater link refused", Client().get(f"{self.base}/?invite=no-such-token"), status=404)
        studies.update(recruitment_mode=Study.RecruitmentMode.OPEN)
        self.keep("too many starts", Client().get(f"{self.base}/"), status=429)


def assert_blind(study: Study, steps) -> dict[str, str]:
    pages = PageCollector(study).walk(steps)
    names = hidden_names(study)
    leaks = {page: found for page, html in pages.items() if (found := leaked_names(html, names))}
    assert not leaks, leaks
    return pages


@pytest.fixture
def no_open_starts(settings, fresh_cache):
    """An open link refuses every new start, so its "try again later" page is reachable."""
    settings.OPEN_LINK_STARTS_PER_HOUR = 0


@pytest.mark.parametrize("fixture", FIXTURES)
def test_no_participant_page_of_a_fixture_study_names_a_system_condition_or_the_researcher_title(
    db, fixture, steps, no_open_starts
):
    study = load_fixture(fixture)
    if study.recruitment_mode != Study.RecruitmentMode.PANEL:
        # The walk enters by a panel link; the pages of invited and open studies' own channels (invitation
        # only, a refused rater link, too many starts) are walked by _refusals for every study.
        Study.objects.filter(pk=study.pk).update(recruitment_mode=Study.RecruitmentMode.PANEL,
                                                 id_param="PROLIFIC_PID", study_param="STUDY_ID",
                                                 session_param="SESSION_ID", id_pattern=r"^[0-9a-f]{24}$",
                                                 completion_code="BLIND1")
        study.refresh_from_db()
    pages = assert_blind(study, steps)
    assert Participant.objects.filter(study=study, status=Participant.Status.COMPLETED).count() == 1
    # Participants see their own title, in the header and in the browser's title.
    for name in ("instructions", "block 1", "done"):
        title = html.escape(study.participant_title)
        assert re.search(rf"<title>[^<]+ – {re.escape(title)}</title>", pages[name]), name
        assert f'<p class="study-title">{title}</p>' in pages[name], name


@pytest.mark.slow(reason="walks every fixture study through a panel link")
@pytest.mark.django_db
@settings(max_examples=4, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=definitions(), tag=st.integers(1, 10**6))
def test_no_participant_page_of_a_generated_study_names_a_system_condition_or_the_researcher_title(
    data, tag, steps, no_open_starts
):
    # Distinctive names, so a hit is a leak and not a common word ("to" as a condition name).
    number = next(EXAMPLES)
    renamed = {c: f"cond{tag}-{c}" for c in data["conditions"]}
    for block in data["blocks"]:
        for response in block["responses"]:
            response["condition"] = renamed[response["condition"]]
    data = {**data, "slug": f"generated-{number}", "title": f"Researcher title {tag}",
            "conditions": list(renamed.values()),
            "reference_conditions": [renamed[c] for c in data["reference_conditions"]]}
    if "comparison" in data:
        data["comparison"] = {k: renamed[v] for k, v in data["comparison"].items()}
    study = study_load(definition=parse_definition(data)).study
    pages = assert_blind(study, steps)
    # No participant title: no header line and nothing after the page's own title.
    assert 'class="study-title"' not in pages["block 1"]
    assert re.search(r"<title>[^<–]+</title>", pages["block 1"])


def test_the_check_finds_a_name_in_text_and_in_attributes_but_not_inside_words_or_scripts():
    names = ["base", "GPT-4o", "fine-tuned"]
    assert leaked_names("<p>the Base model</p>", names) == ["base"]
    assert leaked_names('<img alt="by gpt-4o">', names) == ["GPT-4o"]
    assert leaked_names("<title>x – fine-tuned</title>", names) == ["fine-tuned"]
    assert leaked_names("<p>database, basement, not-fine-tuned-at-all</p><script>base</script>", names) == []
