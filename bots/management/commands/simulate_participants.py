"""Fill a study with simulated participants (a realistic mix of personas).

    python manage.py simulate_participants --study tide --n 150 [--seed S]

Tops the study up to N non-preview participants, so running it twice adds
nobody. The bots answer through the same forms and services as the views
(not over HTTP, to stay fast), with a simulated clock so each session takes
a realistic time, spread over the last few days.
"""

from __future__ import annotations

import random
import time
from collections import Counter
from datetime import timedelta

from django.core.management.base import BaseCommand, CommandError
from django.db import transaction
from django.utils import timezone

from bots.drive import run_with_services
from bots.personas import persona_mix
from bots.quality import quality_from_db
from surveys import services
from surveys.models import Participant, Study


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
        for persona in personas:
            start = now - timedelta(days=rng.uniform(0, days), hours=2)
            try:
                # One transaction per participant: a crash leaves no half-simulated person.
                with transaction.atomic():
                    run = run_with_services(
                        persona=persona, study=target, seed=rng.getrandbits(62), start=start, quality=quality
                    )
            except services.StudyFull:
                self.stdout.write(self.style.WARNING("the study reached its target; stopping"))
                break
            outcomes[f"{persona.name}:{run.outcome}"] += 1
        summary = ", ".join(f"{key} {count}" for key, count in sorted(outcomes.items())) or "nothing to add"
        self.stdout.write(self.style.SUCCESS(
            f"{target.slug}: {sum(outcomes.values())} simulated participants added "
            f"({existing} already there) in {time.monotonic() - started:.1f} s: {summary}"
        ))
