"""Connect the trail to what it records: ``web.signals.researcher_action`` (every app's
actions) and Django's sign-in signals."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.signals import user_logged_in, user_login_failed
from django.dispatch import receiver

from web.signals import client_address, researcher_action

from .services import audit_event_record


@receiver(researcher_action, dispatch_uid="audit-researcher-action")
def record_action(sender: Any, *, actor: Any, study: Any, action: str, object: str = "", detail: str = "",
                  address: str | None = None, **kwargs: Any) -> None:
    audit_event_record(actor=actor, study=study, action=action, object=object, detail=detail, address=address)


@receiver(user_logged_in, dispatch_uid="audit-sign-in")
def record_sign_in(sender: Any, request: Any, user: Any, **kwargs: Any) -> None:
    audit_event_record(actor=user, study=None, action="account.sign_in", object=user.get_username(),
                       address=client_address(request))


@receiver(user_login_failed, dispatch_uid="audit-sign-in-failed")
def record_sign_in_failed(sender: Any, credentials: dict, request: Any = None, **kwargs: Any) -> None:
    # Django has already masked the password in ``credentials``; only the name tried is kept.
    tried = str(credentials.get("username", ""))[:150]
    audit_event_record(actor=None, study=None, action="account.sign_in_failed", object=tried,
                       address=client_address(request))
