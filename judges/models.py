"""Judges (LLM or metric) that answer the blocks a participant answers, and their answers.

A judge answers on the study's own questions: a rating per response and dimension, or the
pairwise choice between the two responses it was shown. Its presentation (order of the
blocks and the responses, the pair shown) is drawn from its own ``seed`` exactly as a
participant's is (``surveys.services.sequence_plan``).
"""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from surveys.models import Block, Dimension, Item, Study

#: A judge's name: lower case, digits and ``. _ -``; it becomes a column value of judges.csv.
NAME_PATTERN = r"^[a-z0-9][a-z0-9._-]{0,59}$"


class Judge(models.Model):
    class Kind(models.TextChoices):
        LLM = "llm", "LLM"
        METRIC = "metric", "Automatic metric"
        OTHER = "other", "Other (imported)"

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="judges")
    name = models.CharField(max_length=60)
    kind = models.CharField(max_length=10, choices=Kind.choices, default=Kind.OTHER)
    # The presentation is drawn from it, as a participant's is from theirs.
    seed = models.BigIntegerField(default=0)
    model = models.CharField(max_length=200, blank=True)
    prompt_template = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["study", "name"]
        constraints = [
            models.UniqueConstraint(fields=["study", "name"], name="judge_unique_name"),
            models.CheckConstraint(condition=Q(kind__in=["llm", "metric", "other"]), name="judge_kind_known"),
            models.CheckConstraint(condition=Q(name__regex=NAME_PATTERN), name="judge_name_shape"),
        ]

    def __str__(self) -> str:
        return f"{self.study.slug}: {self.name} ({self.kind})"


class JudgeRun(models.Model):
    """One run of an LLM judge over the study's blocks; resumable (its calls are kept one row each)."""

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"
        CAPPED = "capped", "Stopped at the cost cap"

    judge = models.ForeignKey(Judge, on_delete=models.CASCADE, related_name="runs")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    both_orders = models.BooleanField(default=True, help_text="pairwise: ask again with left and right swapped")
    requests_per_minute = models.PositiveIntegerField(default=60)
    cost_cap = models.DecimalField(max_digits=10, decimal_places=4, default=1)
    cost = models.DecimalField(max_digits=10, decimal_places=4, default=0)
    # [[block id, [item ids in the order shown], swapped], ...]: drawn once at creation from the judge's seed,
    # so a resumed run asks exactly the prompts it began with.
    plan = models.JSONField(default=list)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.CheckConstraint(condition=Q(status__in=["queued", "running", "done", "failed", "capped"]),
                                   name="judge_run_status_known"),
            models.CheckConstraint(condition=Q(cost__gte=0) & Q(cost_cap__gte=0), name="judge_run_cost_positive"),
        ]


class JudgeCall(models.Model):
    """One prompt of a run (a block in one order) and the endpoint's reply.

    Written with the answers parsed from it in one transaction, so a run killed between calls
    resumes at the first prompt without a row, and no prompt is sent twice."""

    run = models.ForeignKey(JudgeRun, on_delete=models.CASCADE, related_name="calls")
    block = models.ForeignKey(Block, on_delete=models.CASCADE, related_name="+")
    swapped = models.BooleanField(default=False)
    raw = models.TextField()
    parsed = models.BooleanField()
    prompt_tokens = models.PositiveIntegerField(default=0)
    completion_tokens = models.PositiveIntegerField(default=0)
    cost = models.DecimalField(max_digits=10, decimal_places=6, default=0)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["run", "block", "swapped"], name="judge_call_once"),
        ]


class JudgeAnswer(models.Model):
    """What a judge answered on one response (a rating, its rank, most = 1 / least = -1) or one pair (a pairwise
    choice).

    ``position`` is where the judge was shown the response (1 = first / left). ``raw`` keeps the
    judge's reply (or the imported line) so an answer can always be traced back to it."""

    class Question(models.TextChoices):
        RATING = "rating", "Rating"
        PAIRWISE = "pairwise", "Pairwise choice"
        RANK = "rank", "Rank within the block"
        BEST_WORST = "best_worst", "Most or least"

    class Preference(models.TextChoices):
        LEFT = "left", "Left"
        RIGHT = "right", "Right"
        TIE = "tie", "Tie"
        BOTH_BAD = "both_bad", "Both bad"

    judge = models.ForeignKey(Judge, on_delete=models.CASCADE, related_name="answers")
    call = models.ForeignKey(JudgeCall, on_delete=models.CASCADE, null=True, blank=True, related_name="answers")
    block = models.ForeignKey(Block, on_delete=models.CASCADE, related_name="+")
    question = models.CharField(max_length=10, choices=Question.choices)
    item = models.ForeignKey(Item, on_delete=models.CASCADE, null=True, blank=True, related_name="+")
    dimension = models.ForeignKey(Dimension, on_delete=models.CASCADE, null=True, blank=True, related_name="+")
    value = models.FloatField(null=True, blank=True)
    position = models.PositiveSmallIntegerField(null=True, blank=True)
    left_item = models.ForeignKey(Item, on_delete=models.CASCADE, null=True, blank=True, related_name="+")
    right_item = models.ForeignKey(Item, on_delete=models.CASCADE, null=True, blank=True, related_name="+")
    preference = models.CharField(max_length=8, choices=Preference.choices, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["judge", "item", "dimension"], condition=Q(question="rating"),
                                    name="judge_rating_once"),
            models.UniqueConstraint(fields=["judge", "left_item", "right_item"], condition=Q(question="pairwise"),
                                    name="judge_pair_once_per_order"),
            # A judge ranks a response once, and picks it as most or least at most once.
            models.UniqueConstraint(fields=["judge", "item"], condition=Q(question="rank"), name="judge_rank_once"),
            models.UniqueConstraint(fields=["judge", "item"], condition=Q(question="best_worst"),
                                    name="judge_best_worst_once"),
            models.CheckConstraint(
                condition=(Q(question="rating", item__isnull=False, dimension__isnull=False, value__isnull=False)
                           | Q(question="pairwise", left_item__isnull=False, right_item__isnull=False,
                               preference__in=["left", "right", "tie", "both_bad"])
                           | Q(question="rank", item__isnull=False, value__gte=1)
                           | Q(question="best_worst", item__isnull=False, value__in=[1, -1])),
                name="judge_answer_shape"),
        ]
