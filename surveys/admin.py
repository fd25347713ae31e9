from django import forms
from django.contrib import admin

from .definition import PANEL_ONLY
from .models import Block, Item, Participant, Study
from .recruitment import completion_url_problem, id_pattern_problem


class BlockInline(admin.TabularInline):
    model = Block
    fields = ("key", "scenario", "order", "set_number")
    extra = 0
    show_change_link = True

    def has_add_permission(self, request, obj=None) -> bool:
        # Content comes from definition files (load_study), never from ad-hoc edits.
        return False


PANEL_REQUIRED = tuple(name for name in PANEL_ONLY if name != "completion_url")


class StudyAdminForm(forms.ModelForm):
    """The recruitment settings meet anonymous visitors: the same checks as a definition file's."""

    class Meta:
        model = Study
        fields = "__all__"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # Empty outside panel studies (clean() requires them in panel studies); an empty
        # completion_url means no panel to return to.
        for name in (*PANEL_REQUIRED, "completion_url"):
            if name in self.fields:
                self.fields[name].required = False

    def clean(self) -> dict:
        data = super().clean()
        if data.get("is_open") and self.instance.pk and self.instance.is_draft:
            # The database refuses an open draft; say how to open it instead of failing on save.
            self.add_error("is_open", "a draft opens by launching it (the study's Preview and launch page)")
        if self.instance.recruitment_mode == Study.RecruitmentMode.PANEL:
            for name in PANEL_REQUIRED:
                if name in self.fields and not data.get(name):
                    self.add_error(name, "a panel study needs this")
        return data

    def clean_completion_url(self) -> str:
        value = self.cleaned_data.get("completion_url") or ""
        if problem := completion_url_problem(value):
            raise forms.ValidationError(problem)
        return value

    def clean_id_pattern(self) -> str:
        value = self.cleaned_data.get("id_pattern") or ""
        if problem := id_pattern_problem(value):
            raise forms.ValidationError(problem)
        return value


@admin.register(Study)
class StudyAdmin(admin.ModelAdmin):
    form = StudyAdminForm
    list_display = ("slug", "title", "is_demo_content", "is_open", "target_completions", "participant_count")
    search_fields = ("slug", "title")
    filter_horizontal = ("owners",)
    readonly_fields = ("slug", "launched_at", "recruitment_mode", "participant_title", "consent_text", "instructions_text", "question_text", "ranking_enabled", "best_worst_enabled")
    fieldsets = (
        (None, {"fields": ("slug", "title", "description", "is_demo_content", "launched_at", "is_open", "owners")}),
        ("Participant-facing content (from the definition file)", {
            "fields": ("participant_title", "consent_text", "instructions_text", "question_text", "ranking_enabled", "best_worst_enabled"),
        }),
        ("Recruitment", {"fields": ("recruitment_mode", "id_param", "study_param", "session_param", "id_pattern", "completion_code",
                                    "completion_url", "target_completions", "estimated_minutes", "hold_minutes")}),
        ("Quality rules", {"fields": ("duration_min_minutes", "duration_max_minutes", "fast_block_seconds",
                                      "fast_share_max", "straightline_sd_max", "straightline_mae_min",
                                      "attention_failures_allowed")}),
    )
    inlines = [BlockInline]

    @admin.display(description="participants")
    def participant_count(self, obj: Study) -> int:
        return obj.participants.filter(is_preview=False).count()


@admin.register(Item)
class ItemAdmin(admin.ModelAdmin):
    list_display = ("key", "block", "system", "condition")
    list_filter = ("study", "condition")
    search_fields = ("key", "text")
    list_select_related = ("block", "system", "condition")


@admin.register(Participant)
class ParticipantAdmin(admin.ModelAdmin):
    list_display = ("pseudonym", "study", "status", "source", "started_at", "finished_at")
    list_filter = ("study", "status", "source", "is_preview")
    search_fields = ("pseudonym",)
    exclude = ("external_id",)
    readonly_fields = ("pseudonym", "seed", "completion_code")
