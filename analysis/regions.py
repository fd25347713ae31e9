"""US Census regions of the USPS state codes (DC counts as South, as the Census does)."""

from __future__ import annotations

_REGION_STATES = {
    "Northeast": "CT ME MA NH RI VT NJ NY PA",
    "Midwest": "IL IN MI OH WI IA KS MN MO NE ND SD",
    "South": "DE DC FL GA MD NC SC VA WV AL KY MS TN AR LA OK TX",
    "West": "AZ CO ID MT NV NM UT WY AK CA HI OR WA",
}

REGIONS = tuple(_REGION_STATES)
STATE_REGION: dict[str, str] = {
    state: region for region, states in _REGION_STATES.items() for state in states.split()
}


def region_of(state: str | None) -> str:
    """The Census region of a USPS code; "" when blank, outside the US or unknown."""
    return STATE_REGION.get((state or "").strip().upper(), "")
