"""Model outputs become a study definition (issue 25): read an outputs file, draw a sample, build the blocks.

An outputs file (CSV, JSONL or Parquet) has one row per response: ``prompt_id``, ``prompt``, ``system``,
``condition``, ``response`` and, optionally, ``reference`` (a reference response shown in each block of the
prompt), ``context`` (the conversation so far, a JSON list of ``{"role", "text"}`` turns), ``block`` (one
prompt in several blocks with different systems), ``prompt_label`` (the scenario's label), ``set`` (the
block's counterbalancing set) and ``response_id``. Other columns are kept only to stratify a sample by.

A template is a study definition without ``scenarios`` and ``blocks`` (``systems`` and ``conditions`` are
optional: by default they are listed in order of first appearance). ``definition_from_outputs`` returns the
whole definition, validated, or raises ``OutputsProblems`` listing every problem as
``file:line:column: message`` (line 1 is a CSV's header) or ``file: path: message`` for the template.
Nothing here touches the database; the same bytes and seed always give the same definition.
"""

from __future__ import annotations

import csv
import io
import json
import random
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Any

import yaml
from pydantic import TypeAdapter, ValidationError

from . import definition as definition_module
from . import limits
from .definition import (
    DefinitionError,
    SampleDef,
    TurnDef,
    format_location,
    parse_definition,
)
from .definition_parts import KEY_PATTERN

REQUIRED_COLUMNS = ("prompt_id", "prompt", "system", "condition", "response")
OPTIONAL_COLUMNS = ("reference", "context", "block", "prompt_label", "set", "response_id")
OUTPUT_FORMATS = {".csv": "CSV", ".jsonl": "JSONL", ".parquet": "Parquet"}
# Generated from the outputs; a template that sets them would be overwritten.
GENERATED_FIELDS = ("scenarios", "blocks")
# Paths of the definition that the outputs file fills (the rest comes from the template).
FROM_OUTPUTS = ("scenarios", "blocks", "systems", "conditions")
# A study built from outputs has at most this many problems listed (the rest are counted).
MAX_PROBLEMS = 200

_TURNS = TypeAdapter(list[TurnDef])


class OutputsProblems(Exception):
    """Every problem with an outputs file and its template; nothing was built."""

    def __init__(self, problems: list[str]):
        if len(problems) > MAX_PROBLEMS:
            problems = problems[:MAX_PROBLEMS] + [f"... and {len(problems) - MAX_PROBLEMS} more problems"]
        self.problems = problems
        super().__init__("\n".join(problems))


@dataclass(frozen=True)
class OutputRow:
    """One response of the outputs file, with the line it starts on (for messages)."""

    line: int
    values: dict[str, str]
    context: Any = None  # as given: a JSON string (CSV, Parquet) or a list (JSONL)


@dataclass
class _Problems:
    file: str
    items: list[str] = field(default_factory=list)

    def at(self, line: int | str, column: str, message: str) -> None:
        self.items.append(f"{self.file}:{line}:{column}: {message}")

    def file_wide(self, message: str) -> None:
        self.items.append(f"{self.file}: {message}")

    def raise_any(self) -> None:
        if self.items:
            raise OutputsProblems(self.items)


# --- reading ------------------------------------------------------------------------------------


