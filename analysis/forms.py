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
