"""A study's team: the owner invites existing accounts with a role, changes it or removes it.

Only an owner (or staff) changes roles: the service checks it itself, so no caller can
forget. Every change is announced to the audit trail ("team.role_set", "team.remove").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import PermissionDenied
from django.db import transaction

from web.signals import announce_action

from .models import Study, StudyMembership
from .permissions import OWNER, STAFF, role_of

#: The roles an owner can give, as the team page lists them.
ROLES = (OWNER, *StudyMembership.Role.values)


class TeamRefused(Exception):
    """A role change that cannot be made (unknown account or role, the last owner); nothing changed."""


@dataclass(frozen=True)
class TeamRow:
    username: str
    role: str


def team_of(*, study: Study) -> list[TeamRow]:
    owners = [TeamRow(user.get_username(), OWNER) for user in study.owners.order_by("username")]
    members = [TeamRow(m.user.get_username(), m.role)
               for m in StudyMembership.objects.filter(study=study).select_related("user").order_by("user__username")]
    return owners + members


def _check_owner(actor: AbstractBaseUser, study: Study) -> None:
    if role_of(actor, study) not in (OWNER, STAFF):
        raise PermissionDenied("Only an owner of the study changes its team.")


def _team_role(user: AbstractBaseUser, study: Study) -> str:
    """The role the team gives ``user`` (staff rights aside): owner, an invited role, or ""."""
    if study.owners.filter(pk=user.pk).exists():
        return OWNER
    return StudyMembership.objects.filter(study=study, user=user).values_list("role", flat=True).first() or ""


def _account(username: str) -> AbstractBaseUser:
    user = get_user_model().objects.filter(username=username.strip()).first()
    if user is None or not user.is_active:
        raise TeamRefused(f'No active account is called "{username.strip()[:150]}". Invite existing accounts only.')
    return user


@transaction.atomic
def team_role_set(*, study: Study, actor: AbstractBaseUser, username: str, role: str, request: Any = None) -> str:
    """Give ``username`` the ``role`` in ``study`` (invite, or change their role); returns the old role ("" if none)."""
    _check_owner(actor, study)
    if role not in ROLES:
        raise TeamRefused(f'Unknown role "{role[:40]}"; choose one of {", ".join(ROLES)}.')
    # Locked: two owners demoting each other at once must not leave the study without one.
    Study.objects.select_for_update().filter(pk=study.pk).first()
    user = _account(username)
    old = _team_role(user, study)
    if old == role:
        return old
    if old == OWNER and study.owners.count() == 1:
        raise TeamRefused("A study keeps at least one owner: make someone else owner first.")
    if role == OWNER:
        StudyMembership.objects.filter(study=study, user=user).delete()
        study.owners.add(user)
    else:
        study.owners.remove(user)
        StudyMembership.objects.update_or_create(study=study, user=user, defaults={"role": role})
    announce_action(actor=actor, study=study, action="team.role_set", object=user.get_username(),
                    detail=f"{old or 'none'} -> {role}", request=request)
    return old


@transaction.atomic
def team_remove(*, study: Study, actor: AbstractBaseUser, username: str, request: Any = None) -> None:
    """Take ``username`` off the team."""
    _check_owner(actor, study)
    Study.objects.select_for_update().filter(pk=study.pk).first()
    user = _account(username)
    is_owner = study.owners.filter(pk=user.pk).exists()
    if is_owner and study.owners.count() == 1:
        raise TeamRefused("A study keeps at least one owner: make someone else owner first.")
    deleted, _ = StudyMembership.objects.filter(study=study, user=user).delete()
    if not (deleted or is_owner):
        raise TeamRefused(f'"{user.get_username()}" is not in this study\'s team.')
    study.owners.remove(user)
    announce_action(actor=actor, study=study, action="team.remove", object=user.get_username(),
                    detail=f"{OWNER if is_owner else 'member'} removed", request=request)