def _text(name: str, data: bytes) -> str:
    """The file decoded as UTF-8 (a byte order mark is dropped), or the line and column of its first bad byte."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise OutputsProblems([f"{name}:{line}:{column}: the file is not UTF-8 (byte 0x{data[exc.start]:02x}); "
                               "save it as UTF-8"]) from None


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float) and value != value:  # NaN: an empty cell of Parquet
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value).strip()


def _rows_from_records(records: Iterable[tuple[int, dict[str, Any]]]) -> list[OutputRow]:
    rows = []
    for line, record in records:
        context = record.get("context")
        values = {str(k): _cell(v) for k, v in record.items() if k != "context"}
        if isinstance(context, str):
            context = context.strip()
        rows.append(OutputRow(line=line, values=values, context=context))
    return rows


def _read_csv(name: str, data: bytes) -> tuple[list[str], list[OutputRow]]:
    text = _text(name, data)
    if "\x00" in text:
        raise OutputsProblems([f"{name}: the file holds NUL characters; is it really CSV?"])
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = [h.strip() for h in next(reader)]
    except StopIteration:
        raise OutputsProblems([f"{name}: the file is empty"]) from None
    except csv.Error as exc:
        raise OutputsProblems([f"{name}:1:1: not readable as CSV: {exc}"]) from None
    records, problems, start = [], _Problems(name), reader.line_num + 1
    try:
        for cells in reader:
            if any(cell.strip() for cell in cells):
                if len(cells) != len(header):
                    problems.at(start, len(cells), f"{len(cells)} cell(s) where the header has {len(header)} columns")
                else:
                    records.append((start, dict(zip(header, cells))))
            start = reader.line_num + 1
    except csv.Error as exc:
        problems.at(start, 1, f"not readable as CSV: {exc}")
    problems.raise_any()
    return header, _rows_from_records(records)


def _read_jsonl(name: str, data: bytes) -> tuple[list[str], list[OutputRow]]:
    problems, records, columns = _Problems(name), [], {}
    for number, line in enumerate(_text(name, data).splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            problems.at(number, exc.colno, f"not valid JSON: {exc.msg}")
            continue
        if not isinstance(record, dict):
            problems.at(number, 1, "each line must hold one JSON object (one response)")
            continue
        columns.update(dict.fromkeys(record))
        records.append((number, record))
    problems.raise_any()
    if not records:
        raise OutputsProblems([f"{name}: the file is empty"])
    # A key missing from one line is a missing column there, not everywhere.
    for number, record in records:
        for column in REQUIRED_COLUMNS:
            if column in columns and column not in record:
                problems.at(number, column, f'this line has no "{column}"')
    problems.raise_any()
    return list(columns), _rows_from_records(records)


def _read_parquet(name: str, data: bytes) -> tuple[list[str], list[OutputRow]]:
    import pyarrow.parquet as pq  # only Parquet uploads need it

    try:
        table = pq.read_table(io.BytesIO(data))
    except Exception as exc:  # pyarrow raises several types for a damaged file
        raise OutputsProblems([f"{name}: not readable as Parquet ({exc.__class__.__name__}: {exc})"]) from None
    records = table.to_pylist()
    # Rows are numbered as the same table's CSV lines would be (the header is line 1).
    return list(table.column_names), _rows_from_records((i + 2, record) for i, record in enumerate(records))


def read_outputs(name: str, data: bytes) -> list[OutputRow]:
    """The rows of an outputs file, its format chosen by the name's extension; OutputsProblems if unreadable."""
    suffix = PurePath(name).suffix.lower()
    readers = {".csv": _read_csv, ".jsonl": _read_jsonl, ".parquet": _read_parquet}
    if suffix not in readers:
        raise OutputsProblems([f"{name}: unknown format {suffix or '(no extension)'}; "
                               f"give a {', '.join(OUTPUT_FORMATS.values())} file ({', '.join(OUTPUT_FORMATS)})"])
    columns, rows = readers[suffix](name, data)
    missing = [c for c in REQUIRED_COLUMNS if c not in columns]
    if missing:
        raise OutputsProblems([f"{name}:1:{column}: missing column \"{column}\" (needed: {', '.join(REQUIRED_COLUMNS)})"
                               for column in missing])
    if not rows:
        raise OutputsProblems([f"{name}: the file has a header but no responses"])
    return rows


