"""What each member of a study's team may do: the one place every researcher page, CSV, zip and
API view asks (``require``).

Roles: owner (``Study.owners``), and the invited roles of ``StudyMembership``: analyst,
viewer, rater coordinator. Staff may do everything, as before teams existed.

Someone outside the team gets 404 (never 403), so a study's existence is not revealed;
a member whose role lacks the capability gets 403 (they know the study exists). Every
403, and every refused attempt at the identifiers, is announced to the audit trail.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.core.exceptions import PermissionDenied
from django.db.models import Exists, OuterRef, Q, QuerySet, Subquery
from django.http import Http404

from web.signals import announce_action

from .models import Study, StudyMembership

OWNER = "owner"
STAFF = "staff"


class Capability(StrEnum):
    VIEW = "view"                # dashboard, run status, results page and its tables and figures, metrics page
    EXPORT = "export"            # pseudonymous exports, the zip, coverage.csv, free text, the API
    RUN = "run"                  # start analysis and metrics runs, score a text
    IDENTIFIERS = "identifiers"  # identifiers.csv (panel ids)
    PAY = "pay"                  # Prolific: create, publish, approve, reject, bonuses
    MANAGE = "manage"            # launch, preview, import, delete, team, audit trail
    RATERS = "raters"            # the invited-raters page: create and revoke links


_ANALYST = frozenset({Capability.VIEW, Capability.EXPORT, Capability.RUN})
CAPABILITIES: dict[str, frozenset[Capability]] = {
    OWNER: frozenset(Capability),
    STAFF: frozenset(Capability),
    StudyMembership.Role.ANALYST: _ANALYST,
    StudyMembership.Role.VIEWER: frozenset({Capability.VIEW}),
    StudyMembership.Role.RATER_COORDINATOR: frozenset({Capability.RATERS}),
}


def role_of(user: AbstractBaseUser | AnonymousUser, study: Study) -> str | None:
    """The user's role in the study: "staff", "owner", an invited role, or None (outside the team)."""
    if not user.is_authenticated:
        return None
    if user.is_staff:
        return STAFF
    if hasattr(study, "_viewer_is_owner"):  # read with the study (``_study_with_role``): no query more
        return OWNER if study._viewer_is_owner else study._viewer_role
    if study.owners.filter(pk=user.pk).exists():
        return OWNER
    return StudyMembership.objects.filter(study=study, user=user).values_list("role", flat=True).first()


def _study_with_role(slug: str, user: AbstractBaseUser | AnonymousUser) -> Study | None:
    """The study and the user's place in its team, in one query (every researcher request makes it)."""
    studies = Study.objects.filter(slug=slug)
    if user.is_authenticated and not user.is_staff:
        studies = studies.annotate(
            _viewer_is_owner=Exists(Study.owners.through.objects.filter(study_id=OuterRef("pk"), user_id=user.pk)),
            _viewer_role=Subquery(StudyMembership.objects.filter(study_id=OuterRef("pk"), user_id=user.pk)
                                  .values("role")[:1]),
        )
    return studies.first()


def can(user: AbstractBaseUser | AnonymousUser, study: Study, capability: Capability) -> bool:
    role = role_of(user, study)
    return role is not None and capability in CAPABILITIES[role]


def capabilities_of(user: AbstractBaseUser | AnonymousUser, study: Study) -> frozenset[Capability]:
    """For templates: which links to show (the views check again with ``require``)."""
    role = role_of(user, study)
    return CAPABILITIES[role] if role else frozenset()


def studies_visible_to(user: AbstractBaseUser | AnonymousUser,
                       capability: Capability | None = None) -> QuerySet[Study]:
    """The studies the user is in the team of (with ``capability``: whose role has it)."""
    if not user.is_authenticated:
        return Study.objects.none()
    if user.is_staff:
        return Study.objects.all()
    roles = [role for role, caps in CAPABILITIES.items() if role not in (OWNER, STAFF)
             and (capability is None or capability in caps)]
    return Study.objects.filter(Q(owners=user) | Q(memberships__user=user, memberships__role__in=roles)).distinct()


def require(user: AbstractBaseUser | AnonymousUser, study: Study | str, capability: Capability, *,
            request: Any = None) -> Study:
    """The study (given or by slug) if ``user`` may do ``capability`` in it; else Http404 for someone
    outside the team, PermissionDenied (403) for a member whose role lacks it."""
    if isinstance(study, str):
        found = _study_with_role(study, user)
        if found is None:
            raise Http404("No such study")
        study = found
    role = role_of(user, study)
    if role is not None and capability in CAPABILITIES[role]:
        return study
    if role is not None or capability == Capability.IDENTIFIERS:
        # Who tried what is the point of the trail: an outsider guessing the identifiers URL too.
        announce_action(actor=user if user.is_authenticated else None, study=study, action="access.denied",
                        object=capability.value, detail=_denied_detail(request, role), request=request)
    if role is None:
        raise Http404("No such study")
    raise PermissionDenied(f"Your role in this study ({role.replace('_', ' ')}) does not allow this.")


def _denied_detail(request: Any, role: str | None) -> str:
    path = getattr(request, "path", "") if request is not None else ""
    return f"role={role or 'none'} {path}".strip()
