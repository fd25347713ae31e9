"""Scripted participants that drive the real survey (oTree-bot style).

Personas decide what to answer; drivers carry those answers to the server:

- ``run_in_process(persona=..., study=...)`` goes through the real views with
  Django's test ``Client``, under a simulated clock, so a session lasts a
  realistic 10-75 minutes in a fraction of a second;
- ``run_over_http(persona=..., base_url=..., slug=...)`` does the same against
  a running server with only the standard library (for load tests);
- ``run_with_services(persona=..., study=...)`` skips HTTP and templates but
  validates with the same forms and saves with the same services (to fill a
  demo study quickly).

Each returns a ``BotRun``: what the bot submitted and what the server
acknowledged, for reconciliation against the database afterwards.
"""

from __future__ import annotations

import hashlib
import http.client
import random
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from html.parser import HTMLParser
from http.cookies import SimpleCookie
from typing import Protocol
from urllib.parse import urlencode, urlsplit

from django.utils import timezone

from . import clock, selectors, services
from .definition import OUTSIDE_US, PREFER_NOT
from .models import Item, ItemPlacement, Study

# --- what a page asks ---------------------------------------------------------------


@dataclass
class PageSpec:
    """The questions of one page, however it was obtained (HTML or database)."""

    kind: str  # consent, instructions, block, check, demographics, done, exit, or "" (unknown)
    visit_id: int | None = None
    placements: list[int] = field(default_factory=list)
    dimensions: dict[str, list[int]] = field(default_factory=dict)
    ranking: bool = False
    best_worst: bool = False
    texts: dict[str, int] = field(default_factory=dict)  # field name -> max length
    statement: str = ""
    check_points: list[int] = field(default_factory=list)
    selects: dict[str, list[str]] = field(default_factory=dict)  # demographics: name -> choices
    completion_code: str = ""
    csrf_token: str = ""


