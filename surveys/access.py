"""Who may see which study. Kept for callers written before study teams: the rules live in
surveys/permissions.py (``require``), which every researcher view uses."""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser

from .models import Study
from .permissions import Capability, require, studies_visible_to

__all__ = ["studies_visible_to", "study_for_user"]


def study_for_user(user: AbstractBaseUser | AnonymousUser, slug: str) -> Study:
    """The study if the user may see its dashboard and results (404 outside its team, 403 for other roles)."""
    return require(user, slug, Capability.VIEW)
