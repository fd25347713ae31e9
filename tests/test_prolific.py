"""The Prolific round trip through its API, against a fake Prolific server (tests/support/fake_prolific.py):
create the draft, publish and pause, sync submissions (released places), approve and reject,
bonuses, participant groups; every failure from Prolific changes nothing here; the token is
never stored nor logged."""

from __future__ import annotations

import logging
from decimal import Decimal

import pytest
from django.apps import apps
from django.db import IntegrityError, transaction
from django.test import Client

from analysis.models import ParticipantResult
from prolific import selectors, services
from prolific.client import ProlificClient, ProlificError
from prolific.models import BonusLine, BonusPayment, PanelStudy, PanelSubmission
from prolific.tasks import sync_submissions
from surveys import places
from surveys.models import Participant
from tests.support.fake_prolific import TOKEN

A, B, C = "a" * 24, "b" * 24, "c" * 24
SITE = "https://survey.example.org"


def _draft(study, **terms) -> PanelStudy:
    if not study.target_completions:
        study.target_completions = 10
        study.save()
    return services.panel_study_create(study=study, reward_cents=terms.get("reward", 250),
                                       estimated_minutes=terms.get("minutes", 20), base_url=SITE)


def _snapshot() -> dict:
    """Every row the round trip could touch, to compare before and after a failure."""
    return {
        model.__name__: sorted(map(repr, model.objects.values()))
        for model in (PanelStudy, PanelSubmission, BonusPayment, BonusLine, Participant, ParticipantResult)
    }


# ------------------------------------------------------------------ the draft


def test_it_creates_a_draft_from_the_study_with_its_url_parameters_codes_places_reward_and_time(prolific, tide):
    tide.description, tide.id_param, tide.study_param, tide.session_param = "Rate replies.", "pid", "sid", "sess"
    tide.save()
    panel = _draft(tide, reward=375, minutes=25)

    sent = prolific.calls("POST", "/api/v1/studies/")[0]
    assert sent["authorization"] == f"Token {TOKEN}"
    body = sent["body"]
    # Blinding: participants see Prolific's name and description, so they are participant-facing texts only.
    assert (body["name"], body["description"]) == (tide.participant_title, tide.instructions_text)
    assert body["internal_name"] == f"tide: {tide.title}" and tide.title not in (body["name"], body["description"])
    assert body["external_study_url"] == (
        f"{SITE}/s/tide/?pid={{{{%PROLIFIC_PID%}}}}&sid={{{{%STUDY_ID%}}}}&sess={{{{%SESSION_ID%}}}}")
    assert body["prolific_id_option"] == "url_parameters"
    codes = {code["code_type"]: code["code"] for code in body["completion_codes"]}
    assert codes == {"COMPLETED": "C1TIDE7Q", "SCREENED_OUT": panel.screened_out_code,
                     "FAILED_ATTENTION_CHECK": panel.failed_checks_code}
    assert len(set(codes.values())) == 3
    assert (body["total_available_places"], body["reward"], body["estimated_completion_time"]) == (150, 375, 25)
    assert panel.prolific_id in prolific.studies and panel.status == "UNPUBLISHED"
    assert PanelStudy.objects.get(study=tide).prolific_id == panel.prolific_id


def test_it_takes_the_estimate_from_the_study_when_none_is_given(prolific, tide):
    tide.target_completions, tide.estimated_minutes = 5, 12
    tide.save()
    panel = services.panel_study_create(study=tide, reward_cents=100, base_url=SITE)
    assert panel.estimated_minutes == 12
    assert prolific.studies[panel.prolific_id]["estimated_completion_time"] == 12


@pytest.mark.parametrize("change, expected", [
    ({"target_completions": None}, "target_completions"),
    ({"participant_title": ""}, "participant_title"),
    ({"recruitment_mode": "open"}, 'mode "open"'),
])
def test_a_study_that_cannot_go_to_prolific_is_refused_before_anything_is_sent(prolific, tide, change, expected):
    for name, value in change.items():
        setattr(tide, name, value)
    tide.save()
    with pytest.raises(services.PanelRefused, match=expected):
        services.panel_study_create(study=tide, reward_cents=100, estimated_minutes=10, base_url=SITE)
    assert prolific.requests == [] and not PanelStudy.objects.exists()


