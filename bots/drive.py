"""Drivers: carry a persona's answers to the server and record what it acknowledged.

- ``run_in_process(persona=..., study=...)`` goes through the real views with
  Django's test ``Client``, under a simulated clock, so a session lasts a
  realistic 10-75 minutes in a fraction of a second; it enters by the study's
  own recruitment channel (panel link, open link or a new invited rater's
  link: ``bots.channels``);
- ``run_over_http(persona=..., base_url=..., slug=...)`` does the same against
  a running server with only the standard library (for load tests);
- ``run_with_services(persona=..., study=...)`` skips HTTP and templates but
  validates with the same forms and saves with the same services (to fill a
  demo study quickly).

Each returns a ``BotRun``: what the bot submitted and what the server
acknowledged, for reconciliation against the database afterwards.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.utils import timezone

from surveys import selectors, services
from surveys.demographics import offered_answers
from surveys.forms import DemographicsForm, PageForm
from surveys.models import Study
from web import clock

from . import selectors as bot_selectors
from .channels import entry_for, open_link_id, panel_entry
from .pages import PageSpec, page_spec_from_db, page_spec_from_html
from .personas import Persona, Quality
from .quality import quality_from_db
from .transports import Browser, ClientTransport, HttpTransport, Transport

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


class SimulatedClock:
    def __init__(self, start: datetime):
        self.current = start

    def now(self) -> datetime:
        return self.current

    def advance(self, seconds: float) -> None:
        self.current += timedelta(seconds=seconds)


# --- the driver --------------------------------------------------------------------------


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
    entry: str | None = None,
) -> BotRun:
    """Run one persona from its entry link (the panel's, by default) to the completion code (or its exit)."""
    run = BotRun(persona=persona.name, external_id=external_id)
    browser = Browser(transport)
    entry = entry or panel_entry(slug=slug, id_param=id_param, external_id=external_id).path
    _, response = browser.go("GET", entry)
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
    address: str | None = None,
) -> BotRun:
    """Drive the real views with the test Client under a simulated clock, entering by the study's channel.

    ``address`` is the bot's IP address (an open link limits new starts per address)."""
    rng = random.Random(seed)
    sim = SimulatedClock(start or timezone.now())
    quality = quality_from_db(study) if peek_quality else (lambda pid: None)
    transport = ClientTransport(client, address=address)
    with clock.clock_set_to(sim.now):
        link = entry_for(study, external_id=external_id or new_external_id(rng))
        run = drive(
            transport,
            persona=persona,
            slug=study.slug,
            external_id=link.external_id,
            rng=rng,
            quality=quality,
            advance=sim.advance,
            entry=link.path,
        )
    if not run.external_id:  # an open link: the server drew the id and gave it to this browser
        cookies = {name: morsel.value for name, morsel in transport.client.cookies.items()}
        run.external_id = open_link_id(cookies, study)
    return run


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
    rng = random.Random(seed)
    run = BotRun(persona=persona.name, external_id=new_external_id(rng))
    sim = SimulatedClock(start or timezone.now())
    quality = quality or quality_from_db(study)
    with clock.clock_set_to(sim.now):
        sim.advance(rng.uniform(15, 60))
        participant = services.participant_enroll(study=study, external_id=run.external_id, seed=rng.getrandbits(62))
        sim.advance(rng.uniform(20, 90))
        services.participant_instructions_confirm(participant_id=participant.pk)
        pages = bot_selectors.participant_pages(participant=participant)
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
            form = PageForm(fields, page=page)
            if not form.is_valid():
                raise ValueError(f"{persona.name} bot gave invalid answers: {form.errors.as_json()}")
            outcome = services.block_answer_submit(
                participant_id=participant.pk, visit_id=spec.visit_id, answers=form.page_answers()
            )
            run.submitted.append(Submission(spec.kind, spec.visit_id, fields, seconds))
            run.acknowledged.append(Ack(spec.kind, spec.visit_id, 303 if outcome == "saved" else 409, ""))
        questions = selectors.demographic_questions(study=study)
        end_questions = selectors.end_of_study_questions(study=study)
        spec = PageSpec(
            kind="demographics",
            selects={q.key: [v for v, _ in offered_answers(q)] for q in questions if offered_answers(q)},
            numbers={q.key: (q.min_value, q.max_value, q.integer) for q in questions if q.kind == q.Kind.NUMBER},
            texts={f"text-{q.key}": q.max_length for q in end_questions}
            | {q.key: q.max_length for q in questions if q.kind == q.Kind.TEXT},
            required={f"text-{q.key}" for q in end_questions if q.required},
        )
        fields = persona.answer_demographics(spec, rng)
        sim.advance(rng.uniform(30, 90))
        form = DemographicsForm(fields, questions=questions, end_questions=end_questions)
        if not form.is_valid():
            raise ValueError(f"{persona.name} bot gave invalid final answers: {form.errors.as_json()}")
        services.participant_demographics_submit(
            participant_id=participant.pk, answers=form.answers(), free_text=form.free_text()
        )
        done = services.participant_complete(participant_id=participant.pk)
    run.outcome, run.completion_code = "completed", done.completion_code
    return run
