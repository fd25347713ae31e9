"""Study teams (issue 27, item 1) and the audit trail (item 2).

The attacks of the issue's "Bad input and attacks" that belong here (an analyst
guessing the identifiers URL; a role change by a non-owner) and the trigger run
on PostgreSQL too: ``DATABASE_URL=postgres://postgres@127.0.0.1:5432/hev_team``.
"""

from __future__ import annotations

import csv
import io

import pytest
from django.core.exceptions import PermissionDenied
from django.core.management import call_command
from django.db import connection, transaction
from django.db.utils import DatabaseError

from audit.models import AppendOnly, AuditEvent
from surveys import team
from surveys.launch import study_launch
from surveys.models import StudyMembership
from tests.support.researcher import PASSWORD, make_user
from tests.support.studies import load_fixture
from web.signals import announce_action


@pytest.fixture
def analyst(study):
    user = make_user("ana")
    StudyMembership.objects.create(study=study, user=user, role="analyst")
    return user


@pytest.fixture
def viewer(study):
    user = make_user("vic")
    StudyMembership.objects.create(study=study, user=user, role="viewer")
    return user


def rows(**filters) -> list[AuditEvent]:
    return list(AuditEvent.objects.filter(**filters).order_by("id"))


# ---------------------------------------------------------------- attacks (also run on PostgreSQL)


def test_an_analyst_guessing_the_identifiers_url_gets_403_and_the_attempt_is_audited(client, study, analyst):
    client.force_login(analyst)
    web = client.get(f"/studies/{study.slug}/exports/identifiers.csv?confirm=1", REMOTE_ADDR="198.51.100.7")
    api = client.get(f"/api/studies/{study.slug}/restricted/identifiers.csv", REMOTE_ADDR="198.51.100.7")
    assert web.status_code == 403 and api.status_code == 403
    assert b"pseudonym" not in web.content and b"pseudonym" not in api.content
    denied = rows(action="access.denied", study_slug=study.slug)
    assert [(e.actor, e.object, e.address) for e in denied] == [("ana", "identifiers", "198.51.100.7")] * 2
    assert "/exports/identifiers.csv" in denied[0].detail and "role=analyst" in denied[0].detail
    assert not rows(action="export.identifiers")


def test_an_outsider_guessing_the_identifiers_url_gets_404_and_is_audited_too(client, study, other):
    client.force_login(other)
    assert client.get(f"/studies/{study.slug}/exports/identifiers.csv?confirm=1").status_code == 404
    [event] = rows(action="access.denied")
    assert (event.actor, event.study_slug, event.object) == ("other", study.slug, "identifiers")


def test_a_role_change_by_a_non_owner_is_refused_and_changes_nothing(client, study, analyst, viewer):
    client.force_login(analyst)
    response = client.post(f"/studies/{study.slug}/team/", {"username": "vic", "role": "owner"})
    assert response.status_code == 403
    response = client.post(f"/studies/{study.slug}/team/", {"username": "ana", "role": "owner"})
    assert response.status_code == 403
    with pytest.raises(PermissionDenied):
        team.team_role_set(study=study, actor=analyst, username="vic", role="owner")
    with pytest.raises(PermissionDenied):
        team.team_remove(study=study, actor=viewer, username="ana")
    assert set(StudyMembership.objects.values_list("user__username", "role")) == {("ana", "analyst"), ("vic", "viewer")}
    assert list(study.owners.values_list("username", flat=True)) == ["owner"]
    assert not rows(action="team.role_set")
    assert [e.actor for e in rows(action="access.denied")] == ["ana", "ana"]


@pytest.mark.skipif(connection.vendor != "postgresql", reason="the trigger exists on PostgreSQL only")
def test_postgresql_refuses_update_and_delete_of_audit_rows_whatever_the_client(study, owner):
    announce_action(actor=owner, study=study, action="export.download", object="participants.csv")
    [event] = rows(action="export.download")
    for statement in ("UPDATE audit_auditevent SET actor = 'someone else'", "DELETE FROM audit_auditevent"):
        with pytest.raises(DatabaseError, match="append-only"), transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(statement)
    event.refresh_from_db()
    assert event.actor == "owner" and AuditEvent.objects.filter(action="export.download").count() == 1


# ---------------------------------------------------------------- the team page


