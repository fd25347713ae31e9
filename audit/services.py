"""Writes to the audit trail: only ``audit_event_record`` (rows are never changed afterwards)."""

from __future__ import annotations

import ipaddress
from typing import Any

from .models import IDENTIFIER_ACTIONS, AuditEvent


def _valid_address(address: str | None) -> str | None:
    # REMOTE_ADDR is set by the server, but a test client or a unix socket may give none or a name.
    try:
        return str(ipaddress.ip_address(address)) if address else None
    except ValueError:
        return None


def audit_event_record(*, actor: Any, study: Any, action: str, object: str = "", detail: str = "",
                       address: str | None = None, identifiers: bool = False) -> AuditEvent:
    """Append one row. ``actor``: a user or None (the system); ``study``: a Study or None."""
    username = actor.get_username() if actor is not None and getattr(actor, "is_authenticated", False) else ""
    return AuditEvent.objects.create(
        actor=username[:150], actor_id=actor.pk if username else None, address=_valid_address(address),
        study_slug=getattr(study, "slug", "") or "", study_id=getattr(study, "pk", None),
        action=action[:64], object=str(object)[:255], detail=str(detail),
        identifiers=identifiers or action in IDENTIFIER_ACTIONS or str(object) == "identifiers.csv",
    )
