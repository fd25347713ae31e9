"""Signals that let other apps follow what researchers do without surveys
importing them: the audit trail (audit/) listens to `researcher_action`.

Send it through `announce_action`, never `researcher_action.send` directly, so
every sender passes the same keyword arguments."""

from __future__ import annotations

from typing import Any

from django.dispatch import Signal

# Keyword arguments: actor (a User, or None for the system: a scheduled task or a
# participant acting on their own data), study (a Study or None), action (a short
# dotted name such as "export.download" or "participant.delete"), object (what the
# action touched, as text: a file name, a pseudonym, a run id), detail (free text,
# never an identifier that the audit reader's role may not see), address (the
# client's IP address, or None outside a request).
researcher_action = Signal()


def client_address(request: Any) -> str | None:
    """The address an action came from: REMOTE_ADDR, which the deployment's proxy
    sets (X-Forwarded-For is not trusted, since any client can send it)."""
    return request.META.get("REMOTE_ADDR") if request is not None else None


def announce_action(*, actor: Any, study: Any, action: str, object: str = "", detail: str = "",
                    request: Any = None, address: str | None = None) -> None:
    """Tell the listeners that `actor` did `action` on `object` in `study`.
    With `request`, the address is read from it."""
    researcher_action.send(
        sender=announce_action, actor=actor, study=study, action=action, object=object,
        detail=detail, address=address if address is not None else client_address(request),
    )
