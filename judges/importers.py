"""Import of judgements made elsewhere (``manage.py import_judgements``, the import page, the API).

Two shapes, told apart by the header:

- ratings: ``judge, block_id, response_id, dimension, value`` (optional ``kind``, ``position``);
- pairwise: ``judge, block_id, left_response_id, right_response_id, preference`` (optional ``kind``);
- ranking: ``judge, block_id, response_id, rank`` (every response of the block, ranks 1..n; optional ``kind``);
- most/least: ``judge, block_id, response_id, choice`` (``most`` or ``least``, one of each per block).

Validated like the response import (``analysis.imports.importers``): every problem is reported as
``file:line:column: message`` and nothing is written unless the whole file is clean. A judge named
for the first time is registered by the import (kind ``other`` unless the ``kind`` column says).
"""

from __future__ import annotations

import io
import math
import re
from dataclasses import dataclass
from typing import IO

from django.db import transaction
from django.db.models import Count

from analysis.imports.importers import ImportProblems, _file_name, _Problems, _rows
from judges.models import NAME_PATTERN, Judge, JudgeAnswer
from judges.services import judge_register, judges_declared_register
from surveys.models import Block, Dimension, Item, Study

RATING_COLUMNS = ["judge", "block_id", "response_id", "dimension", "value"]
PAIRWISE_COLUMNS = ["judge", "block_id", "left_response_id", "right_response_id", "preference"]
OPTIONAL_RATING_COLUMNS = ["kind", "position"]
OPTIONAL_PAIRWISE_COLUMNS = ["kind"]
RANK_COLUMNS = ["judge", "block_id", "response_id", "rank"]
CHOICE_COLUMNS = ["judge", "block_id", "response_id", "choice"]
CHOICES = {"most": 1, "least": -1}
#: shape -> (required columns, optional columns)
SHAPES = {"rating": (RATING_COLUMNS, OPTIONAL_RATING_COLUMNS), "pairwise": (PAIRWISE_COLUMNS, OPTIONAL_PAIRWISE_COLUMNS),
          "rank": (RANK_COLUMNS, ["kind"]), "best_worst": (CHOICE_COLUMNS, ["kind"])}
PREFERENCES = [choice.value for choice in JudgeAnswer.Preference]
KINDS = [choice.value for choice in Judge.Kind]

__all__ = ["ImportProblems", "JudgementImportReport", "judgements_import"]


@dataclass(frozen=True)
class JudgementImportReport:
    judges_created: int
    answers_written: int
    answers_replaced: int

    @property
    def summary(self) -> str:
        """One sentence for a person (the import page)."""
        return (f"Imported judgements: {self.answers_written:,} answers written "
                f"({self.answers_replaced:,} replacing earlier ones), {self.judges_created} new judges.")


@dataclass
class _Index:
    blocks: dict[str, int]
    items: dict[str, tuple[int, int]]  # key -> (id, block id)
    block_sizes: dict[int, int]
    dimensions: dict[str, tuple[int, int, int]]  # key -> (id, min, max)
    judges: dict[str, str]  # name -> kind


def _index(study: Study) -> _Index:
    return _Index(
        blocks=dict(Block.objects.filter(study=study).values_list("key", "id")),
        items={key: (pk, block) for key, pk, block in Item.objects.filter(study=study).values_list("key", "id", "block_id")},
        block_sizes=dict(Item.objects.filter(study=study).values_list("block_id").annotate(n=Count("id"))
                         .values_list("block_id", "n")),
        dimensions={key: (pk, low, high) for key, pk, low, high in
                    Dimension.objects.filter(study=study).values_list("key", "id", "scale_min", "scale_max")},
        judges=dict(Judge.objects.filter(study=study).values_list("name", "kind")),
    )


def _shape(head: str) -> str:
    columns = {cell.strip().lstrip("\ufeff").lower() for cell in head.split(",")}
    for marker, shape in (("preference", "pairwise"), ("rank", "rank"), ("choice", "best_worst")):
        if marker in columns:
            return shape
    return "rating"


