"""Fill a study with simulated participants (a realistic mix of personas).

    python manage.py simulate_participants --study tide --n 150 [--seed S]

Tops the study up to N non-preview participants, so running it twice adds
nobody. Each bot comes in by the study's recruitment channel, with a simulated
clock so each session takes a realistic time, spread over the last few days:

- a panel study: the bots answer through the same forms and services as the
  views, with Prolific-style ids (not through the pages, to stay fast at 150);
- an open link: each bot opens ``/s/<slug>/`` from its own address (in
  198.18.0.0/15, the range reserved for benchmarks) and goes through the pages;
- invited raters: each bot gets its own personal link ("Simulated rater N",
  listed on the study's Invited raters page) and goes through the pages.
"""

from __future__ import annotations

import ipaddress
import random
import time
from collections import Counter
from datetime import timedelta

from django.core.management.base import BaseCommand, CommandError
from django.db import transaction
from django.utils import timezone

from bots.drive import BotRun, run_in_process, run_with_services
from bots.personas import Persona, persona_mix
from bots.quality import Quality, quality_from_db
from surveys import services
from surveys.models import Participant, Study

# Addresses of the simulated visitors of an open link (RFC 2544's benchmarking range).
BOT_ADDRESSES = ipaddress.ip_network("198.18.0.0/15")


class Command(BaseCommand):
    help = "Top a study up to N simulated participants (mostly honest, some of every other persona)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--study", required=True, help="study slug")
        parser.add_argument("--n", type=int, default=150, help="number of participants wanted in total")
        parser.add_argument("--seed", type=int, default=None, help="seed for a reproducible mix")
        parser.add_argument("--days", type=float, default=5, help="spread start times over this many past days")

    def handle(self, *args, study: str, n: int, seed: int | None, days: float, **options) -> None:
        target = Study.objects.filter(slug=study).first()
        if target is None:
            raise CommandError(f'no study "{study}"; load it first with load_study')
        existing = Participant.objects.filter(study=target, is_preview=False).count()
        missing = max(0, n - existing)
        rng = random.Random(seed if seed is not None else random.randrange(2**32))
        personas = persona_mix(missing, rng)
        quality = quality_from_db(target)
        now, started = timezone.now(), time.monotonic()
        outcomes: Counter[str] = Counter()
        for number, persona in enumerate(personas, start=existing):
            start = now - timedelta(days=rng.uniform(0, days), hours=2)
            try:
                # One transaction per participant: a crash leaves no half-simulated person.
                with transaction.atomic():
                    run = _simulate_one(target, persona, seed=rng.getrandbits(62), start=start,
                                        quality=quality, number=number)
            except services.StudyFull:
                run = BotRun(persona=persona.name, external_id="", outcome="refused")
            if run.outcome == "refused":
                self.stdout.write(self.style.WARNING("the study reached its target; stopping"))
                break
            outcomes[f"{persona.name}:{run.outcome}"] += 1
        summary = ", ".join(f"{key} {count}" for key, count in sorted(outcomes.items())) or "nothing to add"
        self.stdout.write(self.style.SUCCESS(
            f"{target.slug}: {sum(outcomes.values())} simulated participants added "
            f"({existing} already there) in {time.monotonic() - started:.1f} s: {summary}"
        ))


def _simulate_one(study: Study, persona: Persona, *, seed: int, start, quality: Quality, number: int) -> BotRun:
    """One bot, entering by the study's recruitment channel."""
    if study.recruitment_mode == Study.RecruitmentMode.PANEL:
        return run_with_services(persona=persona, study=study, seed=seed, start=start, quality=quality)
    address = str(BOT_ADDRESSES[number % BOT_ADDRESSES.num_addresses])
    return run_in_process(persona=persona, study=study, seed=seed, start=start, address=address)
