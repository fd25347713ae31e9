from __future__ import annotations

from django import forms


class AuditFilterForm(forms.Form):
    """The audit page's and CSV's filters; a bad value is a clear 400, never a 500."""

    action = forms.CharField(required=False, max_length=64,
                             help_text='a name ("export.identifiers") or a prefix ending in "." ("export.")')
    actor = forms.CharField(required=False, max_length=150)
    since = forms.DateField(required=False, help_text="YYYY-MM-DD (UTC)")
    until = forms.DateField(required=False, help_text="YYYY-MM-DD (UTC), included")

    def clean(self):
        data = super().clean()
        if data.get("since") and data.get("until") and data["since"] > data["until"]:
            raise forms.ValidationError("since is after until")
        return data
