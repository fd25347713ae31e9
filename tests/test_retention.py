"""Retention (issue 27, item 4): panel identifiers become pseudonyms N days after a study closes."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.conf import settings as django_settings
from django.utils import timezone

from analysis.models import ResultTable
from prolific.models import BonusLine, PanelStudy, PanelSubmission
from surveys import retention
from surveys.definition import DefinitionError, PARTICIPANT_FACING, parse_definition
from surveys.loader import study_load
from surveys.models import Participant, Study
from surveys.pseudonyms import pseudonym_for
from surveys.tasks import apply_retention
from tests.support.downloads import csv_rows
from tests.support.researcher import fill_with_bots, finished_run
from tests.test_withdrawal import announced, small_run  # noqa: F401 (a fixture)

pytestmark = pytest.mark.django_db


def _with_retention(study: Study, days: int) -> Study:
    study.definition = {**study.definition, "retention": {"identifiers_days": days}}
    study.save()
    return study


def _close(study: Study) -> Study:
    study.is_open = False
    study.save()
    study.refresh_from_db()
    return study


def _tables(run) -> dict:
    return {t.name: (t.columns, t.rows, t.note) for t in ResultTable.objects.filter(run=run)}


def test_the_definition_takes_retention_and_refuses_a_bad_one(tide_definition):
    loaded = study_load(definition=parse_definition({**tide_definition, "retention": {"identifiers_days": 30}})).study
    assert retention.identifiers_days(loaded) == 30
    assert "retention" not in PARTICIPANT_FACING  # researchers may change it once participants exist
    for bad, words in (({"identifiers_days": -1}, "greater than or equal to 0"),
                       ({"days": 3}, "identifiers_days"), ("30", "retention")):
        with pytest.raises(DefinitionError, match=words):
            parse_definition({**tide_definition, "retention": bad})


def test_closing_a_launched_study_records_when_and_reopening_clears_it(tide):
    assert tide.closed_at is None
    _close(tide)
    closed_at = tide.closed_at
    assert closed_at is not None
    tide.save()  # saving it again keeps the first time
    assert Study.objects.get(pk=tide.pk).closed_at == closed_at
    tide.is_open = True
    tide.save(update_fields=["is_open"])
    assert Study.objects.get(pk=tide.pk).closed_at is None


def test_the_identifiers_go_n_days_after_closing_once_and_are_announced(tide):
    fill_with_bots(tide, 3)
    study = _close(_with_retention(tide, 30))
    people = dict(Participant.objects.filter(study=study).values_list("pk", "external_id"))
    assert retention.retention_pass(now=study.closed_at + timedelta(days=29)) == []
    assert dict(Participant.objects.filter(study=study).values_list("pk", "external_id")) == people
    with announced() as heard:
        assert retention.retention_pass(now=study.closed_at + timedelta(days=30)) == [study.slug]
        assert retention.retention_pass(now=study.closed_at + timedelta(days=31)) == []  # idempotent
    after = Participant.objects.filter(study=study)
    assert all(p.external_id == p.pseudonym and not p.panel_study_id and not p.panel_session_id for p in after)
    assert not set(people.values()) & set(after.values_list("external_id", flat=True))
    assert [(h["action"], h["actor"], h["study"]) for h in heard] == [("identifiers.remove", None, study)]
    study.refresh_from_db()
    assert study.identifiers_removed_at == study.closed_at + timedelta(days=30)


def test_an_open_study_a_draft_and_a_study_without_retention_keep_their_identifiers(tide, most_least, tide_definition):
    _with_retention(tide, 0)  # open
    _close(most_least)  # no retention
    draft_definition = {**tide_definition, "slug": "draft-x", "retention": {"identifiers_days": 0}}
    draft = study_load(definition=parse_definition(draft_definition), as_draft=True).study
    assert retention.retention_pass(now=timezone.now() + timedelta(days=3650)) == []
    assert Study.objects.get(pk=draft.pk).closed_at is None


def test_a_study_closed_by_an_update_counts_from_the_first_pass_that_sees_it(tide):
    _with_retention(tide, 2)
    Study.objects.filter(pk=tide.pk).update(is_open=False)  # bypasses Study.save
    now = timezone.now()
    assert retention.retention_pass(now=now) == []
    assert Study.objects.get(pk=tide.pk).closed_at == now
    assert retention.retention_pass(now=now + timedelta(days=2)) == [tide.slug]


def test_prolifics_copies_of_the_ids_become_pseudonyms_too(tide):
    panel = PanelStudy.objects.create(study=tide, prolific_id="p1", status="ACTIVE", reward_cents=100,
                                      estimated_minutes=5, places=3, screened_out_code="S", failed_checks_code="F")
    panel_id = "e" * 24
    PanelSubmission.objects.create(panel_study=panel, submission_id="sub1", panel_participant_id=panel_id,
                                   status="RETURNED", releases_place=True)
    BonusLine.objects.create(panel_study=panel, panel_participant_id=panel_id, number=1, amount="1.00")
    retention.identifiers_remove(study=_close(tide))
    expected = pseudonym_for(key=tide.pseudonym_key, external_id=panel_id)
    assert PanelSubmission.objects.get().panel_participant_id == expected
    assert BonusLine.objects.get().panel_participant_id == expected


def test_identifiers_csv_says_they_were_removed_and_analyses_are_unchanged(small_run, owner_client):
    study = small_run.study
    before_ids = csv_rows(owner_client.get(f"/studies/{study.slug}/exports/identifiers.csv?confirm=1"))
    before_participants = csv_rows(owner_client.get(f"/studies/{study.slug}/exports/participants.csv"))
    retention.identifiers_remove(study=_close(_with_retention(study, 0)))
    study.refresh_from_db()
    when = study.identifiers_removed_at.strftime("%Y-%m-%dT%H:%M:%SZ")
    after_ids = csv_rows(owner_client.get(f"/studies/{study.slug}/exports/identifiers.csv?confirm=1"))
    assert after_ids[0] == before_ids[0] and len(after_ids) == len(before_ids) > 1
    assert {row[1] for row in after_ids[1:]} == {f"removed {when} (retention)"}
    assert [row[:1] + row[2:] for row in after_ids] == [row[:1] + row[2:] for row in before_ids]
    assert csv_rows(owner_client.get(f"/studies/{study.slug}/exports/participants.csv")) == before_participants
    again = finished_run(study)
    assert _tables(again) == _tables(small_run) and len(_tables(again)) > 3


def test_the_beat_schedule_runs_the_task_and_the_task_does_the_pass(tide):
    entries = {entry["task"] for entry in django_settings.CELERY_BEAT_SCHEDULE.values()}
    assert "surveys.apply_retention" in entries
    _close(_with_retention(tide, 0))
    assert apply_retention.apply().get() == [tide.slug]
    assert apply_retention.apply().get() == []