def test_a_study_goes_to_prolific_once(prolific, tide):
    _draft(tide)
    with pytest.raises(services.PanelRefused, match="already has a study on Prolific"):
        _draft(tide)
    assert len(prolific.studies) == 1


def test_it_publishes_pauses_and_resumes(prolific, tide):
    panel = _draft(tide)
    for action, status in [("publish", "ACTIVE"), ("pause", "PAUSED"), ("resume", "ACTIVE")]:
        services.panel_study_transition(panel=panel, action=action)
        assert PanelStudy.objects.get(pk=panel.pk).status == status == prolific.studies[panel.prolific_id]["status"]
    assert [c["body"] for c in prolific.calls("POST", r"/api/v1/studies/\w+/transition/")] == [
        {"action": "PUBLISH"}, {"action": "PAUSE"}, {"action": "START"}]


def test_a_transition_prolific_refuses_says_why_and_keeps_the_status(prolific, tide):
    panel = _draft(tide)
    with pytest.raises(ProlificError, match=r"Prolific refused POST .*/transition/ with 400.*Cannot PAUSE"):
        services.panel_study_transition(panel=panel, action="pause")
    assert PanelStudy.objects.get(pk=panel.pk).status == "UNPUBLISHED"


# ------------------------------------------------------------------ sync and places


def test_sync_stores_every_status_across_pages_and_a_second_sync_changes_nothing(prolific, tide):
    panel = _draft(tide)
    ours = Participant.objects.create(study=tide, external_id=A, pseudonym="p-a")
    ids = {prolific.add_submission(panel.prolific_id, pid, status): status for pid, status in
           [(A, "ACTIVE"), (B, "RETURNED"), (C, "AWAITING REVIEW"), ("d" * 24, "TIMED-OUT"), ("e" * 24, "APPROVED")]}
    summary = services.panel_submissions_sync(panel=panel)
    assert (summary.submissions, summary.changed, summary.released) == (5, 5, 2)
    assert len(prolific.calls("GET", r"/api/v1/studies/\w+/submissions/.*")) == 3  # pages of 2
    assert dict(PanelSubmission.objects.values_list("submission_id", "status")) == ids
    assert PanelSubmission.objects.get(panel_participant_id=A).participant == ours
    assert PanelSubmission.objects.get(panel_participant_id=B).participant is None
    assert services.panel_submissions_sync(panel=panel).changed == 0
    prolific.studies[panel.prolific_id]["status"] = "AWAITING REVIEW"  # Prolific moved on by itself
    services.panel_submissions_sync(panel=panel)
    assert PanelStudy.objects.get(pk=panel.pk).status == "AWAITING REVIEW"


def test_returned_and_timed_out_participants_in_progress_free_their_place(prolific, tide, steps):
    panel = _draft(tide)
    tide.target_completions = 2
    tide.save()
    steps.start(Client(), tide, A)
    steps.start(Client(), tide, B)
    assert "this study is full" in Client().get(steps.link(tide, C), follow=True).content.decode()
    prolific.add_submission(panel.prolific_id, A, "RETURNED")
    prolific.add_submission(panel.prolific_id, B, "ACTIVE")
    services.panel_submissions_sync(panel=panel)
    assert places.places_taken(study=tide) == 1
    assert Client().get(steps.link(tide, C))["Location"] == "/s/tide/consent/"


def test_a_rejected_completion_frees_its_place(prolific, tide):
    panel = _draft(tide)
    tide.target_completions = 1
    tide.save()
    now = tide.created_at
    Participant.objects.create(study=tide, external_id=A, pseudonym="p-a", status="completed",
                               started_at=now, finished_at=now)
    assert places.study_is_full(study=tide)
    prolific.add_submission(panel.prolific_id, A, "REJECTED")
    services.panel_submissions_sync(panel=panel)
    assert places.places_taken(study=tide) == 0 and not places.study_is_full(study=tide)


