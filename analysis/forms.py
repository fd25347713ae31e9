from django import forms
from django.conf import settings

MAX_UPLOAD_BYTES = 200 * 1024 * 1024


class _CsvField(forms.FileField):
    def clean(self, data, initial=None):
        upload = super().clean(data, initial)
        if upload and upload.size > MAX_UPLOAD_BYTES:
            raise forms.ValidationError(f"{upload.name} is larger than {MAX_UPLOAD_BYTES // (1024 * 1024)} MB")
        return upload


class ResponsesImportForm(forms.Form):
    participants = _CsvField(label="participants.csv", help_text="DESIGN 3.1 columns")
    ratings = _CsvField(label="ratings.csv", help_text="one row per response shown")


class GoldImportForm(forms.Form):
    gold = _CsvField(label="gold.csv", help_text="response_id, gold_score")


class FreeTextFilterForm(forms.Form):
    """The filters of the free-text answers page (GET parameters); every one optional."""

    question = forms.ChoiceField(required=False, label="Question")
    block = forms.ChoiceField(required=False, label="Block")
    q = forms.CharField(required=False, max_length=200, label="Text contains")

    def __init__(self, data, *, question_keys: list[str], block_keys: list[str]):
        super().__init__(data)
        self.fields["question"].choices = [("", "All questions"), *((key, key) for key in question_keys)]
        self.fields["block"].choices = [("", "All blocks"), *((key, key) for key in block_keys)]


# Template fields the New study page asks for directly; a value given replaces the template's.
OVERRIDES = ("slug", "title", "construct", "language")


class NewStudyForm(forms.Form):
    """The New study page: model outputs and a template (uploaded or typed), with the slug and title on top."""

    outputs = _CsvField(label="Model outputs", help_text=".csv, .jsonl or .parquet; one row per response with "
                        "prompt_id, prompt, system, condition, response (optional: reference, context, block)")
    template = _CsvField(required=False, label="Template file", help_text=".yaml or .json: a study definition "
                         "without scenarios and blocks")
    template_text = forms.CharField(required=False, label="Or the template, typed (YAML)",
                                    widget=forms.Textarea(attrs={"rows": 16, "spellcheck": "false"}))
    slug = forms.SlugField(required=False, max_length=64, label="Slug (replaces the template's)")
    title = forms.CharField(required=False, max_length=200, label="Title (replaces the template's)")
    construct = forms.CharField(required=False, max_length=40, label="What is judged, as an adjective (replaces "
                                "the template's construct)", help_text="the word the participant pages use for what raters judge")
    language = forms.ChoiceField(required=False, label="Language of the participant pages (replaces the "
                                 "template's)", choices=lambda: [("", "as in the template"), *settings.LANGUAGES])

    def clean(self):
        data = super().clean()
        if not data.get("template") and not (data.get("template_text") or "").strip():
            self.add_error("template", "Upload a template file or type the template below.")
        return data

    def template_source(self) -> tuple[str, bytes]:
        """The template's name (its extension chooses YAML or JSON) and bytes."""
        upload = self.cleaned_data.get("template")
        if upload:
            return upload.name, upload.read()
        return "template.yaml", self.cleaned_data["template_text"].encode("utf-8")

    def overrides(self) -> dict[str, str]:
        return {key: self.cleaned_data[key] for key in OVERRIDES if self.cleaned_data.get(key)}
