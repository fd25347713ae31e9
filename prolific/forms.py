from django import forms


class DraftForm(forms.Form):
    """The terms Prolific needs that our study definition does not carry."""

    reward_cents = forms.IntegerField(min_value=1, max_value=100_000, label="Reward (cents or pence)")
    estimated_minutes = forms.IntegerField(min_value=1, max_value=600, required=False,
                                           label="Estimated minutes (empty: the study's)")


MAX_BONUS_FILE_BYTES = 1024 * 1024  # one short line per participant: far more than any study needs


class BonusFileForm(forms.Form):
    """The bonus file to check: nothing is paid from this form, only shown for confirmation."""

    file = forms.FileField(label="Bonus file (CSV: participant, amount)",
                           help_text="pseudonym (as in the exports) or Prolific id, then the amount, e.g. 1.50")

    def clean_file(self):
        upload = self.cleaned_data["file"]
        if upload.size > MAX_BONUS_FILE_BYTES:
            raise forms.ValidationError(f"{upload.name} is larger than {MAX_BONUS_FILE_BYTES // 1024} KB")
        return upload
