from django.contrib import admin

from .models import AnalysisRun


@admin.register(AnalysisRun)
class AnalysisRunAdmin(admin.ModelAdmin):
    list_display = ("id", "study", "status", "created_at", "finished_at", "n_participants", "n_retained")
    list_filter = ("study", "status")
    readonly_fields = ("thresholds", "timings", "error")
