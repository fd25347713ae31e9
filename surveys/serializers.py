from django.core.validators import RegexValidator
from rest_framework import serializers

from .models import Participant, Study


class StudySerializer(serializers.ModelSerializer):
    n_participants = serializers.IntegerField(read_only=True)
    n_completed = serializers.IntegerField(read_only=True)

    class Meta:
        model = Study
        fields = [
            "slug", "title", "description", "is_demo_content", "is_open", "launched_at", "ranking_enabled",
            "best_worst_enabled", "target_completions", "n_participants", "n_completed", "created_at", "updated_at",
        ]


class StudyDetailSerializer(StudySerializer):
    n_blocks = serializers.IntegerField(read_only=True)
    n_items = serializers.IntegerField(read_only=True)
    quality_thresholds = serializers.DictField(read_only=True)

    class Meta(StudySerializer.Meta):
        fields = StudySerializer.Meta.fields + ["n_blocks", "n_items", "quality_thresholds"]


class DefinitionUploadSerializer(serializers.Serializer):
    definition = serializers.DictField(help_text="a study definition (docs/study-definition.md), as a JSON object")


class ParticipantSerializer(serializers.ModelSerializer):
    participant_id = serializers.CharField(source="pseudonym")

    class Meta:
        model = Participant
        fields = [
            "participant_id", "status", "source", "started_at", "finished_at", "demographics",
        ]
        extra_kwargs = {"demographics": {"help_text": "answers to the study's demographic questions, by question key"}}


class QuerySerializer(serializers.Serializer):
    """The parameters of a query string. An empty one (``?dimension=``) is refused
    (400), as the schema's minLength says: DRF reads an empty form value of an
    optional field as "not given", which would silently drop the filter. Text
    filters match exactly (``trim_whitespace=False``): a value of spaces is a
    value, matching nothing, not an empty one."""

    def to_internal_value(self, data):
        blank = {
            name: [serializers.CharField.default_error_messages["blank"]]
            for name, field in self.fields.items()
            if hasattr(data, "getlist") and "" in data.getlist(name) and not getattr(field, "allow_blank", False)
        }
        if blank:
            raise serializers.ValidationError(blank)
        return super().to_internal_value(data)


def text_filter(**options) -> serializers.CharField:
    """An optional exact-match text filter of a query string. DRF refuses a null character in any text (400):
    the schema says so with a pattern, so that a client (or schemathesis) knows such a value is not valid."""
    return serializers.CharField(required=False, trim_whitespace=False,
                                 validators=[RegexValidator(r"^[^\x00]*$", "Null characters are not allowed.")],
                                 **options)


class ParticipantFilterSerializer(QuerySerializer):
    status = serializers.ChoiceField(choices=Participant.Status.choices, required=False)
    participant_id = text_filter(max_length=64, help_text="a pseudonym")