def test_the_beat_task_syncs_every_study_and_is_idempotent(prolific, tide, settings):
    panel = _draft(tide)
    prolific.add_submission(panel.prolific_id, A, "ACTIVE")
    assert settings.CELERY_BEAT_SCHEDULE["prolific-sync-submissions"]["task"] == "prolific.sync_submissions"
    assert sync_submissions.delay().get() == {"tide": "1 submissions, 1 changed"}
    assert sync_submissions.delay().get() == {"tide": "1 submissions, 0 changed"}
    assert PanelSubmission.objects.count() == 1


def test_the_beat_task_does_nothing_without_a_token(prolific, tide, settings):
    _draft(tide)
    settings.PROLIFIC_API_TOKEN = ""
    before = len(prolific.requests)
    assert sync_submissions.delay().get() == {}
    assert len(prolific.requests) == before


def test_without_a_token_every_call_is_refused_with_a_clear_message(settings):
    settings.PROLIFIC_API_TOKEN = ""
    with pytest.raises(ProlificError, match="PROLIFIC_API_TOKEN is not set"):
        ProlificClient()


# ------------------------------------------------------------------ approve and reject


@pytest.fixture
def reviewed(prolific, done_run):
    """The filled TIDE study on Prolific, every participant's submission awaiting review, synced;
    one result carries a reject reason and one is unpayable without a ground."""
    study = done_run.study
    panel = _draft(study)
    for participant in Participant.objects.filter(study=study):
        prolific.add_submission(panel.prolific_id, participant.external_id)
    services.panel_submissions_sync(panel=panel)
    results = list(ParticipantResult.objects.filter(run=done_run).order_by("participant_id"))
    ParticipantResult.objects.filter(run=done_run).update(payable=True, reject_reason="")
    ParticipantResult.objects.filter(pk=results[0].pk).update(payable=False, reject_reason="failed_attention_checks")
    ParticipantResult.objects.filter(pk=results[1].pk).update(payable=False, reject_reason="too_fast")
    ParticipantResult.objects.filter(pk=results[2].pk).update(payable=False)
    return panel, results


def test_the_plan_follows_payable_and_reject_reason_of_the_latest_run(reviewed):
    panel, results = reviewed
    plan = selectors.review_plan(panel=panel)
    decisions = {row.pseudonym: (row.decision, row.why) for row in plan.rows}
    assert decisions[results[0].participant.pseudonym] == ("reject", "failed_attention_checks")
    assert decisions[results[1].participant.pseudonym] == ("reject", "too_fast")
    assert decisions[results[2].participant.pseudonym][0] == "leave"
    assert [row.decision for row in plan.rows].count("approve") == len(results) - 3


def test_it_approves_in_bulk_and_rejects_each_with_prolifics_category_and_a_message(prolific, reviewed):
    panel, results = reviewed
    plan = selectors.review_plan(panel=panel)
    done = services.review_apply(panel=panel, confirmed_fingerprint=plan.fingerprint)
    assert (done.approved, done.rejected) == (len(results) - 3, 2)
    approve_call = prolific.calls("POST", "/api/v1/submissions/bulk-approve/")
    assert len(approve_call) == 1
    assert sorted(approve_call[0]["body"]["submission_ids"]) == sorted(r.submission_id for r in plan.of("approve"))
    rejects = {c["body"]["rejection_category"] for c in prolific.calls("POST", r"/api/v1/submissions/\w+/transition/")}
    assert rejects == {"FAILED_CHECK", "TOO_QUICKLY"}
    on_prolific = {s["participant_id"]: s["status"] for s in prolific.submissions.values()}
    assert on_prolific[results[0].participant.external_id] == "REJECTED"
    assert on_prolific[results[2].participant.external_id] == "AWAITING REVIEW"
    ours = dict(PanelSubmission.objects.values_list("panel_participant_id", "status"))
    assert ours == on_prolific
    assert selectors.review_plan(panel=panel).of("approve") == []


def test_a_plan_that_changed_since_it_was_confirmed_is_not_applied(prolific, reviewed):
    panel, results = reviewed
    fingerprint = selectors.review_plan(panel=panel).fingerprint
    ParticipantResult.objects.filter(pk=results[3].pk).update(payable=False, reject_reason="too_fast")
    with pytest.raises(services.PanelRefused, match="changed since you confirmed"):
        services.review_apply(panel=panel, confirmed_fingerprint=fingerprint)
    assert prolific.calls("POST", "/api/v1/submissions/bulk-approve/") == []


