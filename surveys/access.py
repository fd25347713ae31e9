"""Who may see which study: owners see their own, staff see all, anyone else
gets 404 (never 403, so a study's existence is not revealed)."""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import QuerySet
from django.http import Http404

from .models import Study


def studies_visible_to(user: AbstractBaseUser | AnonymousUser) -> QuerySet[Study]:
    if not user.is_authenticated:
        return Study.objects.none()
    if user.is_staff:
        return Study.objects.all()
    return Study.objects.filter(owners=user)


def study_for_user(user: AbstractBaseUser | AnonymousUser, slug: str) -> Study:
    study = studies_visible_to(user).filter(slug=slug).first()
    if study is None:
        raise Http404("No such study")
    return study
