"""The audit trail over the API: a study's rows as paginated JSON, with the page's filters."""

from __future__ import annotations

from rest_framework import generics, serializers
from rest_framework.exceptions import ValidationError

from surveys.permissions import Capability, require
from surveys.api import ApiAutoSchema

from . import selectors
from .forms import AuditFilterForm
from .models import AuditEvent


class AuditEventSerializer(serializers.ModelSerializer):
    class Meta:
        model = AuditEvent
        fields = ["at", "actor", "address", "action", "object", "detail", "identifiers"]


class AuditEventList(generics.ListAPIView):
    """The study's audit trail, oldest first; filters: action (a name or a prefix ending in "."), actor,
    since, until (YYYY-MM-DD, UTC). Owners and staff only."""

    serializer_class = AuditEventSerializer
    schema = ApiAutoSchema()

    def get_queryset(self):
        study = require(self.request.user, self.kwargs["slug"], Capability.MANAGE, request=self.request)
        form = AuditFilterForm(self.request.query_params)
        if not form.is_valid():
            raise ValidationError(form.errors.get_json_data())
        wanted = {key: value for key, value in form.cleaned_data.items() if value}
        return selectors.audit_events_of(study_slug=study.slug, **wanted)
