"""How a bot comes in: the entry link of its study's recruitment channel.

- a panel study: the panel's link carrying a Prolific-style id the bot makes up;
- an open link: ``/s/<slug>/``, where the server draws the id (read back from
  the cookie the browser was given);
- invited raters: a new personal link per bot, made by the same service as the
  researchers' Invited raters page.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from urllib.parse import urlencode

from django.http import HttpRequest
from django.urls import reverse

from surveys import open_links, rater_links
from surveys.models import RaterLink, Study

SIMULATED_RATER = "Simulated rater"


@dataclass(frozen=True)
class Entry:
    path: str
    external_id: str  # "" when the server draws it (open links)


def panel_entry(*, slug: str, id_param: str, external_id: str) -> Entry:
    query = urlencode({id_param: external_id, "STUDY_ID": "bot-study", "SESSION_ID": secrets.token_hex(8)})
    return Entry(f"{reverse('surveys:entry', args=[slug])}?{query}", external_id)


def entry_for(study: Study, *, external_id: str) -> Entry:
    """The link a new bot enters ``study`` by (an invited study gets a new rater link)."""
    if study.recruitment_mode == Study.RecruitmentMode.OPEN:
        return Entry(reverse("surveys:entry", args=[study.slug]), "")
    if study.recruitment_mode == Study.RecruitmentMode.INVITED:
        # Numbered after every link the study ever had, so a name is never taken twice.
        number = RaterLink.objects.filter(study=study).count() + 1
        new = rater_links.rater_links_create(study=study, names=[f"{SIMULATED_RATER} {number}"])[0]
        return Entry(rater_links.rater_link_path(study=study, token=new.token), new.link.external_id)
    return panel_entry(slug=study.slug, id_param=study.id_param, external_id=external_id)


def open_link_id(cookies: dict[str, str], study: Study) -> str:
    """The id the server gave the browser with these cookies on ``study``'s open link ("" if none)."""
    request = HttpRequest()
    request.COOKIES = cookies
    return open_links.returning_id(request, study) or ""
