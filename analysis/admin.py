from django.contrib import admin

from .models import AnalysisRun, MetricsRun


@admin.register(AnalysisRun)
class AnalysisRunAdmin(admin.ModelAdmin):
    list_display = ("id", "study", "status", "created_at", "finished_at", "n_participants", "n_retained")
    list_filter = ("study", "status")
    readonly_fields = ("thresholds", "timings", "error")


@admin.register(MetricsRun)
class MetricsRunAdmin(admin.ModelAdmin):
    list_display = ("id", "study", "status", "created_at", "finished_at", "cache_hits", "cache_misses")
    list_filter = ("study", "status")
    exclude = ("predictor",)
    readonly_fields = ("timings", "error", "human_basis")