def read_template(name: str, data: bytes) -> dict[str, Any]:
    """The template as a dict (YAML for .yaml/.yml, else JSON); OutputsProblems with the path of what is wrong."""
    text = _text(name, data)
    is_yaml = PurePath(name).suffix.lower() in {".yaml", ".yml"}
    try:
        template = yaml.safe_load(text) if is_yaml else json.loads(text)
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        raise OutputsProblems([f"{name}: not valid {'YAML' if is_yaml else 'JSON'}: {exc}"]) from None
    if not isinstance(template, dict):
        raise OutputsProblems([f"{name}: (top level): the template must hold one object (a study definition "
                               "without scenarios and blocks)"])
    problems = _Problems(name)
    for key in GENERATED_FIELDS:
        if key in template:
            problems.file_wide(f"{key}: a template has no {key}; they are built from the outputs file")
    if template.get("sample") is not None:
        try:
            SampleDef.model_validate(template["sample"])
        except ValidationError as exc:
            for error in exc.errors():
                problems.file_wide(f"{format_location(('sample', *error['loc']))}: {error['msg']}")
    problems.raise_any()
    return template


# --- sampling -----------------------------------------------------------------------------------


def stratum_quotas(sizes: dict[str, int], n: int) -> dict[str, int]:
    """Proportional shares of ``n`` by stratum size, rounded by largest remainder (Hamilton's method).

    Ties in the remainder go to the larger stratum, then to the stratum named first in sorted order,
    so the split never depends on the file's order."""
    total = sum(sizes.values())
    exact = {name: n * size / total for name, size in sizes.items()}
    quotas = {name: int(share) for name, share in exact.items()}
    left = n - sum(quotas.values())
    by_remainder = sorted(sizes, key=lambda name: (-(exact[name] - quotas[name]), -sizes[name], name))
    for name in by_remainder[:left]:
        quotas[name] += 1
    return quotas


def sample_prompt_ids(prompt_ids: list[str], sample: SampleDef, strata: dict[str, str] | None = None) -> set[str]:
    """The prompts a sample draws: ``sample.prompts`` of ``prompt_ids`` (in file order), reproducibly by seed.

    With ``strata`` (prompt id -> stratum), each stratum gets its proportional share (``stratum_quotas``) and is
    drawn from separately, strata in sorted order, all from one generator seeded with ``sample.seed``."""
    rng = random.Random(sample.seed)
    if strata is None:
        return set(rng.sample(prompt_ids, sample.prompts))
    members: dict[str, list[str]] = {}
    for prompt_id in prompt_ids:
        members.setdefault(strata[prompt_id], []).append(prompt_id)
    quotas = stratum_quotas({name: len(ids) for name, ids in members.items()}, sample.prompts)
    chosen: set[str] = set()
    for name in sorted(members):
        chosen.update(rng.sample(members[name], quotas[name]))
    return chosen


def _sampled(rows: list[OutputRow], sample: SampleDef, name: str, template_name: str) -> list[OutputRow]:
    prompt_ids = list(dict.fromkeys(row.values["prompt_id"] for row in rows))
    if sample.prompts > len(prompt_ids):
        raise OutputsProblems([f"{template_name}: sample.prompts: {sample.prompts} prompts asked for, but "
                               f"{name} has {len(prompt_ids)}"])
    strata = None
    if sample.stratify is not None:
        if sample.stratify not in rows[0].values:
            raise OutputsProblems([f'{template_name}: sample.stratify: {name} has no column "{sample.stratify}"'])
        problems, strata = _Problems(name), {}
        for row in rows:
            value = row.values.get(sample.stratify, "")
            first = strata.setdefault(row.values["prompt_id"], value)
            if first != value:
                problems.at(row.line, sample.stratify, f'"{value}" differs from "{first}" given earlier for prompt '
                            f'{row.values["prompt_id"]}; a prompt belongs to one stratum')
        problems.raise_any()
    chosen = sample_prompt_ids(prompt_ids, sample, strata)
    return [row for row in rows if row.values["prompt_id"] in chosen]


