"""The validated answers of one page: what the form hands the service (``surveys.forms``, ``surveys.services``).

Its own module, below both and below the question types, which fill and save it.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class PageAnswers:
    """The validated answers of one page, keyed by placement and dimension ids."""

    ratings: dict[tuple[int, int], int] = field(default_factory=dict)
    ranks: dict[int, int] = field(default_factory=dict)
    best: int | None = None
    worst: int | None = None
    free_text: dict[int, str] = field(default_factory=dict)
    preference: str = ""  # a pairwise block: left, right, tie or both_bad
    attention_value: int | None = None
