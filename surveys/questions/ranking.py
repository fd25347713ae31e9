"""Ranking: every response gets a different rank, 1 = most <construct>; it starts unranked in every mode."""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import Any

from django import forms
from django.db import models
from django.db.models import Case, Q, Value, When
from django.db.models.functions import Cast
from django.utils.translation import gettext as _

from web.prepared_queries import PreparedUpdate

from ..core_models import ItemPlacement
from ..definition_parts import facing
from .base import AnswerColumns, QuestionType
from .controls import Control, Option, entered_value, field_error, response_name
from .rating import RATINGS_FILE

FIELD_PATTERN = re.compile(r"^rank-(\d+)$")


# Ranks are columns of ratings.csv, the rating unit's file; rank_changed, which only ranking gives, is described here.
_CODEBOOK = {RATINGS_FILE: {
    "rank_changed": ("whether the participant's final ranking of the block differs from the order the responses "
                     "were shown in (some response's rank is not its position); rankings start unranked, so false "
                     "means the shown order was confirmed", "boolean",
                     "true, false; blank when ranking is off or the block has no ranks"),
}}


#: The rank given to each response shown, on its placement (1 = most <construct>); the ranks of a page differ.
RANK_COLUMN = AnswerColumns(
    ItemPlacement,
    {"rank": models.PositiveSmallIntegerField(null=True, blank=True)},
    constraints=(
        # Partial: a placement is written unranked at entry, and so adds nothing to this index until it is ranked.
        models.UniqueConstraint(fields=["visit", "rank"], condition=Q(rank__isnull=False),
                                name="placement_unique_rank"),
        models.CheckConstraint(condition=Q(rank__isnull=True) | Q(rank__gte=1), name="placement_rank_positive"),
    ),
)


def _ranks_update(placement_ids: list[int], ranks: list[int]):
    """One statement for a page's ranks, as ``bulk_update`` writes them (a CASE on the placement's id)."""
    field = ItemPlacement._meta.get_field("rank")
    by_placement = Case(*(When(pk=pk, then=Value(rank)) for pk, rank in zip(placement_ids, ranks)), output_field=field)
    return ItemPlacement.objects.filter(pk__in=placement_ids), {"rank": Cast(by_placement, output_field=field)}


# Compiled once per process and number of responses on a page (web.prepared_queries).
_ranks_write = PreparedUpdate(_ranks_update, placement_ids=list, ranks=list)


def field_name(placement_id: int) -> str:
    return f"rank-{placement_id}"


class RankingType(QuestionType):
    key = "ranking"
    template = "surveys/questions/ranking.html"
    exports = ("ratings",)  # rank and rank_changed are columns of ratings.csv
    definition_fields = {"ranking": (bool, facing(False))}
    answer_columns = (RANK_COLUMN,)
    codebook = _CODEBOOK

    def declared(self, definition) -> bool:
        return definition.ranking

    def definition_problems(self, definition) -> list[str]:
        if definition.ranking and len({len(b.responses) for b in definition.blocks}) > 1:
            return ["blocks: ranking needs every block to show the same number of responses"]
        return []

    def in_study(self, study) -> bool:
        return study.ranking_enabled

    def asked(self, page) -> bool:
        return page.study.ranking_enabled and not page.is_check

    def add_fields(self, form) -> None:
        n = len(form.page.placements)
        for placement in form.page.placements:
            number = placement.position
            form.fields[field_name(placement.pk)] = forms.TypedChoiceField(
                choices=[(str(r), str(r)) for r in range(1, n + 1)],
                coerce=int,
                error_messages={
                    "required": _("Please give Response %(number)s a rank.") % {"number": number},
                    "invalid_choice": _("Please give Response %(number)s a rank from 1 to %(last)s.")
                    % {"number": number, "last": n},
                },
            )

    def foreign(self, form, name: str) -> bool:
        match = FIELD_PATTERN.match(name)
        return bool(match) and (not self.asked(form.page) or int(match.group(1)) not in form.numbers)

    def clean(self, form, cleaned: dict[str, Any]) -> None:
        """One message per rank given twice, naming the responses as the page labels them; each of
        their rank fields carries it, and the summary lists it once (``PageForm.error_summary``)."""
        ranks = {pid: cleaned.get(field_name(pid)) for pid in form.numbers}
        used = Counter(r for r in ranks.values() if r is not None)
        for rank in sorted(r for r, n in used.items() if n > 1):
            sharing = sorted((form.numbers[pid], pid) for pid, r in ranks.items() if r == rank)
            names = [response_name(number) for number, _pid in sharing]
            message = _("Rank %(rank)s is given to %(some)s and %(last)s; give each response a different rank.") % {
                "rank": rank, "some": _(", ").join(names[:-1]), "last": names[-1],
            }
            for _number, pid in sharing:
                form.add_error(field_name(pid), message)

    def collect(self, form, cleaned: dict[str, Any], answers) -> None:
        answers.by_type[self.key] = {p.pk: cleaned[field_name(p.pk)] for p in form.page.placements}

    def controls(self, form) -> list[Control]:
        n = len(form.page.placements)
        out = []
        for placement in form.page.placements:
            name = field_name(placement.pk)
            chosen = entered_value(form, name)
            options = [Option("", _("Choose a rank"), selected=chosen == "")] + [
                Option(str(r), str(r), selected=chosen == str(r)) for r in range(1, n + 1)
            ]
            out.append(Control(name=name, label=_("Rank of Response %(number)s") % {"number": placement.position},
                               options=options, error=field_error(form, name)))
        return out

    def answered(self, answers) -> bool:
        return bool(self.answer(answers, {}))

    def check(self, page, answers) -> str | None:
        placements = {p.pk for p in page.placements}
        ranks = self.answer(answers, {})
        if set(ranks) != placements or sorted(ranks.values()) != list(range(1, len(placements) + 1)):
            return "the ranks are not a ranking of the responses on this page"
        return None

    def save(self, page, participant, answers) -> None:
        ranks = self.answer(answers)
        for placement in page.placements:
            placement.rank = ranks[placement.pk]
        _ranks_write.run(placement_ids=[p.pk for p in page.placements], ranks=[p.rank for p in page.placements])


def script_texts() -> str:
    """The texts survey.js writes on a ranking, in the page's language, as JSON for a data
    attribute (no inline script: the CSP forbids them); %(name)s are filled in there."""
    return json.dumps({
        "response": _("Response %(number)s"),
        "keep": _("Keep this order"),
        "ranked": _("Ranked: the order shown is your ranking. You can still change it."),
        "unranked": _("Not ranked yet. Move the responses into your order, or choose Keep this order if the "
                      "order shown is already your ranking."),
        "moved": _("%(response)s is now ranked %(rank)s of %(total)s."),
        "kept": _("Ranked in the order shown: %(first)s first, %(last)s last."),
        "up": _("Move up"),
        "down": _("Move down"),
    }, ensure_ascii=False)