def test_the_owner_invites_an_existing_account_changes_its_role_and_removes_it(client, owner, study):
    make_user("colleague")
    client.force_login(owner)
    page = f"/studies/{study.slug}/team/"
    assert client.post(page, {"username": "colleague", "role": "viewer"}).status_code == 302
    assert client.post(page, {"username": "colleague", "role": "analyst"}).status_code == 302
    assert StudyMembership.objects.get(user__username="colleague").role == "analyst"
    assert b'data-member="colleague"' in client.get(page).content
    assert client.post(page, {"username": "colleague", "remove": "1"}).status_code == 302
    assert not StudyMembership.objects.exists()
    changes = [(e.action, e.object, e.detail) for e in rows(study_slug=study.slug, action__startswith="team.")]
    assert changes == [("team.role_set", "colleague", "none -> viewer"), ("team.role_set", "colleague", "viewer -> analyst"),
                       ("team.remove", "colleague", "member removed")]


@pytest.mark.parametrize("data, message", [
    ({"username": "nobody", "role": "viewer"}, b"No active account"),
    ({"username": "owner", "role": "viewer"}, b"at least one owner"),
    ({"username": "owner", "remove": "1"}, b"at least one owner"),
    ({"username": "owner", "role": "superuser"}, b"Unknown role"),
])
def test_a_bad_team_change_gets_400_with_a_message_and_changes_nothing(client, owner, study, data, message):
    client.force_login(owner)
    response = client.post(f"/studies/{study.slug}/team/", data)
    assert response.status_code == 400 and message in response.content
    assert list(study.owners.values_list("username", flat=True)) == ["owner"]
    assert not StudyMembership.objects.exists() and not rows(action__startswith="team.")


def test_a_second_owner_can_be_added_and_then_the_first_may_step_down(owner, study):
    make_user("co")
    team.team_role_set(study=study, actor=owner, username="co", role="owner")
    team.team_role_set(study=study, actor=owner, username="owner", role="viewer")
    assert list(study.owners.values_list("username", flat=True)) == ["co"]
    assert StudyMembership.objects.get(user=owner).role == "viewer"


def test_the_database_allows_one_role_per_person_and_study(study, analyst):
    from django.db import IntegrityError

    with pytest.raises(IntegrityError), transaction.atomic():
        StudyMembership.objects.create(study=study, user=analyst, role="viewer")
    with pytest.raises(IntegrityError), transaction.atomic():
        StudyMembership.objects.create(study=study, user=make_user("x"), role="owner")


def test_a_viewer_sees_the_dashboard_but_not_exports_and_an_analyst_sees_no_identifiers_link(client, study, viewer,
                                                                                              analyst):
    client.force_login(viewer)
    assert client.get(f"/studies/{study.slug}/").status_code == 200
    assert client.get(f"/studies/{study.slug}/exports/").status_code == 403
    assert client.get(f"/api/studies/{study.slug}/").status_code == 403
    assert client.get("/api/studies/").json()["results"] == []
    client.force_login(analyst)
    page = client.get(f"/studies/{study.slug}/exports/")
    assert page.status_code == 200 and b"identifiers.csv" not in page.content
    assert [s["slug"] for s in client.get("/api/studies/").json()["results"]] == [study.slug]


# ---------------------------------------------------------------- what the trail records


def test_downloads_are_audited_with_identifiers_flagged(client, owner, done_run):
    slug = done_run.study.slug
    client.force_login(owner)
    for path in (f"/studies/{slug}/exports/participants.csv", f"/studies/{slug}/exports/identifiers.csv?confirm=1",
                 f"/studies/{slug}/exports/everything.zip", f"/api/studies/{slug}/restricted/identifiers.csv"):
        response = client.get(path)
        assert response.status_code == 200, path
        b"".join(response.streaming_content)
    trail = [(e.action, e.object, e.identifiers) for e in rows(study_slug=slug, action__startswith="export.")]
    assert trail == [("export.download", "participants.csv", False), ("export.identifiers", "identifiers.csv", True),
                     ("export.zip", f"{slug}-run{done_run.pk}.zip", False),
                     ("export.identifiers", "identifiers.csv", True)]
    printed = _audit_command(slug)
    flagged = [row for row in printed if row["action"] == "export.identifiers"]
    assert len(flagged) == 2 and all(row["detail"].startswith("[identifiers]") for row in flagged)


def test_sign_in_and_failed_sign_in_are_audited_with_the_address(client, owner, fresh_cache):
    client.post("/accounts/login/", {"username": "owner", "password": "wrong"}, REMOTE_ADDR="203.0.113.9")
    client.post("/accounts/login/", {"username": "owner", "password": PASSWORD}, REMOTE_ADDR="203.0.113.9")
    trail = [(e.action, e.actor, e.object, e.address) for e in rows(action__startswith="account.")]
    assert trail == [("account.sign_in_failed", "", "owner", "203.0.113.9"),
                     ("account.sign_in", "owner", "owner", "203.0.113.9")]


