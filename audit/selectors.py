"""Reads of the audit trail: a study's rows, filtered; the CSV's rows."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator

from django.db.models import QuerySet

from analysis.exporting.exports import csv_cell

from .models import AuditEvent

#: The CSV's columns, in this order (manage.py audit, the page's CSV, the API's CSV).
CSV_COLUMNS = ("at", "actor", "address", "action", "object", "detail")


def audit_events_of(*, study_slug: str, action: str = "", actor: str = "", since: dt.date | None = None,
                    until: dt.date | None = None) -> QuerySet[AuditEvent]:
    """The study's rows, oldest first. ``action`` matches a whole name or a prefix ending in "." ("export.");
    ``since``/``until`` are whole UTC days, both included."""
    events = AuditEvent.objects.filter(study_slug=study_slug)
    if action:
        events = events.filter(action__startswith=action) if action.endswith(".") else events.filter(action=action)
    if actor:
        events = events.filter(actor=actor)
    if since:
        events = events.filter(at__date__gte=since)
    if until:
        events = events.filter(at__date__lte=until)
    return events.order_by("at", "id")


def audit_action_names(*, study_slug: str) -> list[str]:
    """Every action name in the study's trail (the filter's choices): any name a sender uses shows up."""
    return sorted(AuditEvent.objects.filter(study_slug=study_slug).values_list("action", flat=True).distinct())


def audit_csv_rows(events: QuerySet[AuditEvent]) -> Iterator[list[str]]:
    """Header, then one row per event; a touch of identifiers is flagged in ``detail``. Cells go through
    ``csv_cell``: a name typed at a failed sign-in ("=HYPERLINK(...)") must not run as a formula."""
    yield list(CSV_COLUMNS)
    for event in events.iterator(chunk_size=2000):
        detail = f"[identifiers] {event.detail}".rstrip() if event.identifiers else event.detail
        yield [csv_cell(value) for value in (event.at.isoformat(), event.actor, event.address or "", event.action,
                                             event.object, detail)]
