"""The researchers' Prolific pages and ``manage.py prolific``, against the fake Prolific server."""

from __future__ import annotations

import pytest
from django.core.management import CommandError, call_command
from django.test import Client

from analysis.models import ParticipantResult
from prolific import selectors, services
from prolific.models import BonusPayment, PanelStudy, PanelSubmission
from surveys.models import Participant


def _draft_page(client, study, **data):
    return client.post(f"/studies/{study.slug}/prolific/create/", {"reward_cents": 200, "estimated_minutes": 15, **data})


def test_the_dashboard_links_to_the_prolific_page_of_a_panel_study(owner_client, study):
    page = owner_client.get(f"/studies/{study.slug}/").content.decode()
    assert f'href="/studies/{study.slug}/prolific/"' in page


def test_only_owners_see_the_prolific_pages(client, other, study, prolific):
    client.force_login(other)
    for url in ("prolific/", "prolific/review/"):
        assert client.get(f"/studies/{study.slug}/{url}").status_code == 404
    assert _draft_page(client, study).status_code == 404
    assert prolific.requests == []


def test_an_owner_creates_publishes_pauses_and_syncs_on_the_page(owner_client, study, prolific):
    response = _draft_page(owner_client, study)
    assert response.status_code == 200 and "created on Prolific" in response.content.decode()
    panel = PanelStudy.objects.get(study=study)
    body = prolific.studies[panel.prolific_id]
    assert body["external_study_url"].startswith("http://testserver/s/tide/?PROLIFIC_PID={{%PROLIFIC_PID%}}")
    assert (body["reward"], body["estimated_completion_time"]) == (200, 15)
    for action, status in [("publish", "ACTIVE"), ("pause", "PAUSED")]:
        page = owner_client.post(f"/studies/{study.slug}/prolific/{action}/").content.decode()
        assert f"now {status} on Prolific" in page
    prolific.add_submission(panel.prolific_id, "a" * 24, "ACTIVE")
    page = owner_client.post(f"/studies/{study.slug}/prolific/sync/").content.decode()
    assert "1 submissions read, 1 changed" in page and "ACTIVE: 1" in page


def test_a_bad_form_and_a_prolific_failure_answer_with_the_reason_and_create_nothing(owner_client, study, prolific):
    response = _draft_page(owner_client, study, reward_cents="-3")
    assert response.status_code == 400 and prolific.requests == []
    prolific.fail_next("POST", "/api/v1/studies/", 503)
    response = _draft_page(owner_client, study)
    assert response.status_code == 502
    assert "Prolific failed POST /api/v1/studies/ with 503" in response.content.decode()
    assert not PanelStudy.objects.exists()


def test_actions_need_a_post_with_csrf(owner, study, prolific):
    services.panel_study_create(study=study, reward_cents=100, estimated_minutes=5, base_url="http://x")
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(owner)
    assert strict.post(f"/studies/{study.slug}/prolific/publish/").status_code == 403
    assert strict.get(f"/studies/{study.slug}/prolific/publish/").status_code == 405
    assert strict.post(f"/studies/{study.slug}/prolific/nonsense/").status_code == 403
    assert prolific.calls("POST", r"/api/v1/studies/\w+/transition/") == []


def _reviewed(prolific, run):
    study = run.study
    panel = services.panel_study_create(study=study, reward_cents=100, estimated_minutes=5, base_url="http://x")
    for participant in Participant.objects.filter(study=study):
        prolific.add_submission(panel.prolific_id, participant.external_id)
    services.panel_submissions_sync(panel=panel)
    ParticipantResult.objects.filter(run=run).update(payable=True, reject_reason="")
    rejected = ParticipantResult.objects.filter(run=run).order_by("participant_id").first()
    ParticipantResult.objects.filter(pk=rejected.pk).update(payable=False, reject_reason="too_fast")
    return panel, rejected.participant