# --- building -----------------------------------------------------------------------------------


def _key_problem(value: str, limit: int) -> str | None:
    if not value:
        return "is empty"
    if len(value) > limit:
        return f"is {len(value)} characters long; at most {limit}"
    if not re.match(KEY_PATTERN, value):
        return f'"{value}" may use only letters, digits and . _ - (it becomes a key)'
    return None


def _context(row: OutputRow, problems: _Problems) -> list[dict[str, str]]:
    value = row.context
    if value in (None, ""):
        return []
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            problems.at(row.line, "context", f"not valid JSON ({exc.msg}); give a list of "
                        '{"role": "user"|"assistant", "text": ...} turns')
            return []
    try:
        turns = _TURNS.validate_python(value)
    except ValidationError as exc:
        for error in exc.errors()[:5]:
            where = format_location(("context", *error["loc"]))
            problems.at(row.line, "context", f"{where}: {error['msg']}; a context is a list of "
                        '{"role": "user"|"assistant", "text": ...} turns')
        return []
    return [turn.model_dump() for turn in turns]


@dataclass
class _Block:
    id: str
    scenario: str
    line: int
    set_number: int | None = None
    reference: str | None = None
    responses: list[dict[str, Any]] = field(default_factory=list)
    pairs: set[tuple[str, str]] = field(default_factory=set)


def _ordered_names(rows: list[OutputRow], column: str, given: Any, problems: _Problems, template_name: str,
                   extra: list[str]) -> list[str]:
    found = list(dict.fromkeys([row.values[column] for row in rows] + extra))
    if given is None:
        return found
    if not isinstance(given, list):
        return found  # the definition's own check names the problem
    listed = set(given)
    for row in rows:
        if row.values[column] not in listed:
            problems.at(row.line, column, f'"{row.values[column]}" is not one of the {column}s listed in '
                        f"{template_name}")
    return list(given)


def _design_problems(blocks: dict[str, _Block], has_block_column: bool, template: dict[str, Any],
                     problems: _Problems) -> None:
    """A prompt with fewer responses than the design needs: two per block at least; without a ``block``
    column every prompt has every (system, condition) of the file; ranking needs blocks of one size."""
    pairs_everywhere = set().union(*(b.pairs for b in blocks.values()))
    needed = max(len(b.responses) for b in blocks.values())
    for block in blocks.values():
        what = f"block {block.id}" if has_block_column else f"prompt {block.scenario}"
        if len(block.responses) < 2:
            problems.at(block.line, "system", f"{what} has {len(block.responses)} response; a block compares "
                        "at least two")
        elif not has_block_column and block.pairs != pairs_everywhere:
            missing = ", ".join(f"{s} ({c})" for s, c in sorted(pairs_everywhere - block.pairs))
            problems.at(block.line, "system", f"{what} lacks {missing}, which the other prompts have; every "
                        "prompt needs every system")
        elif template.get("ranking") and len(block.responses) < needed:
            problems.at(block.line, "system", f"{what} has {len(block.responses)} responses where other blocks "
                        f"have {needed}; ranking needs the same number in every block")


