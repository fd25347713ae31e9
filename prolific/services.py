"""Writes of the Prolific round trip. Each calls Prolific first and records only what it accepted.

A failure from Prolific (refusal, error, time-out) raises ``ProlificError`` before
anything here is written, so our rows never claim what Prolific did not do.
Refusals of ours (a study that cannot go to Prolific, a bad bonus file) raise
``PanelRefused`` before anything is sent.
"""

from __future__ import annotations

import hashlib
import logging
import secrets
from collections.abc import Collection
from dataclasses import dataclass
from urllib.parse import quote

from django.conf import settings
from django.db import IntegrityError, transaction
from django.urls import reverse

from surveys.allocation import allocation_reconcile
from surveys.models import Participant, Study
from web import clock

from . import selectors
from .client import ProlificClient, ProlificError
from .errors import PanelRefused
from .models import RELEASING_STATUSES, BonusLine, BonusPayment, PanelStudy, PanelSubmission

log = logging.getLogger(__name__)

TRANSITIONS = {"publish": "PUBLISH", "pause": "PAUSE", "resume": "START"}


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
    if not study.participant_title:
        # Prolific shows a study's name to participants; the researchers' title may name the systems compared.
        return 'set "participant_title" in the study\'s definition: Prolific shows it to participants as the name'
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
        # Participants see the name and description on Prolific: only participant-facing texts, never the
        # researchers' title or description (they may name the systems compared); researchers see internal_name.
        "name": study.participant_title, "internal_name": f"{study.slug}: {study.title}"[:255],
        "description": study.instructions_text,
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


def _earlier_text(line: selectors.BonusPlanLine) -> str:
    given = ", ".join(f"{earlier.amount} ({earlier.get_state_display()}, {earlier.created_at:%Y-%m-%d %H:%M} UTC)"
                      for earlier in line.earlier)
    return f"{line.row.pseudonym or line.row.panel_participant_id}: {given}"


def _reserve(panel: PanelStudy, plan: selectors.BonusPlan) -> list[int]:
    """Write the plan's lines to the ledger before anything is paid; the unique number refuses a second writer."""
    try:
        with transaction.atomic():
            return [BonusLine.objects.create(panel_study=panel, panel_participant_id=line.row.panel_participant_id,
                                             number=line.number, amount=line.row.amount).pk
                    for line in plan.lines]
    except IntegrityError:
        raise PanelRefused("some of these bonuses were paid meanwhile (another request): look at the bonuses "
                           "again before paying") from None


def bonuses_pay(*, panel: PanelStudy, data: bytes, pay_again: Collection[str] = (),
                client: ProlificClient | None = None) -> BonusPayment:
    """Pay the bonuses of a CSV file through Prolific, each participant at most once.

    A participant who already has a bonus in this study's ledger is paid again only if
    their Prolific id is in ``pay_again`` (the researcher's explicit, per-person
    confirmation); otherwise the whole file is refused, listing what they were given.
    The lines enter the ledger before Prolific is called: a failed set-up takes them
    out again, a failed pay call leaves them as "uncertain" (Prolific may have paid).
    """
    plan = selectors.bonus_plan(panel=panel, data=data)
    unconfirmed = [line for line in plan.already_given if line.row.panel_participant_id not in pay_again]
    if unconfirmed:
        raise PanelRefused("already paid a bonus in this study (a second one needs your confirmation for each person): "
                           + "; ".join(_earlier_text(line) for line in unconfirmed[:10])
                           + (f" (and {len(unconfirmed) - 10} more)" if len(unconfirmed) > 10 else ""))
    line_ids = _reserve(panel, plan)
    lines = BonusLine.objects.filter(pk__in=line_ids)
    csv_bonuses = plan.csv_bonuses()
    client = client or ProlificClient()
    try:
        bulk = client.bonus_setup(panel.prolific_id, csv_bonuses)
    except ProlificError:
        lines.delete()  # nothing can be paid without a set-up
        raise
    lines.update(bulk_id=bulk["id"])
    try:
        client.bonus_pay(bulk["id"])
    except ProlificError as exc:
        lines.update(state=BonusLine.State.UNCERTAIN)
        raise ProlificError(f"{exc}. The bonuses were set up on Prolific (id {bulk['id']}) but may not be paid: "
                            "check Prolific before trying again. The ledger keeps them as possibly paid: paying them "
                            "again needs your confirmation for each person") from None
    with transaction.atomic():
        payment = BonusPayment.objects.create(
            panel_study=panel, prolific_id=bulk["id"], file_sha256=hashlib.sha256(csv_bonuses.encode()).hexdigest(),
            participants=len(plan.lines), total_amount=plan.total,
        )
        lines.update(state=BonusLine.State.PAID, payment=payment)
    return payment


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
