from django.contrib import admin

from .models import BonusPayment, PanelStudy


class ReadOnlyAdmin(admin.ModelAdmin):
    """Every change goes through Prolific first (the Prolific page or ``manage.py prolific``)."""

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False


@admin.register(PanelStudy)
class PanelStudyAdmin(ReadOnlyAdmin):
    list_display = ("study", "prolific_id", "status", "places", "reward_cents", "synced_at")


@admin.register(BonusPayment)
class BonusPaymentAdmin(ReadOnlyAdmin):
    list_display = ("panel_study", "prolific_id", "participants", "total_amount", "paid_at")