def _allocation_problems(template: dict[str, Any], blocks: int, template_name: str) -> list[str]:
    """k larger than the study's blocks, or r that the recruitment target cannot reach (r x blocks / k)."""
    allocation = template.get("allocation")
    if not isinstance(allocation, dict):
        return []  # "all", absent, or a shape the definition's own check names
    k, r = allocation.get("blocks_per_participant"), allocation.get("judgements_per_block")
    if not isinstance(k, int) or not isinstance(r, int) or k < 1 or r < 1:
        return []
    if k > blocks:
        return [f"{template_name}: allocation.blocks_per_participant: {k} blocks per participant, but the study "
                f"has {blocks} blocks"]
    recruitment = template.get("recruitment")
    target = recruitment.get("target_completions") if isinstance(recruitment, dict) else None
    needed = -(-r * blocks // k)
    if isinstance(target, int) and target < needed:
        return [f"{template_name}: allocation.judgements_per_block: {r} judgements of each of {blocks} blocks, "
                f"{k} per participant, need {needed} participants, but recruitment.target_completions is {target}"]
    return []


def build_definition(rows: list[OutputRow], template: dict[str, Any], *, name: str = "outputs",
                     template_name: str = "template") -> dict[str, Any]:
    """The study definition (not yet validated as a whole) of ``template`` with scenarios and blocks from ``rows``.

    Rows are sampled first when the template has ``sample``. Scenarios and blocks follow the file's order;
    responses within a block too (their option numbers count from 1), the block's ``reference`` last."""
    if template.get("sample") is not None:
        rows = _sampled(rows, SampleDef.model_validate(template["sample"]), name, template_name)
    problems = _Problems(name)
    has_block_column = "block" in rows[0].values
    reference_conditions = template.get("reference_conditions") or []
    if not isinstance(reference_conditions, list):
        reference_conditions = []  # the definition's own check names the problem
    # The reference's system and condition are named by the template (a study's word, not the code's).
    reference_name = reference_conditions[0] if reference_conditions else None
    scenarios: dict[str, dict[str, Any]] = {}
    scenario_lines: dict[str, int] = {}
    blocks: dict[str, _Block] = {}
    response_ids: dict[str, int] = {}
    for row in rows:
        v = row.values
        for column in REQUIRED_COLUMNS[1:]:
            if not v.get(column):
                problems.at(row.line, column, f"{column} is empty")
        if (problem := _key_problem(v["prompt_id"], limits.KEY)):
            problems.at(row.line, "prompt_id", f"prompt_id {problem}")
        for column, limit in (("system", limits.SYSTEM_NAME), ("condition", limits.CONDITION_NAME),
                              ("prompt_label", limits.SCENARIO_LABEL)):
            if len(v.get(column, "")) > limit:
                problems.at(row.line, column, f"{column} is {len(v[column])} characters long; at most {limit}")
        scenario = {"id": v["prompt_id"], "label": v.get("prompt_label", ""), "user_input": v["prompt"],
                    "context": _context(row, problems)}
        first = scenarios.setdefault(v["prompt_id"], scenario)
        scenario_lines.setdefault(v["prompt_id"], row.line)
        for key, column in (("user_input", "prompt"), ("label", "prompt_label"), ("context", "context")):
            if first[key] != scenario[key]:
                problems.at(row.line, column, f"differs from the {column} of prompt {v['prompt_id']} on line "
                            f"{scenario_lines[v['prompt_id']]}; every row of a prompt gives the same {column}")
        block_id = v.get("block") or v["prompt_id"]
        if has_block_column and (problem := _key_problem(v.get("block", ""), limits.KEY)):
            problems.at(row.line, "block", f"block {problem}")
        block = blocks.setdefault(block_id, _Block(id=block_id, scenario=v["prompt_id"], line=row.line))
        if block.scenario != v["prompt_id"]:
            problems.at(row.line, "block", f"block {block_id} is prompt {block.scenario} on line {block.line}; "
                        "a block shows one prompt")
        pair = (v["system"], v["condition"])
        if pair in block.pairs:
            key = "(block, system, condition)" if has_block_column else "(prompt_id, system, condition)"
            problems.at(row.line, "system", f'duplicate {key}: {block_id}, {v["system"]}, {v["condition"]} '
                        "is given twice")
        block.pairs.add(pair)
        if v.get("set"):
            try:
                block.set_number = int(v["set"])
            except ValueError:
                problems.at(row.line, "set", f'set "{v["set"]}" is not a whole number')
        if v.get("reference"):
            if reference_name is None:
                problems.at(row.line, "reference", f"{template_name}: reference_conditions: the outputs give a "
                            "reference response, so the template must name its condition (for example "
                            "reference_conditions: [reference])")
                reference_name = ""  # said once
            if block.reference not in (None, v["reference"]):
                problems.at(row.line, "reference", f"differs from the reference given for block {block_id} on "
                            f"line {block.line}; a block has one reference")
            block.reference = v["reference"]
        response_id = v.get("response_id") or f"{block_id}-R{len(block.responses) + 1}"
        if (problem := _key_problem(response_id, limits.ITEM_KEY)):
            problems.at(row.line, "response_id", f"response_id {problem}")
        elif response_id in response_ids:
            problems.at(row.line, "response_id", f'response_id "{response_id}" is used on line '
                        f"{response_ids[response_id]} already")
        response_ids.setdefault(response_id, row.line)
        block.responses.append({"id": response_id, "option": len(block.responses) + 1, "system": v["system"],
                                "condition": v["condition"], "text": v["response"]})
    for block in blocks.values():
        if block.reference is not None:
            block.responses.append({"id": f"{block.id}-R{len(block.responses) + 1}",
                                    "option": len(block.responses) + 1, "system": reference_name,
                                    "condition": reference_name, "text": block.reference})
            block.pairs.add((reference_name, reference_name))
    problems.raise_any()
    _design_problems(blocks, has_block_column, template, problems)
    with_reference = [reference_name] if any(b.reference is not None for b in blocks.values()) else []
    systems = _ordered_names(rows, "system", template.get("systems"), problems, template_name, with_reference)
    conditions = _ordered_names(rows, "condition", template.get("conditions"), problems, template_name,
                                with_reference)
    problems.raise_any()
    allocation = _allocation_problems(template, len(blocks), template_name)
    if allocation:
        raise OutputsProblems(allocation)
    generated = {
        "systems": systems,
        "conditions": conditions,
        "reference_conditions": list(dict.fromkeys(reference_conditions + with_reference)),
        "scenarios": [{k: s[k] for k in ("id", "label", "user_input", "context") if s[k] or k != "context"}
                      for s in scenarios.values()],
        "blocks": [{"id": b.id, "scenario": b.scenario, **({"set": b.set_number} if b.set_number is not None else {}),
                    "responses": b.responses} for b in blocks.values()],
    }
    if not generated["reference_conditions"] and "reference_conditions" not in template:
        del generated["reference_conditions"]
    return _in_schema_order({**template, **generated})


def _in_schema_order(definition: dict[str, Any]) -> dict[str, Any]:
    """Keys in the schema's order, then any others sorted: the written file never depends on dict history."""
    known = [key for key in definition_module.StudyDefinition.model_fields if key in definition]
    return {key: definition[key] for key in known + sorted(set(definition) - set(known))}


def definition_from_outputs(name: str, data: bytes, template_name: str, template_data: bytes, *,
                            overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """The complete, validated definition built from an outputs file and a template (whose top-level fields
    ``overrides`` replaces, e.g. the slug given on the New study page); OutputsProblems otherwise."""
    template = {**read_template(template_name, template_data), **(overrides or {})}
    definition = build_definition(read_outputs(name, data), template, name=name, template_name=template_name)
    try:
        parse_definition(definition)
    except DefinitionError as exc:
        # A path into the generated parts points at the outputs, any other at the template.
        raise OutputsProblems([f"{name if problem.startswith(FROM_OUTPUTS) else template_name}: {problem}"
                               for problem in exc.problems]) from None
    return definition


def definition_text(definition: dict[str, Any], *, as_yaml: bool = False) -> str:
    """The definition as a file a researcher reads and edits: JSON (2-space indent) or YAML, UTF-8 kept."""
    if as_yaml:
        return yaml.safe_dump(definition, sort_keys=False, allow_unicode=True, width=100)
    return json.dumps(definition, indent=2, ensure_ascii=False) + "\n"
