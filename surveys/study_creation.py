"""Creating a new study from a definition built out of model outputs (``manage.py new_study``, the New study page).

A new study starts as a draft (``study_load(as_draft=True)``): the researcher previews it and launches it when ready
(``surveys.launch.study_launch``).
It is never written over an existing study: updating a study is ``load_study``'s job, with its locks.
"""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction

from .definition import StudyDefinition
from .loader import study_load
from .models import Study


class StudyExists(Exception):
    """A study with this slug exists already."""


@transaction.atomic
def study_create_draft(*, definition: StudyDefinition, owner: AbstractBaseUser | None = None) -> Study:
    """The new study of ``definition``, closed to participants, owned by ``owner``; StudyExists if the slug is taken."""
    if Study.objects.filter(slug=definition.slug).exists():
        raise StudyExists(f'a study with the slug "{definition.slug}" exists already; choose another slug '
                          "(or update that study with manage.py load_study)")
    try:
        with transaction.atomic():
            study = study_load(definition=definition, as_draft=True, actor=owner, via="new study").study
    except IntegrityError:  # another request created the same slug in between
        raise StudyExists(f'a study with the slug "{definition.slug}" exists already; choose another slug') from None
    if owner is not None:
        study.owners.add(owner)
    return study
