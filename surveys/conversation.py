"""A scenario's conversation so far, as the block page shows it: a transcript whose earlier turns fold.

The last ``RECENT_TURNS`` turns are always in view; a longer conversation folds the turns before them
into a ``<details>`` (no script needed), so the responses stay near the top of a phone's screen.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# Enough to follow the thread a response answers; the rest is one tap away.
RECENT_TURNS = 4


@dataclass(frozen=True)
class Turn:
    number: int  # 1 = the oldest turn
    role: str  # "user" or "assistant" (surveys.definition.TurnDef)
    text: str


@dataclass(frozen=True)
class Transcript:
    earlier: list[Turn]  # folded
    recent: list[Turn]  # in view

    @property
    def recent_start(self) -> int:
        """The number of the first turn in view (the ``start`` of its ordered list)."""
        return self.recent[0].number


def transcript_of(context: list[dict[str, Any]]) -> Transcript | None:
    """The transcript of a stored ``Scenario.context``; None for a scenario without one."""
    turns = [Turn(number=i, role=turn["role"], text=turn["text"]) for i, turn in enumerate(context, start=1)]
    if not turns:
        return None
    # Folding a single turn would hide as much as the fold's own line takes: fold two or more.
    fold = len(turns) - RECENT_TURNS if len(turns) - RECENT_TURNS >= 2 else 0
    return Transcript(earlier=turns[:fold], recent=turns[fold:])
