"""The bonus ledger: nobody is paid a bonus twice in a study unless the researcher confirms it for that person
(issue 30, item 4), counted as the bonus calls the fake Prolific server received."""

from __future__ import annotations

import html
from decimal import Decimal

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command

from audit.models import AuditEvent
from prolific import services
from prolific.models import BonusLine, BonusPayment, PanelStudy
from tests.support.threads import in_threads

P1, P2, P3 = "1" * 24, "2" * 24, "3" * 24
PAY = r"/api/v1/bulk-bonus-payments/\w+/pay/"


@pytest.fixture
def panel(prolific, tide) -> PanelStudy:
    tide.target_completions = 10
    tide.save()
    panel = services.panel_study_create(study=tide, reward_cents=250, estimated_minutes=20, base_url="https://x")
    for person in (P1, P2, P3):
        prolific.add_submission(panel.prolific_id, person)
    services.panel_submissions_sync(panel=panel)
    return panel


def _paid_lines(prolific) -> list[tuple[str, str]]:
    """Every (participant, amount) line of every bulk bonus Prolific paid."""
    return sorted((who, amount) for bulk in prolific.bonuses.values() if bulk["paid"] for who, amount in bulk["lines"])


@pytest.mark.parametrize("again", [
    f"{P2},2.00\n{P1},1.50\n",  # the same lines reversed
    f"{P1},1.5\n{P2},2\n",  # the same amounts written otherwise
    f"participant,amount\n{P1},1.50\n{P2},2.00\n",  # with a header
    f"{P1},3.00\n{P3},1.00\n",  # one of them again, with a new person
])
def test_a_participant_paid_once_is_never_paid_again_unasked(prolific, panel, again):
    services.bonuses_pay(panel=panel, data=f"{P1},1.50\n{P2},2.00\n".encode())
    with pytest.raises(services.PanelRefused, match=f"already paid a bonus in this study .*{P1}: 1.50 \\(paid"):
        services.bonuses_pay(panel=panel, data=again.encode())
    assert len(prolific.calls("POST", PAY)) == 1 and _paid_lines(prolific) == [(P1, "1.50"), (P2, "2.00")]
    assert prolific.calls("POST", "/api/v1/submissions/bonus-payments/")[1:] == []  # nothing was even set up


def test_a_second_bonus_is_paid_for_exactly_the_people_confirmed(prolific, panel):
    services.bonuses_pay(panel=panel, data=f"{P1},1.50\n{P2},2.00\n".encode())
    with pytest.raises(services.PanelRefused, match=P2):  # P1 confirmed, P2 not: nothing is paid
        services.bonuses_pay(panel=panel, data=f"{P1},1.00\n{P2},1.00\n{P3},1.00\n".encode(), pay_again={P1})
    payment = services.bonuses_pay(panel=panel, data=f"{P1},1.00\n{P3},1.00\n".encode(), pay_again={P1})
    assert (payment.participants, payment.total_amount) == (2, Decimal("2.00"))
    assert _paid_lines(prolific) == [(P1, "1.00"), (P1, "1.50"), (P2, "2.00"), (P3, "1.00")]
    ledger = list(BonusLine.objects.values_list("panel_participant_id", "number", "amount", "state"))
    assert ledger == [(P1, 1, Decimal("1.50"), "paid"), (P1, 2, Decimal("1.00"), "paid"),
                      (P2, 1, Decimal("2.00"), "paid"), (P3, 1, Decimal("1.00"), "paid")]


def test_a_bonus_whose_payment_failed_is_not_paid_again_unasked(prolific, panel):
    prolific.fail_next("POST", PAY, 503)
    with pytest.raises(services.ProlificError, match="may not be paid"):
        services.bonuses_pay(panel=panel, data=f"{P1},1.50\n".encode())
    with pytest.raises(services.PanelRefused, match="set up on Prolific, payment not confirmed"):
        services.bonuses_pay(panel=panel, data=f"{P1},1.50\n".encode())
    services.bonuses_pay(panel=panel, data=f"{P1},1.50\n".encode(), pay_again={P1})  # checked on Prolific: not paid
    assert list(BonusLine.objects.values_list("number", "state")) == [(1, "uncertain"), (2, "paid")]


def test_a_failed_set_up_leaves_nothing_in_the_ledger(prolific, panel):
    prolific.fail_next("POST", "/api/v1/submissions/bonus-payments/", 500)
    with pytest.raises(services.ProlificError):
        services.bonuses_pay(panel=panel, data=f"{P1},1.50\n".encode())
    assert not BonusLine.objects.exists()
    services.bonuses_pay(panel=panel, data=f"{P1},1.50\n".encode())  # nothing was paid: the first bonus still
    assert _paid_lines(prolific) == [(P1, "1.50")]


def test_the_same_file_paid_at_the_same_instant_is_paid_once(transactional_db, prolific, panel):
    def pay(i):
        try:
            return services.bonuses_pay(panel=panel, data=f"{P1},1.50\n{P2},2.00\n".encode()).pk
        except services.PanelRefused as refusal:
            return str(refusal)

    results = in_threads(8, pay)
    assert sum(isinstance(result, int) for result in results) == 1, results
    assert len(prolific.calls("POST", PAY)) == 1 and _paid_lines(prolific) == [(P1, "1.50"), (P2, "2.00")]
    assert BonusPayment.objects.count() == 1 and BonusLine.objects.count() == 2


