"""Writes of the Prolific round trip. Each calls Prolific first and records only what it accepted.

A failure from Prolific (refusal, error, time-out) raises ``ProlificError`` before
anything here is written, so our rows never claim what Prolific did not do.
Refusals of ours (a study that cannot go to Prolific, a bad bonus file) raise
``PanelRefused`` before anything is sent.
"""

from __future__ import annotations

import csv
import hashlib
import io
import logging
import secrets
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from urllib.parse import quote

from django.conf import settings
from django.db import transaction
from django.urls import reverse

from surveys import clock
from surveys.allocation import allocation_reconcile
from surveys.models import Participant, Study

from . import selectors
from .client import ProlificClient, ProlificError
from .models import RELEASING_STATUSES, BonusPayment, PanelStudy, PanelSubmission

log = logging.getLogger(__name__)

TRANSITIONS = {"publish": "PUBLISH", "pause": "PAUSE", "resume": "START"}
MAX_BONUS = Decimal("100.00")  # per participant: a typo such as 425 for 4.25 is refused


class PanelRefused(ValueError):
    """Our side refuses (the message says why); nothing was sent to Prolific."""


@dataclass(frozen=True)
class SyncSummary:
    submissions: int
    changed: int
    released: int


@dataclass(frozen=True)
class ReviewDone:
    approved: int
    rejected: int


# -------------------------------------------------------------------- the study


def study_url(*, study: Study, base_url: str) -> str:
    """Our entry link with Prolific's placeholders in the study's own URL parameters."""
    placeholders = [(study.id_param, "{{%PROLIFIC_PID%}}"), (study.study_param, "{{%STUDY_ID%}}"),
                    (study.session_param, "{{%SESSION_ID%}}")]
    query = "&".join(f"{quote(name)}={value}" for name, value in placeholders if name)
    return base_url.rstrip("/") + reverse("surveys:entry", args=[study.slug]) + "?" + query


def _draft_problem(study: Study, reward_cents: int, minutes: int | None) -> str | None:
    if study.recruitment_mode != Study.RecruitmentMode.PANEL:
        return f'study "{study.slug}" recruits with mode "{study.recruitment_mode}"; Prolific needs a panel study'
    if PanelStudy.objects.filter(study=study).exists():
        return f'study "{study.slug}" already has a study on Prolific'
    if not study.target_completions:
        return 'set "target_completions" in the study\'s recruitment: it is the number of places on Prolific'
    if not minutes or minutes <= 0:
        return 'give the estimated minutes (or set "estimated_minutes" in the study\'s recruitment)'
    if reward_cents <= 0:
        return "the reward is a positive number of cents (pence)"
    return None


def panel_study_create(*, study: Study, reward_cents: int, base_url: str, estimated_minutes: int | None = None,
                       client: ProlificClient | None = None) -> PanelStudy:
    """A draft (unpublished) study on Prolific made from ours; its id is kept on ``PanelStudy``."""
    minutes = estimated_minutes or study.estimated_minutes
    if problem := _draft_problem(study, reward_cents, minutes):
        raise PanelRefused(problem)
    screened_out, failed_checks = (f"SO{secrets.token_hex(4).upper()}", f"FC{secrets.token_hex(4).upper()}")
    review = [{"action": "MANUALLY_REVIEW"}]  # our approve step decides, from the quality rules
    payload = {
        "name": study.title, "internal_name": study.slug,
        "description": study.description or study.title,
        "external_study_url": study_url(study=study, base_url=base_url),
        "prolific_id_option": "url_parameters",
        "completion_codes": [
            {"code": study.completion_code, "code_type": "COMPLETED", "actions": review},
            {"code": screened_out, "code_type": "SCREENED_OUT", "actions": review},
            {"code": failed_checks, "code_type": "FAILED_ATTENTION_CHECK", "actions": review},
        ],
        "total_available_places": study.target_completions,
        "estimated_completion_time": minutes,
        "reward": reward_cents,
        "device_compatibility": ["desktop", "tablet", "mobile"],
    }
    created = (client or ProlificClient()).study_create(payload)
    if not created.get("id"):
        raise ProlificError("Prolific created the study but gave no id; look for it on Prolific before retrying")
    return PanelStudy.objects.create(
        study=study, prolific_id=created["id"], status=created.get("status", "UNPUBLISHED"),
        reward_cents=reward_cents, estimated_minutes=minutes, places=study.target_completions,
        screened_out_code=screened_out, failed_checks_code=failed_checks,
    )