def test_load_reload_launch_and_run_start_are_audited(client, owner, quick_stats):
    from surveys.definition import parse_definition, read_definition_file
    from surveys.loader import study_load
    from tests.support.paths import FIXTURES

    definition = parse_definition(read_definition_file(FIXTURES / "tide.json"))
    study = study_load(definition=definition, as_draft=True, actor=owner, via="test").study
    study_load(definition=definition, actor=owner)
    study_launch(study=study, actor=owner)
    study_launch(study=study, actor=owner)  # launched already: no change, no row
    study.owners.add(owner)
    client.force_login(owner)
    assert client.post(f"/studies/{study.slug}/runs/").status_code == 302
    trail = [(e.action, e.actor) for e in rows(study_slug=study.slug)]
    assert trail == [("study.load", "owner"), ("study.reload", "owner"), ("study.launch", "owner"), ("run.start", "owner")]


def test_closing_and_reopening_from_the_launch_page_are_audited_state_changes(client, owner):
    from django.test import Client

    study = load_fixture("tide.json")
    study.owners.add(owner)
    client.force_login(owner)
    entry = "/s/tide/?PROLIFIC_PID=" + "a" * 24 + "&STUDY_ID=s&SESSION_ID=t"
    assert 'data-close' in client.get("/studies/tide/launch/").content.decode()
    for action in ("close", "close", "reopen", "reopen", "close"):  # asking for the state it is in: no row
        assert client.post("/studies/tide/launch/", {"action": action}).status_code == 302
        study.refresh_from_db()
        assert study.is_open == (action == "reopen") and (study.closed_at is None) == (action == "reopen")
    assert 'data-reopen' in client.get("/studies/tide/launch/").content.decode()
    assert Client().get(entry)["Location"] != "/s/tide/consent/"  # newcomers are turned away
    trail = [(e.action, e.actor, e.detail) for e in rows(study_slug="tide", action__in=["study.close", "study.reopen"])]
    assert trail == [("study.close", "owner", "open -> closed"), ("study.reopen", "owner", "closed -> open"),
                     ("study.close", "owner", "open -> closed")]


def test_an_analyst_cannot_close_the_study(client, study, analyst):
    client.force_login(analyst)
    assert client.post(f"/studies/{study.slug}/launch/", {"action": "close"}).status_code == 403
    study.refresh_from_db()
    assert study.is_open


def test_rater_link_creation_and_revocation_are_audited(client, owner):
    study = load_fixture("counselor.json", recruitment={"mode": "invited"})
    coordinator = make_user("coord")
    StudyMembership.objects.create(study=study, user=coordinator, role="rater_coordinator")
    client.force_login(coordinator)
    assert client.post(f"/studies/{study.slug}/raters/", {"names": "Ann"}).status_code == 200
    link_id = study.rater_links.get().pk
    assert client.post(f"/studies/{study.slug}/raters/{link_id}/revoke/").status_code == 302
    assert client.get(f"/studies/{study.slug}/").status_code == 403  # the raters page only
    trail = [(e.action, e.actor, e.object) for e in rows(study_slug=study.slug, action__startswith="rater_link.")]
    assert trail == [("rater_link.create", "coord", "Ann"), ("rater_link.revoke", "coord", f"link {link_id}")]


# ---------------------------------------------------------------- append-only, page, CSV, API, command


def test_the_application_cannot_change_or_delete_a_row(study, owner):
    announce_action(actor=owner, study=study, action="study.reload", object=study.slug)
    event = AuditEvent.objects.get(action="study.reload")
    event.actor = "someone else"
    for attempt in (event.save, event.delete, lambda: AuditEvent.objects.update(actor="x"),
                    lambda: AuditEvent.objects.filter(pk=event.pk).delete()):
        with pytest.raises(AppendOnly):
            attempt()
    assert AuditEvent.objects.get(action="study.reload").actor == "owner"


def _audit_command(slug: str, *args: str) -> list[dict]:
    out = io.StringIO()
    call_command("audit", "--study", slug, *args, stdout=out)
    reader = csv.DictReader(io.StringIO(out.getvalue()))
    assert reader.fieldnames == ["at", "actor", "address", "action", "object", "detail"]
    return list(reader)


