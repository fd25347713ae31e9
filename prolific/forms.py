from django import forms


class DraftForm(forms.Form):
    """The terms Prolific needs that our study definition does not carry."""

    reward_cents = forms.IntegerField(min_value=1, max_value=100_000, label="Reward (cents or pence)")
    estimated_minutes = forms.IntegerField(min_value=1, max_value=600, required=False,
                                           label="Estimated minutes (empty: the study's)")
