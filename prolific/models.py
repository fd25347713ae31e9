"""What we keep of a study's life on Prolific: its id there, its submissions, the bonus ledger.

The API token is never stored (it comes from the environment, ``settings.PROLIFIC_API_TOKEN``).
Rows are written only after Prolific accepted the call they record, so a failed call leaves
them as they were.
"""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from surveys.models import Participant, Study

# Prolific's submission statuses that give the place back (Prolific re-opens it too).
RELEASING_STATUSES = ("RETURNED", "TIMED-OUT", "REJECTED")


class PanelStudy(models.Model):
    """Our study's draft (then live) study on Prolific."""

    study = models.OneToOneField(Study, on_delete=models.CASCADE, related_name="panel_study")
    prolific_id = models.CharField(max_length=64, unique=True)
    # Prolific's own status word (UNPUBLISHED, ACTIVE, PAUSED, AWAITING REVIEW, COMPLETED).
    status = models.CharField(max_length=30)
    reward_cents = models.PositiveIntegerField()
    estimated_minutes = models.PositiveIntegerField()
    places = models.PositiveIntegerField()
    screened_out_code = models.CharField(max_length=40)
    failed_checks_code = models.CharField(max_length=40)
    participant_group_id = models.CharField(max_length=64, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    synced_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = "Prolific study"
        constraints = [
            models.CheckConstraint(condition=Q(reward_cents__gt=0) & Q(estimated_minutes__gt=0) & Q(places__gt=0),
                                   name="panel_study_terms_positive"),
        ]

    def __str__(self) -> str:
        return f"{self.study.slug} on Prolific ({self.prolific_id})"


class PanelSubmission(models.Model):
    """One Prolific submission, as of the last sync (or our last approve/reject)."""

    panel_study = models.ForeignKey(PanelStudy, on_delete=models.CASCADE, related_name="submissions")
    submission_id = models.CharField(max_length=64, unique=True)
    panel_participant_id = models.CharField(max_length=64)
    # Our participant with that id, once they reached us (a submission may be returned before).
    participant = models.ForeignKey(Participant, null=True, blank=True, on_delete=models.SET_NULL,
                                    related_name="panel_submissions")
    status = models.CharField(max_length=30)
    # surveys.places leaves these out of the places taken.
    releases_place = models.BooleanField(default=False)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        indexes = [models.Index(fields=["panel_study", "status"])]
        constraints = [
            # The flag always agrees with the status, whoever wrote the row.
            models.CheckConstraint(
                condition=(Q(releases_place=True) & Q(status__in=RELEASING_STATUSES))
                | (Q(releases_place=False) & ~Q(status__in=RELEASING_STATUSES)),
                name="panel_submission_release_matches_status",
            ),
        ]


class BonusPayment(models.Model):
    """One bulk bonus paid through Prolific (its lines are in the ledger, ``BonusLine``)."""

    panel_study = models.ForeignKey(PanelStudy, on_delete=models.CASCADE, related_name="bonus_payments")
    prolific_id = models.CharField(max_length=64, unique=True)
    file_sha256 = models.CharField(max_length=64)  # of the lines sent, for finding the file again
    participants = models.PositiveIntegerField()
    total_amount = models.DecimalField(max_digits=12, decimal_places=2)
    paid_at = models.DateTimeField(auto_now_add=True)


class BonusLine(models.Model):
    """The ledger: every bonus a participant was given in a study, one row each.

    A participant's first bonus is number 1; another one needs the researcher's explicit
    confirmation for that person and gets the next number. The row is written *before*
    Prolific is asked to pay, and the unique number per participant makes a second
    payment of the same bonus impossible, even for two requests at the same instant.
    """

    class State(models.TextChoices):
        RESERVED = "reserved", "being paid"
        UNCERTAIN = "uncertain", "set up on Prolific, payment not confirmed: check Prolific"
        PAID = "paid", "paid"

    panel_study = models.ForeignKey(PanelStudy, on_delete=models.CASCADE, related_name="bonus_lines")
    panel_participant_id = models.CharField(max_length=64)
    number = models.PositiveSmallIntegerField()  # 1 for the participant's first bonus in this study, 2 for a second
    amount = models.DecimalField(max_digits=8, decimal_places=2)
    state = models.CharField(max_length=10, choices=State.choices, default=State.RESERVED)
    bulk_id = models.CharField(max_length=64, blank=True)  # Prolific's id of the bulk bonus, once set up
    payment = models.ForeignKey(BonusPayment, null=True, blank=True, on_delete=models.PROTECT, related_name="lines")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["panel_participant_id", "number"]
        constraints = [
            models.UniqueConstraint(fields=["panel_study", "panel_participant_id", "number"],
                                    name="bonus_line_paid_once"),
            models.CheckConstraint(condition=Q(amount__gt=0) & Q(number__gte=1), name="bonus_line_amount_positive"),
            models.CheckConstraint(condition=Q(state="paid", payment__isnull=False)
                                   | (~Q(state="paid") & Q(payment__isnull=True)),
                                   name="bonus_line_paid_has_payment"),
        ]

    def __str__(self) -> str:
        return f"bonus {self.number} of {self.panel_participant_id}: {self.amount} ({self.state})"
