"""A study's life before participants: it starts as a draft, its researchers preview it, then launch it.

A draft is closed to participants (``Study.launched_at`` empty, ``is_open`` False; the database refuses
an open draft). Launching opens it once; closing and reopening a launched study is ``is_open`` alone.
"""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from .models import Study


@transaction.atomic
def study_launch(*, study: Study) -> Study:
    """Open a draft study to participants. A study launched already is left as it is (closed stays closed)."""
    Study.objects.filter(pk=study.pk, launched_at__isnull=True).update(launched_at=timezone.now(), is_open=True)
    study.refresh_from_db(fields=["launched_at", "is_open"])
    return study