class _PageParser(HTMLParser):
    """Collects the form controls, the CSRF token and a few data- markers of a page."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.kind = ""
        self.hidden: dict[str, str] = {}
        self.radios: dict[str, list[str]] = {}
        self.selects: dict[str, list[str]] = {}
        self.textareas: dict[str, int] = {}
        self.legends: list[str] = []
        self.code = ""
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
        elif tag == "select":
            self._select = a.get("name")
            self.selects[self._select] = []
        elif tag == "option" and self._select and a.get("value"):
            self.selects[self._select].append(a["value"])
        elif tag == "textarea":
            self.textareas[a["name"]] = int(a.get("maxlength") or 10000)
        elif tag == "legend":
            self._in_legend = True
            self.legends.append("")
        elif "data-completion-code" in a:
            self._in_code = True

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
    if parser.code:
        spec.kind, spec.completion_code = "done", parser.code
    if parser.hidden.get("visit"):
        spec.visit_id = int(parser.hidden["visit"])
    for name, values in parser.radios.items():
        match = re.match(r"^rate-(\d+)-(.+)$", name)
        if match:
            pid = int(match.group(1))
            if pid not in spec.placements:
                spec.placements.append(pid)
            spec.dimensions[match.group(2)] = [int(v) for v in values]
        elif name == "attention":
            spec.check_points = [int(v) for v in values]
            spec.statement = parser.legends[0].strip() if parser.legends else ""
        elif name == "most":
            spec.best_worst = True
            spec.placements = spec.placements or [int(v) for v in values]
    for name, values in parser.selects.items():
        match = re.match(r"^rank-(\d+)$", name)
        if match:
            spec.ranking = True
            if int(match.group(1)) not in spec.placements:
                spec.placements.append(int(match.group(1)))
        else:
            spec.selects[name] = values
    spec.texts = dict(parser.textareas)
    return spec


def page_spec_from_db(*, page: selectors.VisitPage, study: Study) -> PageSpec:
    """The same PageSpec straight from the selectors (the services driver)."""
    if page.is_check:
        return PageSpec(
            kind="check",
            visit_id=page.visit.pk,
            statement=page.visit.attention_check.text,
            check_points=page.dimensions[0].points,
        )
    return PageSpec(
        kind="block",
        visit_id=page.visit.pk,
        placements=[p.pk for p in page.placements],
        dimensions={d.key: d.points for d in page.dimensions},
        ranking=study.ranking_enabled,
        best_worst=study.best_worst_enabled,
        texts={f"text-{q.key}": q.max_length for q in page.free_text_questions},
    )


# --- personas -----------------------------------------------------------------------

Quality = Callable[[int], "float | None"]  # placement id -> expected rating (None = unknown)

REASONS = [
    "It acknowledged the feelings before giving advice.",
    "Some replies jumped straight to solutions.",
    "The warmer wording felt more supportive.",
    "I preferred replies that asked a gentle question.",
]


def _expected_value(statement: str, points: list[int]) -> int | None:
    match = re.search(r"select (\d+)", statement)
    return int(match.group(1)) if match and int(match.group(1)) in points else None


def _clip(value: float, points: list[int]) -> int:
    return int(min(max(round(value), points[0]), points[-1]))


class Persona:
    """An honest participant: ratings follow item quality plus noise, ranks follow ratings."""

    name = "honest"
    rating_noise = 0.7

    def block_seconds(self, rng: random.Random) -> float:
        return rng.uniform(20, 120)

    def check_seconds(self, rng: random.Random) -> float:
        return rng.uniform(6, 20)

    def exit_at(self, n_pages: int, rng: random.Random) -> int | None:
        """The page number (1-based) at which this persona leaves, or None."""
        return None

    def rating(self, quality: float | None, points: list[int], rng: random.Random) -> int:
        centre = quality if quality is not None else (points[0] + points[-1]) / 2
        return _clip(rng.gauss(centre, self.rating_noise), points)

    def answer_block(self, spec: PageSpec, quality: Quality, rng: random.Random) -> dict[str, str]:
        fields: dict[str, str] = {}
        score: dict[int, float] = {}
        for pid in spec.placements:
            values = []
            for key, points in spec.dimensions.items():
                value = self.rating(quality(pid), points, rng)
                fields[f"rate-{pid}-{key}"] = str(value)
                values.append(value)
            q = quality(pid)
            score[pid] = (sum(values) / len(values) if values else (q or 3)) + rng.uniform(0, 0.01)
        if spec.ranking:
            fields.update(self.ranks(spec.placements, score, rng))
        if spec.best_worst:
            best, worst = self.best_worst(spec.placements, score, rng)
            fields["most"], fields["least"] = str(best), str(worst)
        for name, max_length in spec.texts.items():
            fields[name] = rng.choice(REASONS)[:max_length]
        return fields

    def ranks(self, placements: list[int], score: dict[int, float], rng: random.Random) -> dict[str, str]:
        ordered = sorted(placements, key=lambda pid: -score[pid])
        return {f"rank-{pid}": str(i) for i, pid in enumerate(ordered, start=1)}

    def best_worst(self, placements: list[int], score: dict[int, float], rng: random.Random) -> tuple[int, int]:
        ordered = sorted(placements, key=lambda pid: -score[pid])
        return ordered[0], ordered[-1]

    def answer_check(self, spec: PageSpec, rng: random.Random) -> dict[str, str]:
        expected = _expected_value(spec.statement, spec.check_points)
        return {"attention": str(expected if expected is not None else rng.choice(spec.check_points))}

    def answer_demographics(self, spec: PageSpec, rng: random.Random) -> dict[str, str]:
        fields = {}
        for name, choices in spec.selects.items():
            fields[name] = _demographic_pick(name, choices, rng)
        for name, max_length in spec.texts.items():
            fields[name] = rng.choice(["", rng.choice(REASONS)])[:max_length]
        return fields


def _demographic_pick(name: str, choices: list[str], rng: random.Random) -> str:
    """Spread over every group, with a few skipped or declined answers."""
    roll = rng.random()
    if roll < 0.03:
        return ""
    if roll < 0.06 and PREFER_NOT in choices:
        return PREFER_NOT
    real = [c for c in choices if c not in (PREFER_NOT, OUTSIDE_US)]
    if name == "state" and OUTSIDE_US in choices and roll < 0.09:
        return OUTSIDE_US
    return rng.choice(real or choices)


class Speeder(Persona):
    name = "speeder"
    rating_noise = 1.2

    def block_seconds(self, rng: random.Random) -> float:
        return rng.uniform(3, 8)

    def check_seconds(self, rng: random.Random) -> float:
        return rng.uniform(2, 4)


class StraightLiner(Persona):
    name = "straight_liner"

    def block_seconds(self, rng: random.Random) -> float:
        return rng.uniform(15, 40)

    def rating(self, quality, points, rng) -> int:
        middle = (points[0] + points[-1]) // 2
        return 3 if 3 in points else middle

    def ranks(self, placements, score, rng) -> dict[str, str]:
        return {f"rank-{pid}": str(i) for i, pid in enumerate(placements, start=1)}


class AttentionFailer(Persona):
    name = "attention_failer"

    def answer_check(self, spec: PageSpec, rng: random.Random) -> dict[str, str]:
        expected = _expected_value(spec.statement, spec.check_points)
        wrong = [p for p in spec.check_points if p != expected]
        return {"attention": str(rng.choice(wrong))}


class EarlyExit(Persona):
    name = "early_exit"

    def exit_at(self, n_pages: int, rng: random.Random) -> int | None:
        return max(2, n_pages // 2)


class RandomClicker(Persona):
    name = "random"

    def block_seconds(self, rng: random.Random) -> float:
        return rng.uniform(8, 60)

    def rating(self, quality, points, rng) -> int:
        return rng.choice(points)

    def ranks(self, placements, score, rng) -> dict[str, str]:
        shuffled = list(placements)
        rng.shuffle(shuffled)
        return {f"rank-{pid}": str(i) for i, pid in enumerate(shuffled, start=1)}

    def best_worst(self, placements, score, rng) -> tuple[int, int]:
        best, worst = rng.sample(placements, 2)
        return best, worst

    def answer_check(self, spec: PageSpec, rng: random.Random) -> dict[str, str]:
        return {"attention": str(rng.choice(spec.check_points))}


PERSONAS: dict[str, type[Persona]] = {
    cls.name: cls for cls in (Persona, Speeder, StraightLiner, AttentionFailer, EarlyExit, RandomClicker)
}

# The demo mix: mostly honest, some of every other kind.
DEFAULT_MIX = {"honest": 0.70, "speeder": 0.06, "straight_liner": 0.06, "attention_failer": 0.06,
               "early_exit": 0.06, "random": 0.06}


def persona_named(name: str) -> Persona:
    return PERSONAS[name]()


def persona_mix(n: int, rng: random.Random, mix: dict[str, float] = DEFAULT_MIX) -> list[Persona]:
    """n personas in the given proportions (at least one of each named kind when n allows)."""
    counts = {name: max(1, round(share * n)) if n >= len(mix) else 0 for name, share in mix.items()}
    counts["honest"] += n - sum(counts.values())
    names = [name for name, count in counts.items() for _ in range(count)]
    names += ["honest"] * (n - len(names))
    rng.shuffle(names)
    return [persona_named(name) for name in names[:n]]


# --- item quality: what an honest participant would tend to answer -------------------------

CONDITION_QUALITY = {"reference": 4.2, "fine-tuned": 3.6, "zero-shot": 2.9, "human": 4.0}


def item_quality(item: Item, gold: float | None = None) -> float:
    """A stable expected rating per item: the gold score if any, else by condition."""
    if gold is not None:
        return gold
    base = CONDITION_QUALITY.get(item.condition.name, 3.2)
    jitter = int(hashlib.sha256(item.key.encode()).hexdigest()[:4], 16) / 0xFFFF - 0.5
    return base + jitter


def quality_from_db(study: Study) -> Quality:
    """placement id -> item quality, for bots that may look behind the page (tests, demo)."""
    items = {i.pk: i for i in Item.objects.filter(study=study).select_related("condition")}
    gold = _gold_scores(study)
    cache: dict[int, float] = {}

    def quality(pid: int) -> float | None:
        if pid not in cache:
            # One query per page: every placement of the visit that holds this one.
            for other, item_id in ItemPlacement.objects.filter(visit__placements__pk=pid).values_list("pk", "item_id"):
                cache[other] = item_quality(items[item_id], gold.get(item_id)) if item_id in items else None
        return cache.get(pid)

    return quality


def _gold_scores(study: Study) -> dict[int, float]:
    try:
        from analysis.models import GoldScore
    except ImportError:  # pragma: no cover - the analysis app is always installed here
        return {}
    return dict(GoldScore.objects.filter(item__study=study).values_list("item_id", "score"))


# --- results ------------------------------------------------------------------------


@dataclass
class Submission:
    kind: str
    visit_id: int | None
    fields: dict[str, str]
    seconds: float


@dataclass
class Ack:
    kind: str
    visit_id: int | None
    status: int
    location: str


@dataclass
class BotRun:
    persona: str
    external_id: str
    outcome: str = "stuck"  # completed, exited, refused, stuck
    completion_code: str = ""
    submitted: list[Submission] = field(default_factory=list)
    acknowledged: list[Ack] = field(default_factory=list)
    simulated_seconds: float = 0.0

    @property
    def answers_by_visit(self) -> dict[int, dict[str, str]]:
        return {s.visit_id: s.fields for s in self.submitted if s.visit_id is not None}


class SimulatedClock:
    def __init__(self, start: datetime):
        self.current = start

    def now(self) -> datetime:
        return self.current

    def advance(self, seconds: float) -> None:
        self.current += timedelta(seconds=seconds)


# --- transports ------------------------------------------------------------------------


@dataclass
class RawResponse:
    status: int
    location: str
    text: str


class Transport(Protocol):
    def request(self, method: str, path: str, data: dict[str, str] | None = None) -> RawResponse: ...


class ClientTransport:
    """Django's test Client: the real URLs, middleware, views and templates, in-process."""

    def __init__(self, client=None):
        from django.test import Client

        self.client = client or Client()

    def request(self, method: str, path: str, data: dict[str, str] | None = None) -> RawResponse:
        if method == "POST":
            response = self.client.post(path, data or {})
        else:
            response = self.client.get(path)
        text = response.content.decode() if not response.streaming else ""
        return RawResponse(response.status_code, response.get("Location", ""), text)