def panel_study_transition(*, panel: PanelStudy, action: str, client: ProlificClient | None = None) -> PanelStudy:
    """Publish, pause or resume the study on Prolific."""
    if action not in TRANSITIONS:
        raise PanelRefused(f"unknown action {action!r}: one of {', '.join(TRANSITIONS)}")
    answer = (client or ProlificClient()).study_transition(panel.prolific_id, TRANSITIONS[action])
    panel.status = answer.get("status") or panel.status
    panel.save(update_fields=["status"])
    return panel


# ------------------------------------------------------------------ submissions


def panel_submissions_sync(*, panel: PanelStudy, client: ProlificClient | None = None) -> SyncSummary:
    """Store the study's status and each submission's; returned, timed-out and rejected ones free their place.

    Idempotent: a second sync with nothing new changes nothing."""
    client = client or ProlificClient()
    study_status = client.study_get(panel.prolific_id).get("status") or panel.status
    submissions = client.submissions(panel.prolific_id)
    ours = dict(Participant.objects.filter(
        study=panel.study, external_id__in=[s.get("participant_id", "") for s in submissions],
    ).values_list("external_id", "pk"))
    known = {row.submission_id: row for row in panel.submissions.all()}
    changed = 0
    with transaction.atomic():
        for item in submissions:
            status, participant_id = item.get("status", ""), item.get("participant_id", "")
            row = known.get(item.get("id"))
            values = {"status": status, "panel_participant_id": participant_id,
                      "participant_id": ours.get(participant_id), "releases_place": status in RELEASING_STATUSES}
            if row is not None and all(getattr(row, name) == value for name, value in values.items()):
                continue
            PanelSubmission.objects.update_or_create(submission_id=item["id"],
                                                     defaults={"panel_study": panel, **values})
            changed += 1
        panel.synced_at, panel.status = clock.now(), study_status
        panel.save(update_fields=["synced_at", "status"])
    # Returned, timed-out and rejected submissions give their blocks back to the pool.
    allocation_reconcile(study=panel.study)
    released = panel.submissions.filter(releases_place=True).count()
    return SyncSummary(submissions=len(submissions), changed=changed, released=released)


def panel_studies_sync_all() -> dict[str, str]:
    """The beat task's pass over every study on Prolific; one failing study does not stop the others."""
    if not settings.PROLIFIC_API_TOKEN:
        return {}
    outcome = {}
    for panel in PanelStudy.objects.exclude(status="COMPLETED").select_related("study"):
        try:
            summary = panel_submissions_sync(panel=panel)
            outcome[panel.study.slug] = f"{summary.submissions} submissions, {summary.changed} changed"
        except ProlificError as exc:
            log.warning("Prolific sync of %s failed: %s", panel.study.slug, exc)
            outcome[panel.study.slug] = str(exc)
    return outcome


def review_apply(*, panel: PanelStudy, confirmed_fingerprint: str,
                 client: ProlificClient | None = None) -> ReviewDone:
    """Approve and reject what the researcher confirmed (the plan must not have changed since)."""
    plan = selectors.review_plan(panel=panel)
    if plan.fingerprint != confirmed_fingerprint:
        raise PanelRefused("the list changed since you confirmed it (a sync or a new analysis run): review it again")
    client = client or ProlificClient()
    approve = [row.submission_id for row in plan.of("approve")]
    if approve:
        client.submissions_bulk_approve(panel.prolific_id, approve)
        PanelSubmission.objects.filter(submission_id__in=approve).update(status="APPROVED", releases_place=False)
    rejected = 0
    for row in plan.of("reject"):
        category, message = selectors.REJECTIONS[row.why]
        try:
            client.submission_reject(row.submission_id, category=category, message=message)
        except ProlificError as exc:
            raise ProlificError(f"{len(approve)} approved and {rejected} rejected; then: {exc}") from None
        PanelSubmission.objects.filter(submission_id=row.submission_id).update(status="REJECTED", releases_place=True)
        rejected += 1
    return ReviewDone(approved=len(approve), rejected=rejected)


