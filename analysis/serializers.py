"""Serializers of the analysis API: runs, result tables, exports, imports and ratings."""

from __future__ import annotations

from django.urls import reverse
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from analysis.forms import MAX_UPLOAD_BYTES
from analysis.models import AnalysisRun
from surveys import limits
from surveys.models import Participant
from surveys.questions.pairwise import Preference
from surveys.serializers import ParticipantFilterSerializer, QuerySerializer, text_filter

LEVELS = ("participant", "rating")


class AnalysisRunSerializer(serializers.ModelSerializer):
    study = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    status_url = serializers.SerializerMethodField()
    tables_url = serializers.SerializerMethodField(help_text="the run's result tables; null until the run is done")
    failures = serializers.DictField(
        child=serializers.CharField(), read_only=True,
        help_text="table name -> error, for each analysis that raised (the run's other tables stand)")
    pending = serializers.ListField(
        child=serializers.CharField(), read_only=True,
        help_text="names of the tables the run is still computing; empty once it is done. Tables are "
                  "served only when the run is done")

    class Meta:
        model = AnalysisRun
        fields = [
            "id", "study", "status", "step", "error", "failures", "pending", "requested_by", "created_at",
            "started_at", "finished_at",
            "n_participants", "n_retained", "thresholds", "status_url", "tables_url",
        ]
        read_only_fields = fields

    def get_status_url(self, run: AnalysisRun) -> str:
        return reverse("api-run-detail", kwargs={"run_id": run.pk})

    def get_tables_url(self, run: AnalysisRun) -> str | None:
        if run.status != AnalysisRun.Status.DONE:
            return None
        return reverse("api-run-tables", kwargs={"slug": run.study.slug, "run_id": run.pk})


class RunCreatedSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    status = serializers.ChoiceField(choices=AnalysisRun.Status.choices)
    status_url = serializers.CharField(help_text="poll this until status is done or failed")


class ResultTableSummarySerializer(serializers.Serializer):
    name = serializers.CharField()
    columns = serializers.ListField(child=serializers.CharField())
    n_rows = serializers.IntegerField()
    note = serializers.CharField(allow_blank=True)
    url = serializers.CharField()


class TableQuerySerializer(QuerySerializer):
    level = serializers.ChoiceField(
        choices=LEVELS, required=False,
        help_text="keep only rows of this level (tables with a level column; others are returned whole)",
    )
    orient = serializers.ChoiceField(
        choices=("split", "records"), default="split",
        help_text="split: {name, columns, rows}; records: {name, columns, records} with one object per row",
    )


def _cell() -> serializers.JSONField:
    return serializers.JSONField(help_text="a number, text, boolean or null")


class ResultTableSerializer(serializers.Serializer):
    name = serializers.CharField()
    columns = serializers.ListField(child=serializers.CharField())
    note = serializers.CharField(allow_blank=True)
    rows = serializers.ListField(child=serializers.ListField(child=_cell()), required=False,
                                 help_text="orient=split: one list per row, in the order of columns")
    records = serializers.ListField(child=serializers.DictField(child=_cell()), required=False,
                                    help_text="orient=records: one object per row")


class CoverageBlockSerializer(serializers.Serializer):
    """One row of coverage.csv (surveys.coverage)."""

    block_id = serializers.CharField()
    scenario = serializers.CharField()
    judgements_per_block = serializers.IntegerField(allow_null=True, help_text="r; null when everyone judges every block")
    judged = serializers.IntegerField()
    allocated = serializers.IntegerField(allow_null=True)
    missing = serializers.IntegerField(allow_null=True)
    complete = serializers.BooleanField(allow_null=True)


class CoverageLevelSerializer(serializers.Serializer):
    judged = serializers.IntegerField()
    blocks = serializers.IntegerField()


class CoverageSerializer(serializers.Serializer):
    """The dashboard's coverage, and every block's row."""

    judgements_per_block = serializers.IntegerField(allow_null=True)
    blocks_per_participant = serializers.IntegerField(allow_null=True)
    blocks = serializers.IntegerField()
    complete = serializers.IntegerField(allow_null=True)
    judged = serializers.IntegerField()
    needed = serializers.IntegerField(allow_null=True)
    levels = CoverageLevelSerializer(many=True)
    gaps = CoverageBlockSerializer(many=True)
    gap_blocks = serializers.IntegerField(allow_null=True)
    rows = CoverageBlockSerializer(many=True)


class ExportSerializer(serializers.Serializer):
    name = serializers.CharField()
    filename = serializers.CharField()
    description = serializers.CharField()
    url = serializers.CharField()