class HttpTransport:
    """Standard-library HTTP with a cookie jar, for load tests against a running server."""

    def __init__(self, base_url: str, timeout: float = 30):
        parts = urlsplit(base_url)
        self.host, self.port = parts.hostname, parts.port or (443 if parts.scheme == "https" else 80)
        self.https = parts.scheme == "https"
        self.timeout = timeout
        self.cookies: dict[str, str] = {}

    def request(self, method: str, path: str, data: dict[str, str] | None = None) -> RawResponse:
        cls = http.client.HTTPSConnection if self.https else http.client.HTTPConnection
        connection = cls(self.host, self.port, timeout=self.timeout)
        headers = {"Cookie": "; ".join(f"{k}={v}" for k, v in self.cookies.items())}
        body = None
        if method == "POST":
            body = urlencode(data or {})
            headers["Content-Type"] = "application/x-www-form-urlencoded"
        try:
            connection.request(method, path, body=body, headers=headers)
            response = connection.getresponse()
            text = response.read().decode("utf-8", "replace")
            for header in response.headers.get_all("Set-Cookie") or []:
                for name, morsel in SimpleCookie(header).items():
                    self.cookies[name] = morsel.value
            return RawResponse(response.status, response.getheader("Location", ""), text)
        finally:
            connection.close()


