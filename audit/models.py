"""The audit trail: one append-only row per researcher action (audit.receivers writes them).

Append-only at three levels: the model refuses to save an existing row or delete one, its
queryset refuses bulk update and delete, and on PostgreSQL a trigger (migration 0001)
refuses UPDATE and DELETE whatever the client. Study and actor are kept as text and plain
ids, not foreign keys: deleting a study or an account must not cascade into the trail
(the trigger would refuse it), and the row must still say who it was.
"""

from __future__ import annotations

from django.db import models
from django.utils import timezone


class AppendOnly(Exception):
    """An audit row was about to be changed or deleted."""


class AuditEventQuerySet(models.QuerySet):
    def update(self, **kwargs):
        raise AppendOnly("the audit trail is append-only")

    def delete(self):
        raise AppendOnly("the audit trail is append-only")


#: Actions whose object is a file of panel identifiers (shown flagged on the page and in the CSV's detail).
IDENTIFIER_ACTIONS = frozenset({"export.identifiers"})


class AuditEvent(models.Model):
    at = models.DateTimeField(default=timezone.now, db_index=True)
    actor = models.CharField(max_length=150, blank=True, help_text="username; empty for the system")
    actor_id = models.BigIntegerField(null=True, blank=True)
    address = models.GenericIPAddressField(null=True, blank=True)
    study_slug = models.CharField(max_length=100, blank=True, db_index=True)
    study_id = models.BigIntegerField(null=True, blank=True)
    action = models.CharField(max_length=64, db_index=True)
    object = models.CharField(max_length=255, blank=True)
    detail = models.TextField(blank=True)
    identifiers = models.BooleanField(default=False, help_text="the action touched panel identifiers")

    objects = AuditEventQuerySet.as_manager()

    class Meta:
        ordering = ["at", "id"]
        indexes = [models.Index(fields=["study_slug", "at"], name="audit_study_at")]
        constraints = [models.CheckConstraint(condition=~models.Q(action=""), name="audit_action_not_empty")]

    def save(self, *args, **kwargs):
        if self.pk is not None:
            raise AppendOnly("the audit trail is append-only")
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        raise AppendOnly("the audit trail is append-only")

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M:%S} {self.actor or '(system)'} {self.action} {self.object}"
