"""Invited raters ("recruitment": {"mode": "invited"}): named personal links made on the
researchers' page or with ``manage.py rater_links``; each resumes its rater on any device,
can be revoked (a clear page, never a 500), and stores only a hash of its token."""

from __future__ import annotations

import hashlib
import html
import io
import re

import pytest
from django.core.management import CommandError, call_command
from django.test import Client

from surveys.models import Participant, RaterLink
from tests.support.researcher import finished_run
from tests.support.studies import load_fixture
from web.security import mask_identifiers

SLUG = "counselor"
ENTRY = f"/s/{SLUG}/"


@pytest.fixture
def invited(db, owner):
    study = load_fixture("counselor.json", recruitment={"mode": "invited"})
    study.owners.add(owner)
    return study


def _links(study, names: str) -> dict[str, str]:
    """name -> URL, printed by the command the way a researcher runs it."""
    out = io.StringIO()
    call_command("rater_links", "--study", study.slug, "--names", names, stdout=out, stderr=io.StringIO())
    return dict(line.split("\t") for line in out.getvalue().splitlines())


def _path(url: str) -> str:
    return url.removeprefix("http://127.0.0.1:8000")


# ---------------------------------------------------------------- the command and the service


def test_the_command_prints_one_unguessable_url_per_rater_and_stores_only_hashes(invited, settings):
    settings.SITE_URL = "https://survey.example.org"
    out, err = io.StringIO(), io.StringIO()
    call_command("rater_links", "--study", SLUG, "--names", " Ann, Bo ,Chen", stdout=out, stderr=err)
    lines = out.getvalue().splitlines()
    assert [line.split("\t")[0] for line in lines] == ["Ann", "Bo", "Chen"]
    tokens = []
    for line in lines:
        name, url = line.split("\t")
        match = re.fullmatch(r"https://survey\.example\.org/s/counselor/\?invite=([A-Za-z0-9_-]{43})", url)
        assert match, url
        tokens.append(match.group(1))
    assert len(set(tokens)) == 3 and "shown this once" in err.getvalue()
    stored = list(RaterLink.objects.order_by("id").values_list("name", "token_hash", "external_id"))
    assert [hash_ for _, hash_, _ in stored] == [hashlib.sha256(t.encode()).hexdigest() for t in tokens]
    assert not any(token in str(stored) for token in tokens)


@pytest.mark.parametrize(("names", "message"), [
    ("", "give at least one name"),
    ("Ann,Ann", "each name once: Ann given twice"),
    ("Zed," + "x" * 101, "names are at most 100 characters"),
    ("Ann,B\0o", r"a name holds a NUL character \(\\0\)"),
])
def test_the_command_refuses_bad_names_and_creates_nothing(invited, names, message):
    with pytest.raises(CommandError, match=message):
        call_command("rater_links", "--study", SLUG, "--names", names, stdout=io.StringIO())
    assert RaterLink.objects.count() == 0


def test_a_name_with_an_active_link_gets_no_second_one_until_revoked(invited):
    _links(invited, "Ann")
    with pytest.raises(CommandError, match="Ann already has a link"):
        call_command("rater_links", "--study", SLUG, "--names", "Bo,Ann", stdout=io.StringIO())
    assert list(RaterLink.objects.values_list("name", flat=True)) == ["Ann"]
    call_command("rater_links", "--study", SLUG, "--revoke", "Ann", stdout=io.StringIO())
    assert list(_links(invited, "Ann")) == ["Ann"]
    assert RaterLink.objects.filter(name="Ann").count() == 2


def test_the_command_refuses_studies_that_do_not_invite_and_unknown_studies(tide):
    with pytest.raises(CommandError, match='recruits with mode "panel"'):
        call_command("rater_links", "--study", "tide", "--names", "Ann", stdout=io.StringIO())
    with pytest.raises(CommandError, match='no study "nope"'):
        call_command("rater_links", "--study", "nope", "--names", "Ann", stdout=io.StringIO())
    with pytest.raises(CommandError, match='no active link for "Ann"'):
        call_command("rater_links", "--study", "tide", "--revoke", "Ann", stdout=io.StringIO())


def test_the_command_lists_links_with_their_rater_s_progress(invited, steps):
    links = _links(invited, "Ann,Bo")
    rater = Client()
    rater.get(_path(links["Ann"]))
    rater.post(f"{ENTRY}consent/", {"decision": "accept"})
    call_command("rater_links", "--study", SLUG, "--revoke", "Bo", stdout=io.StringIO())
    out = io.StringIO()
    call_command("rater_links", "--study", SLUG, "--list", stdout=out)
    total = Participant.objects.get().visits.count()
    assert out.getvalue().splitlines() == [f"Ann\tin progress\t0/{total} pages", "Bo\trevoked\t0/0 pages"]


# ---------------------------------------------------------------- the rater's side


def test_a_link_starts_its_rater_and_resumes_them_on_another_device(invited, steps):
    links = _links(invited, "Ann,Bo")
    laptop = Client()
    response = laptop.get(_path(links["Ann"]))
    assert response.status_code == 303 and response["Location"] == f"{ENTRY}consent/"  # the token leaves the address bar
    laptop.post(f"{ENTRY}consent/", {"decision": "accept"})
    laptop.post(f"{ENTRY}instructions/")
    steps.submit_current(laptop, invited)
    ann = Participant.objects.get()
    assert ann.external_id == RaterLink.objects.get(name="Ann").external_id
    phone = Client()  # the next day, on another device
    assert phone.get(_path(links["Ann"]))["Location"] == f"{ENTRY}page/"
    assert phone.session["survey:counselor"]["participant_id"] == ann.pk
    page = steps.finish(phone, invited).content.decode()
    assert "you have finished the study" in page and "completion code" not in page.lower()
    assert Participant.objects.count() == 1
    # Another rater's link is another participant.
    bo = Client()
    bo.get(_path(links["Bo"]))
    bo.post(f"{ENTRY}consent/", {"decision": "accept"})
    assert Participant.objects.count() == 2


