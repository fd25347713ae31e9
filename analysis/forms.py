from django import forms

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
