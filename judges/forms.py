from decimal import Decimal

from django import forms

from analysis.forms import _CsvField
from judges.models import NAME_PATTERN


class JudgementsImportForm(forms.Form):
    judgements = _CsvField(label="judgements.csv", help_text="judge, block_id, response_id, dimension, value; or "
                           "judge, block_id, left_response_id, right_response_id, preference")


class JudgeRunForm(forms.Form):
    judge = forms.RegexField(regex=NAME_PATTERN, max_length=60, help_text="lower case, digits, . _ - (e.g. gpt-4o)",
                             error_messages={"invalid": "lower-case letters, digits and . _ - only"})
    model = forms.CharField(max_length=200, required=False, help_text="the model to ask; empty: JUDGE_MODEL")
    requests_per_minute = forms.IntegerField(min_value=1, max_value=10_000, initial=60)
    cost_cap = forms.DecimalField(min_value=Decimal("0.0001"), max_digits=10, decimal_places=4, initial=1)
    both_orders = forms.BooleanField(required=False, initial=True, label="Pairwise: ask both orders")
