"""Invited raters: named personal links ("recruitment": {"mode": "invited"}).

A researcher creates one link per rater (the researchers' page, or
``manage.py rater_links``). The link is ``/s/<slug>/?invite=<token>`` with a
256-bit random token; only its SHA-256 is stored, so the URL is shown once, when
it is made, and a copy of the database does not give access. (A slow password
hash is not needed: nobody can guess 256 random bits, so there is no short
secret to protect against a brute-force search.) The token stands for the rater,
not the browser: the same link resumes them on any device, on any day. A
revoked link shows a page saying so, also to someone already in the middle of
the study. The rater's name is for the researchers' page only: answers and
exports carry the participant's pseudonym, as for anyone.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from dataclasses import dataclass
from datetime import datetime
from urllib.parse import urlencode

from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction
from django.db.models import Count, Q
from django.urls import reverse

from web import clock

from . import limits
from .models import Participant, RaterLink, Study

TOKEN_PARAM = "invite"
_TOKEN_BYTES = 32
_LONGEST_TOKEN = 100  # token_urlsafe(32) is 43 characters; anything much longer is not ours


class RaterLinksRefused(ValueError):
    """The names cannot get links (the message says why); nothing was created."""


@dataclass(frozen=True)
class NewLink:
    link: RaterLink
    token: str  # shown once, never stored

    def url(self, base_url: str) -> str:
        return base_url.rstrip("/") + rater_link_path(study=self.link.study, token=self.token)


@dataclass(frozen=True)
class RaterRow:
    """One line of the researchers' list of links."""

    link: RaterLink
    status: str  # not started, in progress, completed, exited early, revoked
    pages_done: int
    pages_total: int
    last_seen_at: datetime | None


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def rater_link_path(*, study: Study, token: str) -> str:
    return reverse("surveys:entry", args=[study.slug]) + "?" + urlencode({TOKEN_PARAM: token})


def names_parse(text: str) -> list[str]:
    """Names separated by commas or new lines, in order; blank entries dropped."""
    return [name.strip() for name in re.split(r"[,\n]", text or "") if name.strip()]


def _names_problem(study: Study, names: list[str]) -> str | None:
    if study.recruitment_mode != Study.RecruitmentMode.INVITED:
        return (f'study "{study.slug}" recruits with mode "{study.recruitment_mode}"; rater links are for studies '
                'whose definition says "recruitment": {"mode": "invited"}')
    if not names:
        return "give at least one name"
    if any("\0" in name for name in names):  # no text column can store one (PostgreSQL refuses it)
        return "a name holds a NUL character (\\0), which no name can contain; remove it"
    if too_long := [name for name in names if len(name) > limits.RATER_NAME]:
        return f"names are at most {limits.RATER_NAME} characters: {too_long[0][:40]}..."
    if twice := sorted({name for name in names if names.count(name) > 1}):
        return f"each name once: {', '.join(twice)} given twice"
    taken = sorted(RaterLink.objects.filter(study=study, name__in=names, revoked_at__isnull=True)
                   .values_list("name", flat=True))
    if taken:
        return f"{', '.join(taken)} already {'has a link' if len(taken) == 1 else 'have links'} (revoke it first)"
    return None


def rater_links_create(*, study: Study, names: list[str], created_by: AbstractBaseUser | None = None) -> list[NewLink]:
    """One new link per name, all or none. Raises ``RaterLinksRefused``."""
    if problem := _names_problem(study, names):
        raise RaterLinksRefused(problem)
    created = []
    try:
        with transaction.atomic():
            for name in names:
                token = secrets.token_urlsafe(_TOKEN_BYTES)
                link = RaterLink.objects.create(
                    study=study, name=name, token_hash=_digest(token),
                    external_id=f"rater-{secrets.token_hex(12)}", created_by=created_by,
                )
                created.append(NewLink(link=link, token=token))
    except IntegrityError:
        # Someone else gave one of these names a link meanwhile.
        raise RaterLinksRefused("one of these names got a link meanwhile; reload the list") from None
    return created


def rater_link_revoke(*, study: Study, link_id: int) -> bool:
    """Revoke the link (idempotent); False when the study has no such link."""
    if not RaterLink.objects.filter(study=study, pk=link_id).exists():
        return False
    RaterLink.objects.filter(study=study, pk=link_id, revoked_at__isnull=True).update(revoked_at=clock.now())
    return True


def rater_link_find(*, study: Study, token: str) -> RaterLink | None:
    """The link behind ``token`` (revoked ones included), or None."""
    if not token or len(token) > _LONGEST_TOKEN:
        return None
    return RaterLink.objects.filter(study=study, token_hash=_digest(token)).first()


def rater_link_is_active(*, link_id: int) -> bool:
    return RaterLink.objects.filter(pk=link_id, revoked_at__isnull=True).exists()


def rater_rows(*, study: Study) -> list[RaterRow]:
    """Every link of the study with where its rater is (two queries, whatever the number)."""
    links = list(RaterLink.objects.filter(study=study).order_by("created_at", "id"))
    participants = {
        p.external_id: p
        for p in Participant.objects.filter(study=study, external_id__in=[link.external_id for link in links])
        .annotate(pages_total=Count("visits"),
                  pages_done=Count("visits", filter=Q(visits__submitted_at__isnull=False)))
    }
    rows = []
    for link in links:
        participant = participants.get(link.external_id)
        status = ("revoked" if link.revoked_at else "not started" if participant is None
                  else participant.get_status_display().lower())
        rows.append(RaterRow(
            link=link, status=status,
            pages_done=participant.pages_done if participant else 0,
            pages_total=participant.pages_total if participant else 0,
            last_seen_at=participant.last_seen_at if participant else None,
        ))
    return rows
