"""The validated answers of one page: what the form hands the service (``surveys.forms``, ``surveys.services``).

Its own module, below both and below the question types, which fill and save it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class PageAnswers:
    """The validated answers of one page: each question type's under its key (``QuestionType.key``), in the
    shape that type collects them (rating: {(placement id, dimension id): value}; ranking: {placement id:
    rank}; best_worst: (best placement id, worst placement id); pairwise: the preference; free_text:
    {question id: text}); or the attention check's value."""

    by_type: dict[str, Any] = field(default_factory=dict)
    attention_value: int | None = None