def test_the_command_page_csv_and_api_show_any_action_name_and_filter(client, owner, study):
    # Names announced by other apps (the withdrawal helper) appear as they come.
    for action in ("participant.withdraw", "participant.delete", "identifiers.remove", "study.restore"):
        announce_action(actor=None, study=study, action=action, object="p-1", detail="=cmd|' /C calc'!A0")
    announce_action(actor=owner, study=study, action="export.download", object="ratings.csv", address="192.0.2.1")
    printed = [row for row in _audit_command(study.slug) if row["action"] != "study.load"]  # the fixture's load
    assert [row["action"] for row in printed] == ["participant.withdraw", "participant.delete", "identifiers.remove",
                                                  "study.restore", "export.download"]
    assert printed[0]["detail"] == "'=cmd|' /C calc'!A0"  # a formula is never a live formula in the CSV
    assert printed[-1]["address"] == "192.0.2.1" and printed[-1]["actor"] == "owner"
    assert [row["action"] for row in _audit_command(study.slug, "--action", "participant.")] == [
        "participant.withdraw", "participant.delete"]

    client.force_login(owner)
    page = client.get(f"/studies/{study.slug}/audit/", {"action": "participant."})
    assert page.status_code == 200
    assert page.content.count(b'data-action="participant.') == 2 and b'data-action="study.restore"' not in page.content
    assert b'<option value="identifiers.remove">' in page.content
    body = b"".join(client.get(f"/studies/{study.slug}/audit.csv", {"action": "export.download"}).streaming_content)
    assert list(csv.reader(io.StringIO(body.decode())))[1][1:] == ["owner", "192.0.2.1", "export.download",
                                                                   "ratings.csv", ""]
    api = client.get(f"/api/studies/{study.slug}/audit/", {"action": "study.restore"}).json()
    assert [(r["action"], r["object"]) for r in api["results"]] == [("study.restore", "p-1")]


@pytest.mark.parametrize("query", [{"since": "yesterday"}, {"since": "2026-02-02", "until": "2026-01-01"},
                                   {"action": "x" * 65}])
def test_bad_filters_get_400_not_500(client, owner, study, query):
    client.force_login(owner)
    assert client.get(f"/studies/{study.slug}/audit/", query).status_code == 400
    assert client.get(f"/studies/{study.slug}/audit.csv", query).status_code == 400
    api = client.get(f"/api/studies/{study.slug}/audit/", query)
    if "until" in query:  # a well-formed query that matches nothing: the API (its schema) answers it, empty
        assert api.status_code == 200 and api.json()["results"] == []
    else:
        assert api.status_code == 400


def test_the_command_refuses_an_unknown_study(db):
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="No study"):
        call_command("audit", "--study", "no-such-study", stdout=io.StringIO())


def test_prolific_creation_state_changes_approvals_and_rejections_are_audited(owner_client, prolific, done_run):
    from analysis.models import ParticipantResult
    from prolific import selectors as prolific_selectors
    from prolific import services as prolific_services
    from surveys.models import Participant

    slug = done_run.study.slug
    assert owner_client.post(f"/studies/{slug}/prolific/create/",
                             {"reward_cents": "200", "estimated_minutes": "15"}).status_code == 200
    assert owner_client.post(f"/studies/{slug}/prolific/publish/").status_code == 200
    panel = done_run.study.panel_study
    for participant in Participant.objects.filter(study=done_run.study):
        prolific.add_submission(panel.prolific_id, participant.external_id)
    prolific_services.panel_submissions_sync(panel=panel)
    ParticipantResult.objects.filter(run=done_run).update(payable=True, reject_reason="")
    first = ParticipantResult.objects.filter(run=done_run).order_by("participant_id").first()
    ParticipantResult.objects.filter(pk=first.pk).update(payable=False, reject_reason="too_fast")
    plan = prolific_selectors.review_plan(panel=panel)
    approve = len(plan.of("approve"))
    assert owner_client.post(f"/studies/{slug}/prolific/review/", {"plan": plan.fingerprint}).status_code == 200
    trail = [(e.action, e.detail) for e in rows(study_slug=slug, action__startswith="prolific.")]
    assert trail == [("prolific.create", "reward 200 cents"), ("prolific.publish", "now ACTIVE"),
                     ("prolific.approve", f"{approve} submissions approved"),
                     ("prolific.reject", "1 submissions rejected")]
    assert all(first.participant.external_id not in detail for _, detail in trail)  # counts, never panel ids
