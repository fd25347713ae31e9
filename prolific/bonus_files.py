"""A bonus file (``participant,amount`` per line) read into Prolific ids and amounts; every problem at once.

A participant is named by pseudonym (as in the exports) or by Prolific id; amounts
are kept as numbers to the cent, so ``1.5`` and ``1.50`` are the same bonus.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

from surveys.models import Participant

from .errors import PanelRefused
from .models import PanelStudy

MAX_BONUS = Decimal("100.00")  # per participant: a typo such as 425 for 4.25 is refused
CENT = Decimal("0.01")


class BonusFileRefused(PanelRefused):
    """The file cannot be paid as it is; the message lists its problems."""


@dataclass(frozen=True)
class BonusRow:
    panel_participant_id: str
    pseudonym: str  # "" for a Prolific id that never reached us
    amount: Decimal  # to the cent


def _amount(text: str) -> Decimal | None:
    try:
        amount = Decimal(text)
    except InvalidOperation:
        return None
    if not amount.is_finite() or not Decimal(0) < amount <= MAX_BONUS or amount != amount.quantize(CENT):
        return None
    return amount.quantize(CENT)


def bonus_rows(*, panel: PanelStudy, data: bytes) -> list[BonusRow]:
    """The file's bonuses, sorted by Prolific id; ``BonusFileRefused`` naming every bad line."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise BonusFileRefused("the bonus file is not UTF-8 text") from None
    people = Participant.objects.filter(study=panel.study)
    by_pseudonym = dict(people.values_list("pseudonym", "external_id"))
    pseudonym_of = {external_id: pseudonym for pseudonym, external_id in by_pseudonym.items()}
    panel_ids = set(pseudonym_of) | set(panel.submissions.values_list("panel_participant_id", flat=True))
    rows, problems, seen = [], [], set()
    # newline="": a CR alone (classic-Mac files) ends a line too, as LF and CRLF do.
    for number, fields in enumerate(csv.reader(io.StringIO(text, newline="")), start=1):
        if not fields or not "".join(fields).strip():
            continue
        if number == 1 and fields[-1].strip().lower() in {"amount", "bonus"}:
            continue  # a header
        if len(fields) != 2:
            problems.append(f"line {number}: two columns expected (participant, amount)")
            continue
        who, amount_text = fields[0].strip(), fields[1].strip()
        panel_id = by_pseudonym.get(who) or (who if who in panel_ids else None)
        amount = _amount(amount_text)
        if panel_id is None:
            problems.append(f"line {number}: {who[:40]!r} is no participant of this study (pseudonym or panel id)")
        elif amount is None:
            problems.append(f"line {number}: amount {amount_text[:20]!r} is not between 0.01 and {MAX_BONUS}")
        elif panel_id in seen:
            problems.append(f"line {number}: {who[:40]!r} is given a bonus twice")
        else:
            seen.add(panel_id)
            rows.append(BonusRow(panel_id, pseudonym_of.get(panel_id, ""), amount))
    if problems:
        raise BonusFileRefused("; ".join(problems[:10]) + (f" (and {len(problems) - 10} more)" if len(problems) > 10 else ""))
    if not rows:
        raise BonusFileRefused("the file has no bonus: one line per participant, e.g. 5f1a...,1.50")
    return sorted(rows, key=lambda row: row.panel_participant_id)


def csv_bonuses(rows: list[BonusRow]) -> str:
    """The lines as Prolific takes them (and as the confirmation page sends them back): ``id,amount``."""
    return "\n".join(f"{row.panel_participant_id},{row.amount}" for row in rows)