def test_the_command_pays_a_second_bonus_only_for_the_people_named(prolific, panel, tmp_path, capsys):
    bonus_file = tmp_path / "bonus.csv"
    bonus_file.write_text(f"{P1},1.50\n{P2},2.00\n")
    call_command("prolific", "--study", panel.study.slug, "bonus", str(bonus_file))
    with pytest.raises(CommandError, match="already paid a bonus"):
        call_command("prolific", "--study", panel.study.slug, "bonus", str(bonus_file))
    call_command("prolific", "--study", panel.study.slug, "bonus", str(bonus_file), "--pay-again", P1, "--pay-again", P2)
    assert "2 bonuses paid, 3.50 in all" in capsys.readouterr().out
    assert len(prolific.calls("POST", PAY)) == 2
    # Both payments are in the audit trail; the refused one is not.
    trail = list(AuditEvent.objects.filter(study_slug=panel.study.slug, action="prolific.bonus")
                 .order_by("id").values_list("actor", "detail"))
    assert [(actor, detail.split(",")[0]) for actor, detail in trail] == [
        ("", "manage.py prolific: 2 bonuses paid"), ("", "manage.py prolific: 2 bonuses paid")]


# ---------------------------------------------------------------- the page


def _check_file(client, panel, text: str):
    upload = SimpleUploadedFile("bonus.csv", text.encode(), content_type="text/csv")
    return client.post(f"/studies/{panel.study.slug}/prolific/bonuses/", {"file": upload})


def test_the_page_shows_the_lines_already_paid_and_pays_again_only_the_ticked_people(owner_client, owner, panel,
                                                                                     prolific):
    panel.study.owners.add(owner)
    url = f"/studies/{panel.study.slug}/prolific/bonuses/"
    assert f'href="{url}"' in owner_client.get(f"/studies/{panel.study.slug}/prolific/").content.decode()
    first = _check_file(owner_client, panel, f"{P1},1.50\n{P2},2.00\n")
    assert first.status_code == 200 and b"data-already-paid" not in first.content and prolific.calls("POST", PAY) == []
    assert owner_client.post(url, {"line": [f"{P1},1.50", f"{P2},2.00"]}).status_code == 200
    assert len(prolific.calls("POST", PAY)) == 1

    again = _check_file(owner_client, panel, f"{P2},2\n{P1},1.5\n{P3},1\n")  # reordered, amounts written otherwise
    page = again.content.decode()
    assert again.status_code == 200 and page.count("<tr data-already-paid>") == 2
    assert f'name="pay_again" value="{P1}"' in page and f'name="pay_again" value="{P3}"' not in page
    assert "1.50: paid" in page and "2.00: paid" in page and "bonus number 2" in page
    assert prolific.calls("POST", PAY)[1:] == []  # checking a file pays nothing

    lines = [f"{P1},1.50", f"{P2},2.00", f"{P3},1.00"]
    refused = owner_client.post(url, {"line": lines, "pay_again": [P1]})  # P2 left unticked
    assert refused.status_code == 400 and "already paid a bonus" in refused.content.decode()
    assert len(prolific.calls("POST", PAY)) == 1 and b'name="pay_again"' in refused.content  # shown again to decide
    paid = owner_client.post(url, {"line": lines, "pay_again": [P1, P2]})
    assert paid.status_code == 200 and "3 bonuses paid on Prolific, 4.50 in all" in paid.content.decode()
    trail = list(AuditEvent.objects.filter(study_slug=panel.study.slug, action="prolific.bonus")
                 .order_by("id").values_list("actor", "detail"))
    assert [(actor, detail.split(" (")[0]) for actor, detail in trail] == [
        (owner.username, "2 bonuses, 3.50 in all"), (owner.username, "3 bonuses, 4.50 in all")]
    assert _paid_lines(prolific) == [(P1, "1.50"), (P1, "1.50"), (P2, "2.00"), (P2, "2.00"), (P3, "1.00")]
    assert len(prolific.calls("POST", PAY)) == 2


@pytest.mark.parametrize("post, expected", [
    ({}, "This field is required"),
    ({"file": SimpleUploadedFile("b.csv", b"nobody,1\n")}, "is no participant of this study"),
    ({"line": [f"{P1},abc"]}, "is not between"),
])
def test_a_bad_bonus_upload_answers_400_and_pays_nothing(owner_client, owner, panel, prolific, post, expected):
    panel.study.owners.add(owner)
    response = owner_client.post(f"/studies/{panel.study.slug}/prolific/bonuses/", post)
    assert response.status_code == 400 and expected in html.unescape(response.content.decode())
    assert prolific.calls("POST", ".*bonus.*") == [] and not BonusLine.objects.exists()


def test_only_owners_see_the_bonus_page(client, other, panel, prolific):
    client.force_login(other)
    url = f"/studies/{panel.study.slug}/prolific/bonuses/"
    assert client.get(url).status_code == 404
    assert client.post(url, {"line": [f"{P1},1.00"]}).status_code == 404
    assert prolific.calls("POST", ".*bonus.*") == []