def _judge_problem(name: str, kind: str, index: _Index, new: dict[str, str]) -> tuple[str, str] | None:
    if not re.fullmatch(NAME_PATTERN, name):
        return "judge", (f'"{name}" is not a judge name: lower-case letters, digits and . _ - only, '
                         "starting with a letter or digit, at most 60 characters")
    if kind and kind not in KINDS:
        return "kind", f'unknown kind "{kind}"; use one of {", ".join(KINDS)}'
    known = index.judges.get(name, new.get(name))
    if kind and known is not None and known != kind:
        return "kind", f'judge "{name}" is of kind {known}, not {kind}'
    if name not in index.judges:
        new.setdefault(name, kind or "other")
    return None


def _item(key: str, block_id: int, column: str, index: _Index, add) -> int | None:
    found = index.items.get(key)
    if found is None:
        add(column, f'unknown response "{key}"')
        return None
    if found[1] != block_id:
        add(column, f'response "{key}" is not in this block')
        return None
    return found[0]


def _read(study: Study, file: IO, name: str, problems: _Problems, index: _Index, new: dict[str, str]) -> list[dict]:
    raw = file.read()
    data = raw if isinstance(raw, bytes) else raw.encode("utf-8")
    shape = _shape(data.split(b"\n", 1)[0].decode("utf-8", errors="replace"))
    buffer = io.BytesIO(data)
    buffer.name = name
    required, optional = SHAPES[shape]
    table = _rows(buffer, name, required, optional, problems)
    if table is None:
        return []
    header, records = table
    answers, seen = [], {}
    for line, cells in records:
        row = dict(zip(header, cells))
        bad = []

        def add(column: str, message: str) -> None:
            bad.append(column)
            problems.add(name, line, column, message)

        if (problem := _judge_problem(row["judge"], row.get("kind", ""), index, new)):
            add(*problem)
        block_id = index.blocks.get(row["block_id"])
        if block_id is None:
            add("block_id", f'unknown block "{row["block_id"]}"')
            continue
        answer = {"judge": row["judge"], "block_id": block_id, "question": shape, "line": line}
        if shape == "rating":
            answer["item_id"] = _item(row["response_id"], block_id, "response_id", index, add)
            dimension = index.dimensions.get(row["dimension"])
            if dimension is None:
                add("dimension", f'unknown dimension "{row["dimension"]}"')
            else:
                answer["dimension_id"] = dimension[0]
                try:
                    value = float(row["value"])
                    if not math.isfinite(value):
                        raise ValueError
                except ValueError:
                    add("value", f'"{row["value"]}" is not a number')
                else:
                    if not dimension[1] <= value <= dimension[2]:
                        add("value", f'{row["value"]} is outside the {row["dimension"]} scale {dimension[1]}-{dimension[2]}')
                    answer["value"] = value
            if row.get("position"):
                if not row["position"].isdigit() or int(row["position"]) < 1:
                    add("position", f'"{row["position"]}" is not a display position (1, 2, ...)')
                else:
                    answer["position"] = int(row["position"])
            key = (row["judge"], row["response_id"], row["dimension"])
        elif shape in ("rank", "best_worst"):
            answer["item_id"] = _item(row["response_id"], block_id, "response_id", index, add)
            if shape == "rank":
                size = index.block_sizes.get(block_id, 0)
                if not row["rank"].isdigit() or not 1 <= int(row["rank"]) <= size:
                    add("rank", f'"{row["rank"]}" is not a rank of this block (1-{size})')
                else:
                    answer["value"] = float(row["rank"])
            elif row["choice"].lower() not in CHOICES:
                add("choice", f'"{row["choice"]}" is not a choice; use most or least')
            else:
                answer["value"] = float(CHOICES[row["choice"].lower()])
            key = (row["judge"], row["response_id"])
        else:
            answer["left_item_id"] = _item(row["left_response_id"], block_id, "left_response_id", index, add)
            answer["right_item_id"] = _item(row["right_response_id"], block_id, "right_response_id", index, add)
            if row["left_response_id"] == row["right_response_id"]:
                add("right_response_id", "the two responses of a pair must differ")
            answer["preference"] = row["preference"].lower()
            if answer["preference"] not in PREFERENCES:
                add("preference", f'"{row["preference"]}" is not a preference; use one of {", ".join(PREFERENCES)}')
            key = (row["judge"], row["left_response_id"], row["right_response_id"])
        if key in seen:
            add("", f"the same judgement is given twice (first on line {seen[key]})")
        seen.setdefault(key, line)
        if not bad:
            answers.append(answer)
    if shape in ("rank", "best_worst"):
        _check_blocks(shape, answers, index, lambda line, message: problems.add(name, line, "", message))
    return answers