# ------------------------------------------------------------------ bonuses and groups


def test_it_pays_bonuses_from_a_csv_of_pseudonyms_or_prolific_ids(prolific, tide):
    panel = _draft(tide)
    first = Participant.objects.create(study=tide, external_id=A, pseudonym="p-a")
    prolific.add_submission(panel.prolific_id, A)
    prolific.add_submission(panel.prolific_id, B)
    services.panel_submissions_sync(panel=panel)
    payment = services.bonuses_pay(panel=panel, data=f"participant,amount\n{first.pseudonym},1.50\n{B},0.25\n".encode())
    assert (payment.participants, payment.total_amount) == (2, Decimal("1.75"))
    bulk = prolific.bonuses[payment.prolific_id]
    assert bulk["paid"] and bulk["lines"] == [[A, "1.50"], [B, "0.25"]]
    with pytest.raises(services.PanelRefused, match="already paid"):
        services.bonuses_pay(panel=panel, data=f"{first.pseudonym},1.50\n{B},0.25\n".encode())
    assert len(prolific.bonuses) == 1


@pytest.mark.parametrize("newline", ["\r", "\r\n"], ids=["CR only (classic Mac)", "CRLF"])
def test_a_bonus_file_with_cr_line_endings_is_read_line_by_line(prolific, tide, newline):
    panel = _draft(tide)
    Participant.objects.create(study=tide, external_id=A, pseudonym="p-a")
    prolific.add_submission(panel.prolific_id, A)
    prolific.add_submission(panel.prolific_id, B)
    services.panel_submissions_sync(panel=panel)
    data = newline.join(["participant,amount", "p-a,1.50", f"{B},0.25", ""]).encode()
    payment = services.bonuses_pay(panel=panel, data=data)
    assert prolific.bonuses[payment.prolific_id]["lines"] == [[A, "1.50"], [B, "0.25"]]
    with pytest.raises(services.PanelRefused, match=r"^line 3: 'nobody' is no participant"):
        services.bonuses_pay(panel=panel, data=newline.join(["participant,amount", "p-a,2.00", "nobody,1"]).encode())


@pytest.mark.parametrize("data, expected", [
    (b"nobody,1.00\n", "'nobody' is no participant of this study"),
    (f"{A},abc\n".encode(), "amount 'abc' is not between"),
    (f"{A},250\n".encode(), "amount '250' is not between"),
    (f"{A},1.005\n".encode(), "not between"),
    (f"{A},1\n{A},2\n".encode(), "given a bonus twice"),
    (f"{A};1\n".encode(), "two columns expected"),
    (b"\xff\xfe", "not UTF-8"),
    (b"participant,amount\n", "has no bonus"),
])
def test_a_bad_bonus_file_is_refused_line_by_line_and_nothing_is_sent(prolific, tide, data, expected):
    panel = _draft(tide)
    Participant.objects.create(study=tide, external_id=A, pseudonym="p-a")
    with pytest.raises(services.PanelRefused, match=expected):
        services.bonuses_pay(panel=panel, data=data)
    assert prolific.calls("POST", ".*bonus.*") == [] and not BonusPayment.objects.exists()


def test_completed_and_rejected_participants_join_a_group_created_once(prolific, tide):
    panel = _draft(tide)
    now = tide.created_at
    Participant.objects.create(study=tide, external_id=A, pseudonym="p-a", status="completed",
                               started_at=now, finished_at=now)
    Participant.objects.create(study=tide, external_id=C, pseudonym="p-c")  # in progress: not in the group
    prolific.add_submission(panel.prolific_id, B, "REJECTED")
    services.panel_submissions_sync(panel=panel)
    assert services.group_update(panel=panel) == 2
    group_id = PanelStudy.objects.get(pk=panel.pk).participant_group_id
    assert prolific.groups[group_id]["participant_ids"] == {A, B}
    assert prolific.calls("POST", "/api/v1/participant-groups/")[0]["body"]["workspace_id"] == "workspace-1"
    Participant.objects.filter(external_id=C).update(status="completed", started_at=now, finished_at=now)
    panel.refresh_from_db()
    assert services.group_update(panel=panel) == 3
    assert prolific.groups[group_id]["participant_ids"] == {A, B, C} and len(prolific.groups) == 1