# --- the driver --------------------------------------------------------------------------

MAX_REQUESTS = 400


def _path_of(location: str) -> str:
    parts = urlsplit(location)
    return parts.path + (f"?{parts.query}" if parts.query else "")


class _Browser:
    """Follows redirects like a browser and remembers where it is."""

    def __init__(self, transport: Transport):
        self.transport = transport
        self.path = "/"
        self.requests = 0

    def go(self, method: str, path: str, data: dict[str, str] | None = None) -> tuple[RawResponse, RawResponse]:
        """(first response, final response after redirects)."""
        first = response = self._send(method, path, data)
        self.path = path
        while response.status in (301, 302, 303, 307, 308) and response.location:
            self.path = _path_of(response.location)
            response = self._send("GET", self.path)
        return first, response

    def _send(self, method, path, data=None) -> RawResponse:
        self.requests += 1
        if self.requests > MAX_REQUESTS:
            raise RuntimeError("bot made too many requests; the flow is looping")
        return self.transport.request(method, path, data)


def drive(
    transport: Transport,
    *,
    persona: Persona,
    slug: str,
    external_id: str,
    rng: random.Random,
    quality: Quality = lambda pid: None,
    advance: Callable[[float], None] = lambda seconds: None,
    id_param: str = "PROLIFIC_PID",
) -> BotRun:
    """Run one persona from the panel link to the completion code (or its exit)."""
    run = BotRun(persona=persona.name, external_id=external_id)
    browser = _Browser(transport)
    query = urlencode({id_param: external_id, "STUDY_ID": "bot-study", "SESSION_ID": secrets.token_hex(8)})
    _, response = browser.go("GET", f"/s/{slug}/?{query}")
    pages_done, exit_at = 0, None
    while True:
        spec = page_spec_from_html(response.text)
        if spec.kind == "done":
            run.outcome, run.completion_code = "completed", spec.completion_code
            return run
        if spec.kind not in {"consent", "instructions", "block", "check", "demographics"}:
            run.outcome = "exited" if "/left/" in browser.path else "refused" if "/notice/" in browser.path else "stuck"
            return run
        if spec.kind in {"block", "check"}:
            if exit_at is None:
                exit_at = persona.exit_at(_pages_total(response.text), rng) or 0
            if exit_at and pages_done + 1 >= exit_at:
                _, response = browser.go("GET", f"/s/{slug}/exit/")
                exit_spec = page_spec_from_html(response.text)
                _, response = browser.go("POST", f"/s/{slug}/exit/", {"csrfmiddlewaretoken": exit_spec.csrf_token})
                continue
        fields, seconds = _answer(spec, persona, quality, rng)
        advance(seconds)
        run.simulated_seconds += seconds
        run.submitted.append(Submission(spec.kind, spec.visit_id, fields, seconds))
        data = {"csrfmiddlewaretoken": spec.csrf_token, **fields}
        if spec.visit_id is not None:
            data["visit"] = str(spec.visit_id)
        first, response = browser.go("POST", browser.path, data)
        run.acknowledged.append(Ack(spec.kind, spec.visit_id, first.status, first.location))
        if spec.kind in {"block", "check"} and first.status == 303:
            pages_done += 1