def _check_blocks(shape: str, answers: list[dict], index: _Index, add) -> None:
    """A judge's ranking ranks every response of the block once (1..n); its most/least picks one of each."""
    groups: dict[tuple[str, int], list[dict]] = {}
    for answer in answers:
        groups.setdefault((answer["judge"], answer["block_id"]), []).append(answer)
    for (judge, block_id), group in groups.items():
        values = sorted(a["value"] for a in group)
        if shape == "rank" and values != [float(k) for k in range(1, index.block_sizes[block_id] + 1)]:
            add(group[0]["line"], f"{judge}'s ranking of this block must rank each of its "
                                  f"{index.block_sizes[block_id]} responses once (ranks 1-{index.block_sizes[block_id]})")
        if shape == "best_worst" and values != [-1.0, 1.0]:
            add(group[0]["line"], f"{judge} must pick exactly one most and one least response in this block")


def judgements_import(*, study: Study, file: IO) -> JudgementImportReport:
    """Validate a judgements CSV and write it; raises ``ImportProblems`` (writing nothing) if any line is bad.

    An answer a judge gave before on the same response and dimension (or the same pair in the same
    order) is replaced, so importing the same file twice changes nothing."""
    problems, name = _Problems(), _file_name(file, "judgements.csv")
    index, new = _index(study), {}
    answers = _read(study, file, name, problems, index, new)
    if not answers and not problems.items:
        problems.add(name, 2, "", "no judgements in the file")
    problems.raise_if_any()
    with transaction.atomic():
        judges_declared_register(study=study)  # a declared judge keeps the kind, model and prompt of the definition
        judges = {judge.name: judge for judge in Judge.objects.filter(study=study)}
        for judge_name, kind in new.items():
            judges[judge_name] = judge_register(study=study, name=judge_name, kind=kind)
        replaced = 0
        # A ranking or a most/least pick is a whole block's answer: a new one replaces the block's earlier one.
        for judge_name, block_id, question in {(a["judge"], a["block_id"], a["question"]) for a in answers
                                               if a["question"] in ("rank", "best_worst")}:
            replaced += JudgeAnswer.objects.filter(judge=judges[judge_name], block_id=block_id,
                                                   question=question).delete()[0]
        for answer in answers:
            answer.pop("line")
            judge = judges[answer.pop("judge")]
            if answer["question"] == "rating":
                lookup = {"item_id": answer.pop("item_id"), "dimension_id": answer.pop("dimension_id")}
            elif answer["question"] in ("rank", "best_worst"):
                lookup = {"item_id": answer.pop("item_id")}
            else:
                lookup = {"left_item_id": answer.pop("left_item_id"), "right_item_id": answer.pop("right_item_id")}
            _, created = JudgeAnswer.objects.update_or_create(judge=judge, question=answer.pop("question"),
                                                              **lookup, defaults=answer)
            replaced += not created
    return JudgementImportReport(judges_created=len(new), answers_written=len(answers), answers_replaced=replaced)

