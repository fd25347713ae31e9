"""Reads for the Prolific round trip: the study on Prolific, the review plan, the group's members, the bonus plan."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from decimal import Decimal

from analysis import selectors as analysis_selectors
from analysis.quality import REJECT_ATTENTION, REJECT_TOO_FAST
from surveys.models import Participant, Study

from .bonus_files import BonusRow, bonus_rows, csv_bonuses
from .models import BonusLine, PanelStudy, PanelSubmission

AWAITING_REVIEW = "AWAITING REVIEW"

# Our reject reasons (DESIGN 3.2) in Prolific's rejection categories, with the message
# Prolific shows the participant (it asks for at least 100 characters).
REJECTIONS = {
    REJECT_ATTENTION: ("FAILED_CHECK", (
        "Your submission failed two or more of this study's instructed attention checks, which "
        "Prolific allows as a ground for rejection. Thank you for your time.")),
    REJECT_TOO_FAST: ("TOO_QUICKLY", (
        "Your submission was completed more than three standard deviations faster than the mean "
        "time of this study, which Prolific allows as a ground for rejection.")),
}


@dataclass(frozen=True)
class ReviewRow:
    submission_id: str
    panel_participant_id: str
    pseudonym: str
    decision: str  # approve, reject, leave
    why: str


@dataclass(frozen=True)
class ReviewPlan:
    run_id: int | None
    rows: list[ReviewRow]

    def of(self, decision: str) -> list[ReviewRow]:
        return [row for row in self.rows if row.decision == decision]

    @property
    def fingerprint(self) -> str:
        """What the researcher confirmed: a POST acts only if the plan is still the same."""
        text = "\n".join(f"{row.submission_id} {row.decision} {row.why}" for row in self.rows)
        return hashlib.sha256(f"{self.run_id}\n{text}".encode()).hexdigest()


def panel_study_of(*, study: Study) -> PanelStudy | None:
    return PanelStudy.objects.filter(study=study).first()


def submission_counts(*, panel: PanelStudy) -> dict[str, int]:
    counts: dict[str, int] = {}
    for status in panel.submissions.values_list("status", flat=True):
        counts[status] = counts.get(status, 0) + 1
    return dict(sorted(counts.items()))


def review_plan(*, panel: PanelStudy) -> ReviewPlan:
    """Every submission awaiting review, with what the latest finished run says to do and why."""
    run = analysis_selectors.analysis_run_latest_done(study=panel.study)
    results = ({result.participant_id: result for result in analysis_selectors.participant_results(run=run)}
               if run else {})
    rows = []
    submissions = (panel.submissions.filter(status=AWAITING_REVIEW).select_related("participant")
                   .order_by("submission_id"))
    for submission in submissions:
        participant = submission.participant
        result = results.get(participant.pk) if participant else None
        pseudonym = participant.pseudonym if participant else ""
        if result is None:
            decision, why = "leave", "not in the latest finished analysis run: run the analysis again"
        elif result.payable:
            decision, why = "approve", "payable"
        elif result.reject_reason in REJECTIONS:
            decision, why = "reject", result.reject_reason
        else:
            decision, why = "leave", "not payable, but no ground Prolific accepts for rejection: decide on Prolific"
        rows.append(ReviewRow(submission_id=submission.submission_id,
                              panel_participant_id=submission.panel_participant_id,
                              pseudonym=pseudonym, decision=decision, why=why))
    return ReviewPlan(run_id=run.pk if run else None, rows=rows)


def group_members(*, panel: PanelStudy) -> list[str]:
    """Prolific ids of those who completed our study or were rejected: later waves exclude them."""
    completed = Participant.objects.filter(
        study=panel.study, is_preview=False, source=Participant.Source.LIVE, status=Participant.Status.COMPLETED,
    ).values_list("external_id", flat=True)
    rejected = PanelSubmission.objects.filter(panel_study=panel, status="REJECTED").values_list(
        "panel_participant_id", flat=True)
    return sorted(set(completed) | set(rejected))


# ---------------------------------------------------------------------- bonuses


@dataclass(frozen=True)
class BonusPlanLine:
    row: BonusRow
    earlier: list[BonusLine]  # this participant's bonuses in the ledger, first first

    @property
    def number(self) -> int:
        """The number this bonus gets in the participant's ledger."""
        return len(self.earlier) + 1


@dataclass(frozen=True)
class BonusPlan:
    lines: list[BonusPlanLine]

    @property
    def already_given(self) -> list[BonusPlanLine]:
        return [line for line in self.lines if line.earlier]

    @property
    def total(self) -> Decimal:
        return sum((line.row.amount for line in self.lines), Decimal(0))

    def csv_bonuses(self) -> str:
        return csv_bonuses([line.row for line in self.lines])


def bonus_plan(*, panel: PanelStudy, data: bytes) -> BonusPlan:
    """The file's bonuses, each with what the ledger already holds for that participant (``BonusFileRefused``)."""
    rows = bonus_rows(panel=panel, data=data)
    earlier: dict[str, list[BonusLine]] = {}
    for line in panel.bonus_lines.filter(panel_participant_id__in=[row.panel_participant_id for row in rows]):
        earlier.setdefault(line.panel_participant_id, []).append(line)
    return BonusPlan([BonusPlanLine(row, earlier.get(row.panel_participant_id, [])) for row in rows])


def bonus_ledger(*, panel: PanelStudy) -> list[BonusLine]:
    """Every bonus line of the study, by participant then number."""
    return list(panel.bonus_lines.all())
