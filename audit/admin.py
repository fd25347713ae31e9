"""The trail in the admin, read-only: staff can search it; nobody can add, change or delete a row."""

from django.contrib import admin

from .models import AuditEvent


@admin.register(AuditEvent)
class AuditEventAdmin(admin.ModelAdmin):
    list_display = ("at", "actor", "address", "study_slug", "action", "object", "identifiers")
    list_filter = ("action", "identifiers")
    search_fields = ("study_slug", "actor", "object")
    date_hierarchy = "at"

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False