# ------------------------------------------------------------------ failures change nothing


def _ready(prolific, tide):
    """A published draft with one participant awaiting review, payable in a latest run."""
    panel = _draft(tide)
    now = tide.created_at
    Participant.objects.create(study=tide, external_id=A, pseudonym="p-a", status="completed",
                               started_at=now, finished_at=now)
    prolific.add_submission(panel.prolific_id, A)
    services.panel_submissions_sync(panel=panel)
    return panel


ACTIONS = {
    "create": (lambda panel, tide: services.panel_study_create(study=tide, reward_cents=100, estimated_minutes=5,
                                                                base_url=SITE), "POST", "/api/v1/studies/"),
    "publish": (lambda panel, tide: services.panel_study_transition(panel=panel, action="publish"),
                "POST", r"/api/v1/studies/\w+/transition/"),
    "pause": (lambda panel, tide: services.panel_study_transition(panel=panel, action="pause"),
              "POST", r"/api/v1/studies/\w+/transition/"),
    "sync": (lambda panel, tide: services.panel_submissions_sync(panel=panel),
             "GET", r"/api/v1/studies/\w+/submissions/.*"),
    "sync status": (lambda panel, tide: services.panel_submissions_sync(panel=panel),
                    "GET", r"/api/v1/studies/\w+/"),
    "bonus setup": (lambda panel, tide: services.bonuses_pay(panel=panel, data=f"{A},1.00".encode()),
                    "POST", "/api/v1/submissions/bonus-payments/"),
    "bonus pay": (lambda panel, tide: services.bonuses_pay(panel=panel, data=f"{A},1.00".encode()),
                  "POST", r"/api/v1/bulk-bonus-payments/\w+/pay/"),
    "group": (lambda panel, tide: services.group_update(panel=panel), "POST", "/api/v1/participant-groups/"),
}


FAILURES = {
    400: r"Prolific refused .* with 400: .*fault 400 injected",
    401: r"with 401 \(is PROLIFIC_API_TOKEN right\?\)",
    404: r"with 404 \(not found on Prolific\)",
    500: r"Prolific failed .* with 500",
    503: r"Prolific failed .* with 503",
    "timeout": r"Prolific did not answer within 1 s",
}
# Every status for every call; one time-out per kind of call (create, read, pay) is enough: each waits a second.
CASES = [(action, how) for action in ACTIONS for how in FAILURES
         if how != "timeout" or action in ("create", "sync", "bonus pay")]


@pytest.mark.parametrize("action, how", CASES)
def test_every_failure_from_prolific_says_what_happened_and_changes_nothing(prolific, tide, action, how):
    run, method, path = ACTIONS[action]
    panel = _ready(prolific, tide)
    if action == "create":
        PanelStudy.objects.all().delete()
    if action == "pause":
        services.panel_study_transition(panel=panel, action="publish")
    if action == "sync":
        prolific.add_submission(panel.prolific_id, B, "RETURNED")
    before = _snapshot()
    prolific.fail_next(method, path, how)
    with pytest.raises(ProlificError, match=FAILURES[how]) as failure:
        run(panel, tide)
    assert "nothing was changed here" in str(failure.value) or "check Prolific before trying again" in str(
        failure.value)
    after = _snapshot()
    if action == "bonus pay":  # Prolific may have paid: the ledger keeps the line, so it is not paid again unasked
        assert list(BonusLine.objects.values_list("panel_participant_id", "state")) == [(A, "uncertain")]
        after["BonusLine"] = before["BonusLine"]
    assert after == before


def test_a_failed_bulk_approval_changes_nothing(prolific, reviewed):
    panel, _ = reviewed
    before = _snapshot()
    prolific.fail_next("POST", "/api/v1/submissions/bulk-approve/", 500)
    with pytest.raises(ProlificError, match="Prolific failed POST /api/v1/submissions/bulk-approve/ with 500"):
        services.review_apply(panel=panel, confirmed_fingerprint=selectors.review_plan(panel=panel).fingerprint)
    assert _snapshot() == before