# ---------------------------------------------------------------------- bonuses


def _bonus_rows(panel: PanelStudy, text: str) -> list[tuple[str, Decimal]]:
    """(Prolific id, amount) per line of ``participant,amount``; every problem at once."""
    study = panel.study
    by_pseudonym = dict(Participant.objects.filter(study=study).values_list("pseudonym", "external_id"))
    panel_ids = set(Participant.objects.filter(study=study).values_list("external_id", flat=True))
    panel_ids |= set(panel.submissions.values_list("panel_participant_id", flat=True))
    rows, problems, seen = [], [], set()
    for number, fields in enumerate(csv.reader(io.StringIO(text)), start=1):
        if not fields or not "".join(fields).strip():
            continue
        if number == 1 and fields[-1].strip().lower() in {"amount", "bonus"}:
            continue  # a header
        if len(fields) != 2:
            problems.append(f"line {number}: two columns expected (participant, amount)")
            continue
        who, amount_text = fields[0].strip(), fields[1].strip()
        panel_id = by_pseudonym.get(who) or (who if who in panel_ids else None)
        try:
            amount = Decimal(amount_text)
            valid = amount.is_finite() and Decimal(0) < amount <= MAX_BONUS and amount == amount.quantize(Decimal("0.01"))
        except InvalidOperation:
            valid = False
        if panel_id is None:
            problems.append(f"line {number}: {who[:40]!r} is no participant of this study (pseudonym or panel id)")
        elif not valid:
            problems.append(f"line {number}: amount {amount_text[:20]!r} is not between 0.01 and {MAX_BONUS}")
        elif panel_id in seen:
            problems.append(f"line {number}: {who[:40]!r} is given a bonus twice")
        else:
            seen.add(panel_id)
            rows.append((panel_id, amount))
    if problems:
        raise PanelRefused("; ".join(problems[:10]) + (f" (and {len(problems) - 10} more)" if len(problems) > 10 else ""))
    if not rows:
        raise PanelRefused("the file has no bonus: one line per participant, e.g. 5f1a...,1.50")
    return rows


def bonuses_pay(*, panel: PanelStudy, data: bytes, client: ProlificClient | None = None) -> BonusPayment:
    """Set up the bonuses of a CSV file on Prolific, then pay them (a file is paid once)."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise PanelRefused("the bonus file is not UTF-8 text") from None
    rows = _bonus_rows(panel, text)
    csv_bonuses = "\n".join(f"{panel_id},{amount}" for panel_id, amount in rows)
    digest = hashlib.sha256(csv_bonuses.encode()).hexdigest()
    if panel.bonus_payments.filter(file_sha256=digest).exists():
        raise PanelRefused("these bonuses were already paid (the same participants and amounts)")
    client = client or ProlificClient()
    bulk = client.bonus_setup(panel.prolific_id, csv_bonuses)
    try:
        client.bonus_pay(bulk["id"])
    except ProlificError as exc:
        raise ProlificError(f"{exc}. The bonuses were set up on Prolific (id {bulk['id']}) but may not be paid: "
                            "check Prolific before trying again") from None
    return BonusPayment.objects.create(
        panel_study=panel, prolific_id=bulk["id"], file_sha256=digest, participants=len(rows),
        total_amount=sum((amount for _, amount in rows), Decimal(0)),
    )


# ------------------------------------------------------------ participant group


def group_update(*, panel: PanelStudy, client: ProlificClient | None = None) -> int:
    """Put completed and rejected participants in the study's Prolific group (created on first use)."""
    members = selectors.group_members(panel=panel)
    if not members:
        raise PanelRefused("nobody has completed or been rejected yet")
    client = client or ProlificClient()
    if panel.participant_group_id:
        client.group_add(panel.participant_group_id, members)
        return len(members)
    if not settings.PROLIFIC_WORKSPACE_ID:
        raise PanelRefused("set PROLIFIC_WORKSPACE_ID (Prolific creates participant groups in a workspace)")
    group = client.group_create(workspace_id=settings.PROLIFIC_WORKSPACE_ID,
                                name=f"{panel.study.slug}: took part", participant_ids=members)
    panel.participant_group_id = group["id"]
    panel.save(update_fields=["participant_group_id"])
    return len(members)
