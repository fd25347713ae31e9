"""What a page asks, however it was read (``bots.pages``: from its HTML or straight from the database)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class PageSpec:
    """The questions of one page, however it was obtained (HTML or database)."""

    kind: str  # consent, instructions, block, check, demographics, done, exit, or "" (unknown)
    visit_id: int | None = None
    placements: list[int] = field(default_factory=list)
    # What the page asks of each question type, under the type's key, as its bot (bots.question_bots) notes
    # it: rating {dimension key: points}; ranking, best_worst, pairwise True; a type it does not ask is absent.
    by_type: dict[str, Any] = field(default_factory=dict)
    texts: dict[str, int] = field(default_factory=dict)  # every text box: field name -> max length
    required: set[str] = field(default_factory=set)  # the text fields a participant must fill
    statement: str = ""
    check_points: list[int] = field(default_factory=list)
    selects: dict[str, list[str]] = field(default_factory=dict)  # demographics: name -> choices
    numbers: dict[str, tuple[float, float, bool]] = field(default_factory=dict)  # name -> (min, max, whole numbers)
    completion_code: str = ""
    csrf_token: str = ""
