"""bin/run's setup_demo: four studies, each filled through its own recruitment channel, and a demo
researcher who owns them and can read them in the admin."""

from __future__ import annotations

import re

import pytest
from django.core.management import call_command

from surveys.management.commands import setup_demo
from surveys.models import FreeTextAnswer, ItemPlacement, Participant, RaterLink, Rating, Study

pytestmark = [pytest.mark.slow(reason="simulates the demo participants"), pytest.mark.django_db]


@pytest.fixture
def small_demo(monkeypatch):
    """The demo with a few participants per study."""
    monkeypatch.setattr(setup_demo, "DEMO_PARTICIPANTS", 3)
    monkeypatch.setattr(setup_demo, "DEMO_PAIRWISE_PARTICIPANTS", 2)
    monkeypatch.setattr(setup_demo, "DEMO_RATERS", 2)
    monkeypatch.setattr(setup_demo, "DEMO_OPEN_LINK_PARTICIPANTS", 3)


def test_every_demo_study_is_filled_through_its_own_recruitment_channel(small_demo):
    call_command("setup_demo")
    call_command("setup_demo")  # idempotent: nobody added the second time
    wanted = {"tide": 3, "pairwise": 2, "counselor": 2, "most-least": 3}
    for slug, n in wanted.items():
        participants = Participant.objects.filter(study__slug=slug)
        assert participants.count() == n, slug
        assert participants.filter(status=Participant.Status.COMPLETED).exists(), slug
    modes = dict(Study.objects.values_list("slug", "recruitment_mode"))
    assert modes == {"tide": "panel", "pairwise": "panel", "counselor": "invited", "most-least": "open"}
    for slug in ("tide", "pairwise"):  # panel ids, as Prolific's links carry them
        assert all(re.fullmatch(r"[0-9a-f]{24}", pid)
                   for pid in Participant.objects.filter(study__slug=slug).values_list("external_id", flat=True))
    # Each invited rater came in by their own personal link, one per rater.
    raters = set(Participant.objects.filter(study__slug="counselor").values_list("external_id", flat=True))
    links = RaterLink.objects.filter(study__slug="counselor")
    assert set(links.values_list("external_id", flat=True)) == raters
    assert sorted(links.values_list("name", flat=True)) == ["Simulated rater 1", "Simulated rater 2"]
    # The open link's ids are drawn by the server, one per browser.
    assert all(pid.startswith("open-") and len(pid) == 37
               for pid in Participant.objects.filter(study__slug="most-least").values_list("external_id", flat=True))
    # Their results and exports have something to show.
    assert Rating.objects.filter(placement__visit__participant__study__slug="counselor").exists()
    assert ItemPlacement.objects.filter(visit__participant__study__slug="most-least", choice="best").exists()
    assert FreeTextAnswer.objects.filter(participant__study__slug="most-least").exists()


def test_the_demo_researcher_sees_the_demo_studies_in_the_admin(client, small_demo):
    call_command("setup_demo")
    assert Participant.objects.filter(study__slug="tide").count() == 3
    assert client.login(username=setup_demo.DEMO_USERNAME, password=setup_demo.DEMO_PASSWORD)
    page = client.get("/admin/surveys/study/")
    assert page.status_code == 200
    for study in Study.objects.all():
        assert study.slug in page.content.decode()
    assert Study.objects.count() == 4
    assert Participant.objects.filter(study__slug="pairwise").count() == 2
    assert client.get("/admin/surveys/participant/").status_code == 200
    assert client.get("/admin/surveys/study/add/").status_code == 403  # read only


def test_a_demo_study_people_took_part_in_is_kept_when_its_fixture_changed(monkeypatch, capsys):
    """A database from an older version: running the demo again keeps its TIDE study instead of failing."""
    from surveys.definition import parse_definition, read_definition_file
    from surveys.loader import study_load
    from tests.support.paths import FIXTURES

    older = read_definition_file(FIXTURES / "tide.json")
    older["construct"] = "preferred"  # what participants saw before the study declared its construct
    tide = study_load(definition=parse_definition(older)).study
    Participant.objects.create(study=tide, external_id="a" * 24, pseudonym="p_old")
    monkeypatch.setattr(setup_demo, "DEMO_PARTICIPANTS", 1)
    monkeypatch.setattr(setup_demo, "DEMO_PAIRWISE_PARTICIPANTS", 1)
    monkeypatch.setattr(setup_demo, "DEMO_RATERS", 1)
    monkeypatch.setattr(setup_demo, "DEMO_OPEN_LINK_PARTICIPANTS", 1)
    call_command("setup_demo")
    out = capsys.readouterr().out
    assert "tide.json: kept the existing study" in out and "delete the database" in out
    tide.refresh_from_db()
    assert tide.construct == "preferred"
    assert set(Study.objects.values_list("slug", flat=True)) == {"tide", "counselor", "most-least", "pairwise"}
