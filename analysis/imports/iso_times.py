"""ISO 8601 times of an import file, parsed one at a time or a whole column at once with numpy.

``parse_time`` is the rule (``datetime.fromisoformat``, a time without an
offset is UTC). A ratings file holds hundreds of thousands of distinct times,
so the common strict layout is read with numpy (``strict_iso_micros``) and only
the other texts go through ``parse_time``; tests check that both agree.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta, timezone

import numpy as np

EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def parse_time(value: str) -> datetime:
    """ISO 8601; a time without an offset is taken as UTC."""
    parsed = datetime.fromisoformat(value)
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=timezone.utc)


def _python_micros(text: str) -> float:
    try:
        return float((parse_time(text) - EPOCH) // timedelta(microseconds=1))
    except ValueError:
        return np.nan


# The layouts read with numpy instead of parse_time, one text at a time: exactly
#   YYYY-MM-DD[T ]HH:MM:SS(.f{1,6})?(Z|[+-]HH:MM)?
# with the year in [_FIRST_YEAR, _LAST_YEAR] and every field in range. For
# these datetime.fromisoformat gives the obvious moment (tests check that the
# two agree); anything else, valid or not, goes to parse_time itself.
_FIRST_YEAR, _LAST_YEAR = 1900, 2199  # micros stay far below 2**53: floats are exact
_SHORTEST_TIME, LONGEST_TIME = 19, 32


def time_micros(texts: np.ndarray) -> np.ndarray:
    """``parse_time`` of each text as microseconds since the epoch, NaN where it raises."""
    length = np.fromiter(map(len, texts), dtype=np.int64, count=len(texts))
    chars = np.zeros((LONGEST_TIME, len(texts)), dtype=np.uint8)
    short = np.flatnonzero(length <= LONGEST_TIME)
    if len(short):
        # The lengths come from Python, so a text that ends in NUL characters
        # cannot pass for a shorter one here.
        points = np.array(texts[short].tolist(), dtype=f"U{LONGEST_TIME}").view(np.uint32)
        chars[:, short] = np.minimum(points.reshape(len(short), LONGEST_TIME), 255).T
    return micros(chars, length, texts.__getitem__)


def micros(chars: np.ndarray, length: np.ndarray, text: Callable[[int], str]) -> np.ndarray:
    """Per text, ``parse_time`` as microseconds since the epoch, NaN where it raises.

    ``chars[p]`` holds each text's character at position p (zero past its end,
    255 for any above 255: no character looked for), ``length`` its length.
    Texts of the strict layout are read from them with numpy; the others,
    valid or not, are given to parse_time by ``text(i)``.
    """
    micros = np.full(len(length), np.nan)
    candidate = np.flatnonzero((length >= _SHORTEST_TIME) & (length <= LONGEST_TIME))
    if len(candidate):
        micros[candidate] = strict_iso_micros(chars[:, candidate], length[candidate])
    for i in np.flatnonzero(np.isnan(micros)):
        micros[i] = _python_micros(text(i))
    return micros


def strict_iso_micros(chars: np.ndarray, length: np.ndarray) -> np.ndarray:
    """Microseconds since the epoch of each text in the strict layout; NaN for any other text.

    ``chars[p]`` holds the character at position p of every text (see ``micros``).
    """
    texts = np.arange(len(length))
    value = chars - np.uint8(ord("0"))  # as digits; anything below "0" wraps above 9
    digit = value <= 9

    def at(position: np.ndarray) -> np.ndarray:
        return chars[position, texts]

    def number(*positions: int) -> np.ndarray:
        total = np.zeros(len(length), dtype=np.int64)
        for position in positions:
            total *= 10
            total += value[position]
        return total

    ok = digit[[0, 1, 2, 3, 5, 6, 8, 9, 11, 12, 14, 15, 17, 18]].all(axis=0)
    ok &= (chars[4] == ord("-")) & (chars[7] == ord("-")) & (chars[13] == ord(":")) & (chars[16] == ord(":"))
    ok &= (chars[10] == ord("T")) | (chars[10] == ord(" "))
    year, month, day = number(0, 1, 2, 3), number(5, 6), number(8, 9)
    hour, minute, second = number(11, 12), number(14, 15), number(17, 18)

    # Offset: "Z", "+HH:MM", "-HH:MM" or none.
    zulu = at(length - 1) == ord("Z")
    sign_at = np.maximum(length - 6, 0)
    sign = at(sign_at)
    numeric = ((sign == ord("+")) | (sign == ord("-"))) & (at(sign_at + 3) == ord(":")) & (length >= 25) & ~zulu
    for k in (1, 2, 4, 5):
        numeric &= digit[sign_at + k, texts]
    offset_hours = value[sign_at + 1, texts].astype(np.int64) * 10 + value[sign_at + 2, texts]
    offset_minutes = value[sign_at + 4, texts].astype(np.int64) * 10 + value[sign_at + 5, texts]
    ok &= ~numeric | ((offset_hours <= 23) & (offset_minutes <= 59))
    offset = np.where(numeric, np.where(sign == ord("-"), -1, 1) * (offset_hours * 60 + offset_minutes), 0)

    # Fraction: nothing, or "." and 1 to 6 digits, between the seconds and the offset.
    end = length - np.where(zulu, 1, np.where(numeric, 6, 0))
    places = end - 20  # digits after the "."
    ok &= (end == 19) | ((chars[19] == ord(".")) & (places >= 1) & (places <= 6))
    used = np.arange(6)[:, None] < places  # which of the six places hold a digit
    ok &= (digit[20:26] | ~used).all(axis=0)
    scale = 10 ** np.arange(5, -1, -1)[:, None]
    fraction = (np.where(used, value[20:26], 0) * scale).sum(axis=0)

    ok &= (year >= _FIRST_YEAR) & (year <= _LAST_YEAR) & (month >= 1) & (month <= 12)
    ok &= (hour <= 23) & (minute <= 59) & (second <= 59)
    months = ((np.where(ok, year, 1970) - 1970) * 12 + np.where(ok, month, 1) - 1).astype("datetime64[M]")
    first_day = months.astype("datetime64[D]").astype(np.int64)
    month_days = (months + 1).astype("datetime64[D]").astype(np.int64) - first_day
    ok &= (day >= 1) & (day <= month_days)

    seconds = (first_day + day - 1) * 86_400 + hour * 3600 + minute * 60 + second - offset * 60
    return np.where(ok, (seconds * 1_000_000 + fraction).astype(float), np.nan)