def test_only_rater_links_enter_an_invited_study(invited):
    response = Client().get(ENTRY + "?PROLIFIC_PID=" + "a" * 24)
    assert response.status_code == 403 and "This study is by invitation" in response.content.decode()
    for token in ("x" * 43, "", "y" * 5000):
        response = Client().get(ENTRY + "?invite=" + token)
        assert response.status_code == 404 and "This link is not valid" in response.content.decode()
    assert Participant.objects.count() == 0


def test_a_revoked_link_shows_a_clear_page_also_to_a_rater_in_the_middle(invited, owner_client, steps):
    links = _links(invited, "Ann")
    rater = Client()
    rater.get(_path(links["Ann"]))
    rater.post(f"{ENTRY}consent/", {"decision": "accept"})
    rater.post(f"{ENTRY}instructions/")
    _, spec = steps.page(rater, invited)
    link = RaterLink.objects.get()
    assert owner_client.post(f"/studies/{SLUG}/raters/{link.pk}/revoke/").status_code == 302
    for response in (rater.post(f"{ENTRY}page/", steps.answers(spec)), Client().get(_path(links["Ann"]))):
        assert response.status_code == 410
        assert "This link was withdrawn" in response.content.decode()
    participant = Participant.objects.get()
    assert participant.status == "in_progress" and participant.visits.filter(submitted_at__isnull=False).count() == 0
    assert rater.get(f"{ENTRY}page/").status_code == 200  # the session is gone: the "session ended" page


def test_the_token_never_reaches_a_log_line(invited):
    url = _links(invited, "Ann")["Ann"]
    token = url.split("invite=")[1]
    line = mask_identifiers(f'"GET {_path(url)} HTTP/1.1" 303 0 "{url}"')
    assert token not in line and line.count("invite=[masked]") == 2


# ---------------------------------------------------------------- the researchers' page


def test_the_owner_creates_links_on_the_page_and_sees_them_once(invited, owner_client):
    response = owner_client.post(f"/studies/{SLUG}/raters/", {"names": "Ann\nBo"})
    assert response.status_code == 200
    page = response.content.decode()
    urls = re.findall(r'value="(http://testserver/s/counselor/\?invite=[A-Za-z0-9_-]{43})"', page)
    assert len(urls) == 2 and "shown this once" in page
    assert Client().get(urls[1].removeprefix("http://testserver"))["Location"] == f"{ENTRY}consent/"
    later = owner_client.get(f"/studies/{SLUG}/raters/").content.decode()
    assert "Ann" in later and "Bo" in later and "not started" in later
    assert not any(url.split("invite=")[1] in later for url in urls)


def test_the_page_refuses_bad_names_with_a_message_and_keeps_what_was_typed(invited, owner_client):
    owner_client.post(f"/studies/{SLUG}/raters/", {"names": "Ann"})
    response = owner_client.post(f"/studies/{SLUG}/raters/", {"names": "Bo, Ann"})
    assert response.status_code == 400
    page = response.content.decode()
    assert "No link was created" in page and "Ann already has a link" in page and ">Bo, Ann</textarea>" in page
    assert list(RaterLink.objects.values_list("name", flat=True)) == ["Ann"]


def test_the_page_refuses_a_name_with_a_nul_with_400_and_creates_nothing(invited, owner_client):
    response = owner_client.post(f"/studies/{SLUG}/raters/", {"names": "Ann\nB\0o"})
    assert response.status_code == 400
    assert "a name holds a NUL character (\\0), which no name can contain" in html.unescape(response.content.decode())
    assert not RaterLink.objects.exists()


def test_the_page_of_a_study_that_does_not_invite_says_how_to_invite(study, owner_client):
    page = owner_client.get(f"/studies/{study.slug}/raters/").content.decode()
    assert 'recruits with <code>"mode": "panel"</code>' in page and "<textarea" not in page


def test_another_researcher_cannot_see_or_revoke_the_links(invited, other, client):
    _links(invited, "Ann")
    client.force_login(other)
    assert client.get(f"/studies/{SLUG}/raters/").status_code == 404
    assert client.post(f"/studies/{SLUG}/raters/{RaterLink.objects.get().pk}/revoke/").status_code == 404
    assert RaterLink.objects.get().revoked_at is None


def test_rater_names_stay_on_the_researchers_side(invited, owner_client, owner_api, steps, quick_stats):
    links = _links(invited, "Annabelle Quux")
    rater = Client()
    rater.get(_path(links["Annabelle Quux"]))
    rater.post(f"{ENTRY}consent/", {"decision": "accept"})
    rater.post(f"{ENTRY}instructions/")
    steps.finish(rater, invited)
    finished_run(invited)
    pages = [rater.get(f"{ENTRY}done/"), owner_api.get(f"/api/studies/{SLUG}/participants/"),
             owner_client.get(f"/studies/{SLUG}/exports/participants.csv")]
    bodies = [b"".join(r.streaming_content) if r.streaming else r.content for r in pages]
    assert [r.status_code for r in pages] == [200, 200, 200]
    assert not any(b"Annabelle" in body for body in bodies)
    pseudonym = Participant.objects.get().pseudonym.encode()
    assert pseudonym in bodies[1] and pseudonym in bodies[2]  # the rater is there, under their pseudonym
