"""The audit trail over the API: a study's rows as paginated JSON, with the page's filters."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
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


@extend_schema(parameters=[
    OpenApiParameter("action", str, description='an action name, or a prefix ending in "." ("export.")'),
    OpenApiParameter("actor", str, description="an account name"),
    OpenApiParameter("since", OpenApiTypes.DATE, description="YYYY-MM-DD (UTC), included"),
    OpenApiParameter("until", OpenApiTypes.DATE, description="YYYY-MM-DD (UTC), included"),
])
class AuditEventList(generics.ListAPIView):
    """The study's audit trail, oldest first; filters: action (a name or a prefix ending in "."), actor,
    since, until (YYYY-MM-DD, UTC). Owners and staff only."""

    serializer_class = AuditEventSerializer
    schema = ApiAutoSchema()

    def get_queryset(self):
        study = require(self.request.user, self.kwargs["slug"], Capability.MANAGE, request=self.request)
        form = AuditFilterForm(self.request.query_params)
        if not form.is_valid():
            raise ValidationError({field: list(messages) for field, messages in form.errors.items()})
        wanted = {key: value for key, value in form.cleaned_data.items() if value}
        return selectors.audit_events_of(study_slug=study.slug, **wanted)