def _pages_total(html: str) -> int:
    match = re.search(r'<progress[^>]*max="(\d+)"', html)
    return int(match.group(1)) if match else 0


def _answer(spec: PageSpec, persona: Persona, quality: Quality, rng: random.Random) -> tuple[dict[str, str], float]:
    if spec.kind == "consent":
        return {"decision": "accept"}, rng.uniform(15, 60)
    if spec.kind == "instructions":
        return {}, rng.uniform(20, 90)
    if spec.kind == "block":
        return persona.answer_block(spec, quality, rng), persona.block_seconds(rng)
    if spec.kind == "check":
        return persona.answer_check(spec, rng), persona.check_seconds(rng)
    return persona.answer_demographics(spec, rng), rng.uniform(30, 90)


def new_external_id(rng: random.Random) -> str:
    return "%024x" % rng.getrandbits(96)


def run_in_process(
    *,
    persona: Persona,
    study: Study,
    seed: int = 0,
    external_id: str | None = None,
    start: datetime | None = None,
    client=None,
    peek_quality: bool = True,
) -> BotRun:
    """Drive the real views with the test Client under a simulated clock."""
    rng = random.Random(seed)
    sim = SimulatedClock(start or timezone.now())
    quality = quality_from_db(study) if peek_quality else (lambda pid: None)
    with clock.clock_set_to(sim.now):
        return drive(
            ClientTransport(client),
            persona=persona,
            slug=study.slug,
            external_id=external_id or new_external_id(rng),
            rng=rng,
            quality=quality,
            advance=sim.advance,
            id_param=study.id_param,
        )