def test_a_failed_rejection_says_what_was_done_before_it_and_records_only_that(prolific, reviewed):
    panel, results = reviewed
    prolific.fail_next("POST", r"/api/v1/submissions/\w+/transition/", "timeout")
    with pytest.raises(ProlificError, match=rf"{len(results) - 3} approved and 0 rejected; then: Prolific did not"):
        services.review_apply(panel=panel, confirmed_fingerprint=selectors.review_plan(panel=panel).fingerprint)
    ours = dict(PanelSubmission.objects.values_list("panel_participant_id", "status"))
    on_prolific = {s["participant_id"]: s["status"] for s in prolific.submissions.values()}
    assert ours == on_prolific  # what Prolific did, no more
    assert list(ours.values()).count("REJECTED") == 0


def test_an_unreachable_prolific_says_so(prolific, tide, settings):
    settings.PROLIFIC_API_URL = "http://127.0.0.1:1"
    with pytest.raises(ProlificError, match="could not reach Prolific at http://127.0.0.1:1"):
        _draft(tide)
    assert not PanelStudy.objects.exists()


# ------------------------------------------------------------------ the token


def test_the_token_is_never_logged_nor_stored(prolific, reviewed, caplog):
    panel, _ = reviewed
    caplog.set_level(logging.DEBUG)  # urllib3 and requests log every request at DEBUG
    services.panel_study_transition(panel=panel, action="publish")
    services.review_apply(panel=panel, confirmed_fingerprint=selectors.review_plan(panel=panel).fingerprint)
    services.group_update(panel=panel)
    prolific.fail_next("GET", r"/api/v1/studies/\w+/submissions/.*", 401)
    sync_submissions.delay()  # logs the failure
    with pytest.raises(ProlificError) as failure:
        services.panel_study_transition(panel=panel, action="publish")
    assert any("Prolific sync of tide failed" in record.getMessage() for record in caplog.records)
    assert any("127.0.0.1" in record.getMessage() for record in caplog.records)  # urllib3 did log requests
    logged = "\n".join(record.getMessage() for record in caplog.records) + caplog.text + str(failure.value)
    assert TOKEN not in logged and TOKEN not in repr(ProlificClient())
    for model in apps.get_models():
        for row in model.objects.values_list():
            assert TOKEN not in repr(row), model.__name__


# ------------------------------------------------------------------ the database's constraints


def test_the_database_refuses_rows_that_contradict_themselves(prolific, tide):
    panel = _draft(tide)
    bad_rows = {
        "panel_study_terms_positive": lambda: PanelStudy.objects.filter(pk=panel.pk).update(reward_cents=0),
        "panel_submission_release_matches_status": lambda: PanelSubmission.objects.create(
            panel_study=panel, submission_id="s1", panel_participant_id=A, status="RETURNED", releases_place=False),
        "panel_submission_release_matches_status ": lambda: PanelSubmission.objects.create(
            panel_study=panel, submission_id="s2", panel_participant_id=A, status="APPROVED", releases_place=True),
        "bonus_line_paid_once": lambda: [BonusLine.objects.create(
            panel_study=panel, panel_participant_id=A, number=1, amount=1) for _ in range(2)],
        "bonus_line_amount_positive": lambda: BonusLine.objects.create(
            panel_study=panel, panel_participant_id=A, number=1, amount=0),
        "bonus_line_amount_positive ": lambda: BonusLine.objects.create(
            panel_study=panel, panel_participant_id=A, number=0, amount=1),
        "bonus_line_paid_has_payment": lambda: BonusLine.objects.create(
            panel_study=panel, panel_participant_id=A, number=1, amount=1, state="paid"),
    }
    assert {name.strip() for name in bad_rows} == {
        c.name for model in apps.get_app_config("prolific").get_models() for c in model._meta.constraints}
    for write in bad_rows.values():
        with pytest.raises(IntegrityError), transaction.atomic():
            write()
