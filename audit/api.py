"""The audit trail over the API: a study's rows as paginated JSON, with the page's filters."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import generics, serializers

from surveys.permissions import Capability, require
from surveys.api import ApiAutoSchema

from . import selectors
from .models import AuditEvent


class AuditEventSerializer(serializers.ModelSerializer):
    class Meta:
        model = AuditEvent
        fields = ["at", "actor", "address", "action", "object", "detail", "identifiers"]


class AuditQuerySerializer(serializers.Serializer):
    """The API's filters (the page's AuditFilterForm, except that since after until matches nothing
    instead of being refused: it is a well-formed query)."""

    action = serializers.CharField(required=False, allow_blank=True, max_length=64,
                                   help_text='an action name, or a prefix ending in "." ("export.")')
    actor = serializers.CharField(required=False, allow_blank=True, max_length=150, help_text="an account name")
    since = serializers.DateField(required=False, help_text="YYYY-MM-DD (UTC), included")
    until = serializers.DateField(required=False, help_text="YYYY-MM-DD (UTC), included")


@extend_schema(parameters=[AuditQuerySerializer])
class AuditEventList(generics.ListAPIView):
    """The study's audit trail, oldest first; filters: action (a name or a prefix ending in "."), actor,
    since, until (YYYY-MM-DD, UTC). Owners and staff only."""

    serializer_class = AuditEventSerializer
    query_serializer = AuditQuerySerializer  # a bad value is a documented 400 (ApiAutoSchema)
    schema = ApiAutoSchema()

    def get_queryset(self):
        study = require(self.request.user, self.kwargs["slug"], Capability.MANAGE, request=self.request)
        query = self.query_serializer(data=self.request.query_params)
        query.is_valid(raise_exception=True)
        wanted = {key: value for key, value in query.validated_data.items() if value}
        return selectors.audit_events_of(study_slug=study.slug, **wanted)
