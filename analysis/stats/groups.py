"""The groups of a subgroup comparison, as plain values the statistics can use without Django.

``analysis.design`` builds them from a study's definition (and re-exports them);
the statistics (``analysis.stats.demographics``) only read them, so importing
``analysis.stats`` never needs the definition's models or Django's settings.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

#: The answer that leaves a participant out of every grouping (``surveys.definition.PREFER_NOT``, which
#: imports Django; tests/test_stats_plain.py checks the two agree).
PREFER_NOT = "Prefer not to answer"


@dataclass(frozen=True)
class Group:
    """One side of a subgroup comparison (see ``surveys.definition.GroupDef``)."""

    label: str
    answers: frozenset[str] = frozenset()
    at_least: float | None = None
    below: float | None = None
    rest: bool = False

    @classmethod
    def of(cls, spec: Any) -> "Group":
        """From a ``surveys.definition.GroupDef`` (any object with its fields)."""
        return cls(spec.label, frozenset(spec.answers), spec.at_least, spec.below, spec.rest)

    def takes(self, answer: str) -> bool:
        if self.answers:
            return answer in self.answers
        if self.rest:
            return False  # decided by the subgroup, after the other group
        try:
            number = float(answer)
        except ValueError:
            return False
        if not math.isfinite(number):
            return False
        return (self.at_least is None or number >= self.at_least) and (self.below is None or number < self.below)


@dataclass(frozen=True)
class Subgroup:
    """A two-group comparison on one demographic answer (a ``grouping`` of ttests.csv).

    Examples
    --------
    >>> older = Subgroup("age", "age", Group("60+", at_least=60), Group("under 60", below=60))
    >>> [older.label_of(a) for a in ["63", "59", "", "Prefer not to answer", "sixty"]]
    ['60+', 'under 60', None, None, None]
    >>> degree = Subgroup("education", "education", Group("Graduate", frozenset({"Graduate"})),
    ...                   Group("other", rest=True), leave_out=frozenset({"Other/Unknown"}))
    >>> [degree.label_of(a) for a in ["Graduate", "High school", "Other/Unknown"]]
    ['Graduate', 'other', None]
    """

    key: str
    demographic: str
    group_a: Group
    group_b: Group
    leave_out: frozenset[str] = frozenset()

    @classmethod
    def of(cls, spec: Any) -> "Subgroup":
        """From a ``surveys.definition.SubgroupDef`` (any object with its fields)."""
        return cls(spec.key, spec.demographic, Group.of(spec.group_a), Group.of(spec.group_b),
                   frozenset(spec.leave_out))

    def label_of(self, answer: Any) -> str | None:
        """The group an answer puts a participant in; None leaves them out of this comparison only."""
        if answer is None or (isinstance(answer, float) and math.isnan(answer)):
            return None
        text = str(answer).strip()
        if text == "" or text == PREFER_NOT or text in self.leave_out:
            return None
        for group in (self.group_a, self.group_b):
            if group.takes(text):
                return group.label
        for group in (self.group_a, self.group_b):
            if group.rest:
                return group.label
        return None