def run_over_http(
    *,
    persona: Persona,
    base_url: str,
    slug: str,
    seed: int = 0,
    external_id: str | None = None,
    quality: Quality = lambda pid: None,
    id_param: str = "PROLIFIC_PID",
) -> BotRun:
    """Drive a running server over HTTP (real time: the server's clock is its own)."""
    rng = random.Random(seed)
    return drive(
        HttpTransport(base_url),
        persona=persona,
        slug=slug,
        external_id=external_id or new_external_id(rng),
        rng=rng,
        quality=quality,
        id_param=id_param,
    )


def run_with_services(
    *, persona: Persona, study: Study, seed: int = 0, start: datetime | None = None, quality: Quality | None = None
) -> BotRun:
    """The same personas, validated by the page forms and saved by the services (no HTTP)."""
    from .forms import DemographicsForm, PageForm

    rng = random.Random(seed)
    run = BotRun(persona=persona.name, external_id=new_external_id(rng))
    sim = SimulatedClock(start or timezone.now())
    quality = quality or quality_from_db(study)
    with clock.clock_set_to(sim.now):
        sim.advance(rng.uniform(15, 60))
        participant = services.participant_enroll(study=study, external_id=run.external_id, seed=rng.getrandbits(62))
        sim.advance(rng.uniform(20, 90))
        services.participant_instructions_confirm(participant_id=participant.pk)
        pages = selectors.participant_pages(participant=participant)
        exit_at = persona.exit_at(len(pages), rng) or 0
        for number, page in enumerate(pages, start=1):
            if exit_at and number >= exit_at:
                services.participant_exit(participant_id=participant.pk)
                run.outcome = "exited"
                return run
            spec = page_spec_from_db(page=page, study=study)
            services.visit_mark_shown(visit_id=spec.visit_id)
            fields, seconds = _answer(spec, persona, quality, rng)
            sim.advance(seconds)
            run.simulated_seconds += seconds
            form = PageForm(fields, page=page, ranking=study.ranking_enabled, best_worst=study.best_worst_enabled)
            if not form.is_valid():
                raise ValueError(f"{persona.name} bot gave invalid answers: {form.errors.as_json()}")
            outcome = services.block_answer_submit(
                participant_id=participant.pk, visit_id=spec.visit_id, answers=form.page_answers()
            )
            run.submitted.append(Submission(spec.kind, spec.visit_id, fields, seconds))
            run.acknowledged.append(Ack(spec.kind, spec.visit_id, 303 if outcome == "saved" else 409, ""))
        questions = selectors.demographic_questions(study=study)
        end_questions = selectors.end_of_study_questions(study=study)
        from .forms import demographic_choices

        spec = PageSpec(
            kind="demographics",
            selects={q.key: [v for v, _ in demographic_choices(q)] for q in questions},
            texts={f"text-{q.key}": q.max_length for q in end_questions},
        )
        fields = persona.answer_demographics(spec, rng)
        sim.advance(rng.uniform(30, 90))
        form = DemographicsForm(fields, questions=questions, end_questions=end_questions)
        form.is_valid()
        services.participant_demographics_submit(
            participant_id=participant.pk, answers=form.answers(), free_text=form.free_text()
        )
        done = services.participant_complete(participant_id=participant.pk)
    run.outcome, run.completion_code = "completed", done.completion_code
    return run
