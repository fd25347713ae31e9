"""bin/run's setup_demo: three studies, a demo researcher who owns them and can read them in the admin."""

from __future__ import annotations

import pytest
from django.core.management import call_command

from surveys.management.commands import setup_demo
from surveys.models import Participant, Study

pytestmark = [pytest.mark.slow, pytest.mark.django_db]  # slow: simulates the demo participants


def test_the_demo_researcher_sees_the_demo_studies_in_the_admin(client, monkeypatch):
    monkeypatch.setattr(setup_demo, "DEMO_PARTICIPANTS", 3)
    monkeypatch.setattr(setup_demo, "DEMO_PAIRWISE_PARTICIPANTS", 2)
    call_command("setup_demo")
    call_command("setup_demo")  # idempotent: nobody added the second time
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
    call_command("setup_demo")
    out = capsys.readouterr().out
    assert "tide.json: kept the existing study" in out and "delete the database" in out
    tide.refresh_from_db()
    assert tide.construct == "preferred"
    assert set(Study.objects.values_list("slug", flat=True)) == {"tide", "counselor", "most-least", "pairwise"}