# An uploaded file (a multipart part), not the URL a FileField reads as; an empty one is refused.
@extend_schema_field({"type": "string", "format": "binary", "minLength": 1})
class _CsvUploadField(serializers.FileField):
    def __init__(self, **kwargs):
        super().__init__(allow_empty_file=False, **kwargs)

    def to_internal_value(self, data):
        upload = super().to_internal_value(data)
        if upload.size > MAX_UPLOAD_BYTES:
            raise serializers.ValidationError(f"larger than {MAX_UPLOAD_BYTES // (1024 * 1024)} MB")
        return upload


class ResponsesImportSerializer(serializers.Serializer):
    participants = _CsvUploadField(help_text="participants.csv (DESIGN 3.1)")
    ratings = _CsvUploadField(help_text="ratings.csv (DESIGN 3.1)")


class GoldImportSerializer(serializers.Serializer):
    gold = _CsvUploadField(help_text="gold.csv: response_id, gold_score")


class ImportReportSerializer(serializers.Serializer):
    participants_created = serializers.IntegerField()
    participants_skipped = serializers.IntegerField()
    visits_created = serializers.IntegerField()
    placements_created = serializers.IntegerField()
    ratings_created = serializers.IntegerField()
    seconds = serializers.FloatField()


class GoldImportReportSerializer(serializers.Serializer):
    scores_written = serializers.IntegerField()
    scores_unchanged = serializers.IntegerField()


class ImportProblemsSerializer(serializers.Serializer):
    problems = serializers.ListField(child=serializers.CharField(), help_text="file:line:column: message")


class FreeTextRecordSerializer(serializers.Serializer):
    """One row of free_text.csv (the raw text: no spreadsheet escaping in JSON)."""

    participant_id = serializers.CharField()
    question_key = serializers.CharField()
    block_id = serializers.CharField(allow_null=True, help_text="null for a question asked once for the whole study")
    scenario = serializers.CharField(allow_null=True, help_text="null for a question asked once for the whole study")
    text = serializers.CharField()


class PairwiseRecordSerializer(serializers.Serializer):
    """One row of pairwise.csv (the left response was shown at position 1, the right one at position 2)."""

    participant_id = serializers.CharField()
    block_id = serializers.CharField()
    scenario = serializers.CharField()
    left_response_id = serializers.CharField()
    right_response_id = serializers.CharField()
    left_model = serializers.CharField()
    right_model = serializers.CharField()
    left_condition = serializers.CharField()
    right_condition = serializers.CharField()
    preference = serializers.ChoiceField(choices=Preference.values)
    seconds_on_block = serializers.FloatField(allow_null=True, help_text="null when the block's showing time is "
                                                                         "unknown")


class ChoiceRecordSerializer(serializers.Serializer):
    """One row of choices.csv."""

    participant_id = serializers.CharField()
    block_id = serializers.CharField()
    scenario = serializers.CharField()
    response_id = serializers.CharField()
    model = serializers.CharField()
    condition = serializers.CharField()
    label = serializers.CharField(allow_blank=True, help_text="the letter of the display position when the study "
                                                               "shows letters, otherwise the source label")
    position = serializers.IntegerField()
    choice = serializers.ChoiceField(choices=["most", "least"])


# --- the ratings API (analysis.ratings_api) ---------------------------------------------------------


class RatingRowSerializer(serializers.Serializer):
    participant_id = serializers.CharField()
    block_id = serializers.CharField()
    response_id = serializers.CharField()
    dimension = serializers.CharField(source="dimension_key")
    position = serializers.IntegerField()
    rating = serializers.IntegerField()
    rank = serializers.IntegerField(allow_null=True)
    block_order = serializers.IntegerField(help_text="the block's place among the participant's blocks (1, 2, ...; "
                                                     "attention checks not counted)")
    seconds_on_block = serializers.FloatField(allow_null=True, help_text="seconds from showing the block to its "
                                                                         "submission; null if either is missing")
    rank_changed = serializers.BooleanField(allow_null=True, help_text="the block's final ranking differs from the "
                                                                       "order shown; null when the block has no ranks")


class RatingFilterSerializer(ParticipantFilterSerializer):
    status = serializers.ChoiceField(choices=Participant.Status.choices, required=False,
                                     help_text="the participant's status")
    block_id = text_filter(max_length=limits.KEY)
    response_id = text_filter(max_length=limits.ITEM_KEY)
    dimension = text_filter(max_length=limits.KEY)