def test_the_review_page_lists_who_and_why_and_acts_only_on_confirmation(owner_client, prolific, done_run):
    panel, rejected = _reviewed(prolific, done_run)
    url = f"/studies/{panel.study.slug}/prolific/review/"
    page = owner_client.get(url).content.decode()
    approve = len(selectors.review_plan(panel=panel).of("approve"))
    assert f"Approve ({approve})" in page and "Reject (1)" in page
    assert rejected.pseudonym in page and "too_fast" in page and rejected.external_id in page
    assert prolific.calls("POST", ".*approve.*") == []  # looking changes nothing

    page = owner_client.post(url, {"plan": "stale"})
    assert page.status_code == 400 and "changed since you confirmed" in page.content.decode()
    assert prolific.calls("POST", ".*approve.*") == []

    page = owner_client.post(url, {"plan": selectors.review_plan(panel=panel).fingerprint}).content.decode()
    assert f"{approve} approved and 1 rejected on Prolific" in page
    assert PanelSubmission.objects.get(participant=rejected).status == "REJECTED"


def test_a_prolific_failure_on_review_answers_502_and_changes_nothing(owner_client, prolific, done_run):
    panel, _ = _reviewed(prolific, done_run)
    prolific.fail_next("POST", "/api/v1/submissions/bulk-approve/", 500)
    response = owner_client.post(f"/studies/{panel.study.slug}/prolific/review/",
                                 {"plan": selectors.review_plan(panel=panel).fingerprint})
    assert response.status_code == 502 and "with 500" in response.content.decode()
    assert set(PanelSubmission.objects.values_list("status", flat=True)) == {"AWAITING REVIEW"}


# ------------------------------------------------------------------ the command


def _command(*args) -> str:
    from io import StringIO

    out = StringIO()
    call_command("prolific", *args, stdout=out)
    return out.getvalue()


def test_the_command_runs_the_whole_round_trip(prolific, done_run, tmp_path, settings):
    study = done_run.study
    assert "created on Prolific (150 places)" in _command("--study", study.slug, "create", "--reward-cents", "150",
                                                          "--minutes", "20")
    panel = PanelStudy.objects.get(study=study)
    assert "is ACTIVE on Prolific" in _command("--study", study.slug, "publish")
    assert "is PAUSED on Prolific" in _command("--study", study.slug, "pause")
    first = Participant.objects.filter(study=study).order_by("pk").first()
    for participant in Participant.objects.filter(study=study):
        prolific.add_submission(panel.prolific_id, participant.external_id)
    assert "12 submissions, 12 changed" in _command("--study", study.slug, "sync")
    listing = _command("--study", study.slug, "approve")
    assert "run again with --yes" in listing and prolific.calls("POST", ".*approve.*") == []
    assert "approved" in _command("--study", study.slug, "approve", "--yes")
    bonus_file = tmp_path / "bonus.csv"
    bonus_file.write_text(f"{first.pseudonym},2.00\n")
    assert "1 bonuses paid, 2.00 in all" in _command("--study", study.slug, "bonus", str(bonus_file))
    assert BonusPayment.objects.count() == 1
    assert "participants in Prolific group" in _command("--study", study.slug, "group")


def test_the_command_says_what_went_wrong(prolific, study, tmp_path):
    with pytest.raises(CommandError, match="run \"create\" first"):
        _command("--study", study.slug, "publish")
    with pytest.raises(CommandError, match='no study "nope"'):
        _command("--study", "nope", "sync")
    with pytest.raises(CommandError, match="reward is a positive number"):
        _command("--study", study.slug, "create", "--minutes", "5")
    prolific.fail_next("POST", "/api/v1/studies/", "timeout")
    with pytest.raises(CommandError, match="did not answer within 1 s"):
        _command("--study", study.slug, "create", "--reward-cents", "100", "--minutes", "5")
    assert not PanelStudy.objects.exists()
    _command("--study", study.slug, "create", "--reward-cents", "100", "--minutes", "5")
    with pytest.raises(CommandError, match="cannot read"):
        _command("--study", study.slug, "bonus", str(tmp_path / "missing.csv"))
