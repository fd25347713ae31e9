"""Counters of attempts in a time window, for rate limits on the database (``web.ratelimit``)."""

from __future__ import annotations

from django.db import models
from django.db.models import Q


class RateCounter(models.Model):
    """Hits of one key (an address, an account, an API user) since its window started.

    Counted with one ``INSERT … ON CONFLICT DO UPDATE … RETURNING`` statement, so
    concurrent requests never read the same count (Django's database cache reads,
    then writes, and re-sets its own expiry).
    """

    key = models.CharField(max_length=200, primary_key=True)
    hits = models.IntegerField()
    # Seconds since the epoch (a number, so one SQL statement compares it alike on SQLite and PostgreSQL).
    window_ends_at = models.FloatField()

    class Meta:
        constraints = [models.CheckConstraint(condition=Q(hits__gte=0), name="rate_counter_hits_not_negative")]

    def __str__(self) -> str:
        return f"{self.key}: {self.hits}"
