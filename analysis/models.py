"""Gold scores, analysis runs and everything a run persists.

Results are keyed by run, so a retried task overwrites its own rows. Exports
and the API only ever show the tables of a run whose status is ``done``; the
results page also shows those of a running run as they land (the paper's
first), listing the ones still computing (``AnalysisRun.pending``).
"""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from surveys.models import Item, Participant, Study


class GoldScore(models.Model):
    item = models.OneToOneField(Item, on_delete=models.CASCADE, related_name="gold")
    score = models.FloatField()
    updated_at = models.DateTimeField(auto_now=True)


class AnalysisRun(models.Model):
    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="analysis_runs")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    thresholds = models.JSONField(default=dict)
    requested_by = models.CharField(max_length=150, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    attempts = models.PositiveIntegerField(default=0)
    step = models.CharField(max_length=50, blank=True)
    timings = models.JSONField(default=dict)
    error = models.TextField(blank=True)
    # table name -> "ErrorType: message" for each analysis that raised; the run is
    # still done (the other tables stand) and its results page lists these.
    failures = models.JSONField(default=dict, blank=True)
    # Names of the statistics tables this attempt still computes. Its tables land
    # in stages (the paper's first, then each part task's), and the run is done
    # only when this is empty: the last part to land finishes it.
    pending = models.JSONField(default=list, blank=True)
    # When this attempt last sent its part tasks (null before its paper's tables
    # landed), and the tables of the parts a worker has begun: a pending table
    # in no begun part long after the sending lost its message to a broker
    # outage, and is sent again (``analysis.running.runs.analysis_run_parts_resend``).
    parts_sent_at = models.DateTimeField(null=True, blank=True)
    parts_started = models.JSONField(default=list, blank=True)
    n_participants = models.PositiveIntegerField(default=0)
    n_retained = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(status__in=["queued", "running", "done", "failed"]), name="run_status_known"
            ),
            models.CheckConstraint(
                condition=~Q(status="done") | Q(finished_at__isnull=False), name="run_done_has_finish_time"
            ),
            # A run whose tables are not all in is not done.
            models.CheckConstraint(condition=~Q(status="done") | Q(pending=[]), name="run_done_has_no_pending_table"),
        ]

    def __str__(self) -> str:
        return f"run {self.pk} of {self.study_id} ({self.status})"


class ParticipantResult(models.Model):
    run = models.ForeignKey(AnalysisRun, on_delete=models.CASCADE, related_name="participant_results")
    participant = models.ForeignKey(Participant, on_delete=models.CASCADE, related_name="results")
    duration_minutes = models.FloatField(null=True)
    sd = models.FloatField(null=True)
    mae = models.FloatField(null=True)
    fast_share = models.FloatField(null=True)
    attention_failures = models.PositiveIntegerField(default=0)
    excluded_by = models.CharField(max_length=20, blank=True)
    payable = models.BooleanField(default=True)
    reject_reason = models.CharField(max_length=40, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["run", "participant"], name="result_unique_participant"),
            models.CheckConstraint(
                condition=Q(excluded_by__in=["", "incomplete", "attention", "duration", "speed", "straightlining"]),
                name="result_rule_known",
            ),
        ]


class StoredTable(models.Model):
    """One tidy table of a run, stored as records; each kind of run has its own table model, with its ``run``."""

    name = models.CharField(max_length=60)
    columns = models.JSONField(default=list)
    rows = models.JSONField(default=list)
    note = models.TextField(blank=True)

    class Meta:
        abstract = True


class ResultTable(StoredTable):
    """One table of an analysis run (filter_flow, win_table, ttests, ...)."""

    run = models.ForeignKey(AnalysisRun, on_delete=models.CASCADE, related_name="tables")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["run", "name"], name="result_table_unique_name")]


class EmbeddingCache(models.Model):
    """Sentence embeddings by text hash, so each text is encoded once per model."""

    model_name = models.CharField(max_length=100)
    text_hash = models.CharField(max_length=64)
    vector = models.BinaryField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["model_name", "text_hash"], name="embedding_unique_text"),
        ]


class MetricsRun(models.Model):
    """One computation of the automatic metrics of a study (issue 9).

    Kept apart from ``AnalysisRun`` so that nothing reading analysis runs
    (exports, result pages) can pick up a metrics run by mistake. Claimed and
    finished exactly like an analysis run (see ``analysis.services``).
    """

    Status = AnalysisRun.Status

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="metrics_runs")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    requested_by = models.CharField(max_length=150, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    attempts = models.PositiveIntegerField(default=0)
    step = models.CharField(max_length=50, blank=True)
    timings = models.JSONField(default=dict)
    error = models.TextField(blank=True)
    # Whose ratings the human means came from: the analysis run whose retained
    # participants were used, or null when there was none (then everyone counted).
    source_run = models.ForeignKey(AnalysisRun, on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    human_basis = models.CharField(max_length=200, blank=True)
    cache_hits = models.PositiveIntegerField(default=0)
    cache_misses = models.PositiveIntegerField(default=0)
    # RatingPredictor.to_bytes(): UTF-8 JSON, never pickle. Null when it could not be fitted.
    predictor = models.BinaryField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(status__in=["queued", "running", "done", "failed"]), name="metrics_run_status_known"
            ),
            models.CheckConstraint(
                condition=~Q(status="done") | Q(finished_at__isnull=False), name="metrics_run_done_has_finish_time"
            ),
        ]

    def __str__(self) -> str:
        return f"metrics run {self.pk} of {self.study_id} ({self.status})"


class MetricsTable(StoredTable):
    """One table of a metrics run."""

    run = models.ForeignKey(MetricsRun, on_delete=models.CASCADE, related_name="tables")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["run", "name"], name="metrics_table_unique_name")]
