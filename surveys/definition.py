"""The study definition file: its schema and the checks across its parts.

``parse_definition`` returns a validated ``StudyDefinition`` or raises
``DefinitionError`` listing every problem with its path in the file, written
like ``blocks[3].responses[4].condition: unknown condition "fine_tuned"``
(indices count from 0). Nothing here touches the database.
"""

from __future__ import annotations

import json
import warnings
from collections import Counter
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from django.conf import settings
from django.dispatch import receiver
from pydantic import BaseModel, Discriminator, Field, Tag, ValidationError, ValidationInfo, create_model, field_validator, model_validator

from . import limits
from .definition_parts import (
    KEY_PATTERN, NO_NUL, Key, NonEmpty, Strict, Text, column_max, column_min, facing, facing_mark, not_facing,
)
from .models import AttentionCheck, Block, Study
from .questions import QUESTION_TYPES, definition_problems, question_types_changed
from .recruitment import completion_url_problem, id_pattern_problem

_KEY_PATTERN = KEY_PATTERN
ItemKey = Annotated[str, Field(min_length=1, max_length=limits.ITEM_KEY, pattern=_KEY_PATTERN), NO_NUL]
Param = Annotated[str, Field(min_length=1, max_length=limits.PANEL_PARAM, pattern=_KEY_PATTERN), NO_NUL]

# Texts stored in a column of limited length: at most as long as the column (surveys.limits).
Title = Annotated[str, Field(min_length=1, max_length=limits.TITLE), NO_NUL]
SystemName = Annotated[str, Field(min_length=1, max_length=limits.SYSTEM_NAME), NO_NUL]
ConditionName = Annotated[str, Field(min_length=1, max_length=limits.CONDITION_NAME), NO_NUL]
ScenarioLabel = Annotated[str, Field(max_length=limits.SCENARIO_LABEL), NO_NUL]
DemographicPrompt = Annotated[str, Field(min_length=1, max_length=limits.DEMOGRAPHIC_PROMPT), NO_NUL]

US_STATES = (
    "AL AK AZ AR CA CO CT DE DC FL GA HI ID IL IN IA KS KY LA ME MD MA MI MN MS MO MT NE NV NH NJ NM "
    "NY NC ND OH OK OR PA RI SC SD TN TX UT VT VA WA WV WI WY"
).split()
# Fixed answers the platform itself offers (not a study's words): the last two
# choices of a US-state question, and the way out of any demographic question.
OUTSIDE_US = "Outside the US"
PREFER_NOT = "Prefer not to answer"

# Column names of participants.csv that a demographic key must not take.
RESERVED_PARTICIPANT_COLUMNS = frozenset({
    "participant_id", "external_id", "started_at", "finished_at", "attention_passed", "region",
    "duration_minutes", "sd", "mae", "fast_share", "excluded_by", "payable", "reject_reason", "completion_code",
    "status", "source", "blocks_assigned", "blocks_answered", "seed",
})

DEMOGRAPHIC_TYPES = ("choice", "number", "us_state", "text")
BUILT_IN_REGION_MAPS = ("us_census",)


class TurnDef(Strict):
    """One turn of the conversation so far, shown above the responses as a chat transcript."""

    role: Literal["user", "assistant"]
    text: NonEmpty


class ScenarioDef(Strict):
    id: Key
    label: ScenarioLabel = ""
    user_input: NonEmpty
    context: list[TurnDef] = Field(
        default_factory=list,
        description="the conversation before user_input, oldest turn first (role: user or assistant); "
                    "shown as a chat transcript above the responses",
    )


class ResponseDef(Strict):
    id: ItemKey
    option: int | None = Field(default=None, ge=1, le=50)
    system: NonEmpty
    condition: NonEmpty
    text: NonEmpty
    label: Annotated[str, Field(max_length=limits.SOURCE_LABEL), NO_NUL] = Field(
        default="", description="shown source label, e.g. A-E (best-worst studies)")


class BlockDef(Strict):
    id: Key
    scenario: Key
    set: int | None = Field(default=None, ge=column_min(Block, "set_number"), le=column_max(Block, "set_number"))
    responses: list[ResponseDef] = Field(min_length=2, max_length=10)


class AttentionCheckDef(Strict):
    id: Key
    text: NonEmpty
    expected: int = Field(
        ge=column_min(AttentionCheck, "expected_value"), le=column_max(AttentionCheck, "expected_value"))


DemographicKey = Annotated[
    str, Field(min_length=1, max_length=limits.DEMOGRAPHIC_KEY, pattern=r"^[a-z][a-z0-9_]*$"), NO_NUL]
Answer = Annotated[str, Field(min_length=1, max_length=limits.DEMOGRAPHIC_CHOICE), NO_NUL]


class DemographicDef(Strict):
    """One demographic question: a key (its column in participants.csv), a prompt and a type.

    ``choice`` offers ``choices``; ``number`` takes a number in [min, max];
    ``us_state`` offers the USPS codes (shown as state names), "Outside the US"
    and "Prefer not to answer"; ``text`` takes up to ``max_length`` characters.
    Every type also accepts "Prefer not to answer". ``synonyms`` maps other
    words an imported participants.csv may use to one of the choices.
    """

    key: DemographicKey
    prompt: DemographicPrompt
    type: Text = Field(default="choice", description="choice, number, us_state or text")
    choices: list[Answer] = Field(default_factory=list)
    min: float | None = None
    max: float | None = None
    integer: bool = Field(default=True, description="number questions: whole numbers only")
    max_length: int = Field(default=200, ge=1, le=limits.DEMOGRAPHIC_TEXT)
    synonyms: dict[Answer, Answer] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _shape(self) -> "DemographicDef":
        if self.type not in DEMOGRAPHIC_TYPES:
            raise ValueError(f'unknown type "{self.type}"; use one of {", ".join(DEMOGRAPHIC_TYPES)}')
        if self.type == "choice" and not self.choices:
            raise ValueError("a choice question needs at least one choice")
        if self.type != "choice" and self.choices:
            raise ValueError(f"a {self.type} question takes no choices")
        if self.type == "number":
            if self.min is None or self.max is None:
                raise ValueError("a number question needs min and max")
            if self.max <= self.min:
                raise ValueError(f"max ({self.max:g}) must be greater than min ({self.min:g})")
        elif self.min is not None or self.max is not None:
            raise ValueError(f"min and max apply to number questions, not {self.type}")
        return self

    def offered(self) -> list[str]:
        """The answers a choice or US-state question offers, "Prefer not to answer" last."""
        values = list(self.choices) if self.type == "choice" else (US_STATES + [OUTSIDE_US] if self.type == "us_state" else [])
        return values + ([PREFER_NOT] if values and PREFER_NOT not in values else [])


class GroupDef(Strict):
    """One side of a subgroup comparison: listed answers, a number range, or every other answer."""

    label: Annotated[str, Field(min_length=1, max_length=limits.GROUP_LABEL), NO_NUL]
    answers: list[Answer] = Field(default_factory=list)
    at_least: float | None = None
    below: float | None = None
    rest: bool = Field(default=False, description="every answer the other group does not take")

    @model_validator(mode="after")
    def _one_rule(self) -> "GroupDef":
        rules = [bool(self.answers), self.at_least is not None or self.below is not None, self.rest]
        if sum(rules) != 1:
            raise ValueError("give exactly one of answers, at_least/below, or rest")
        return self


class SubgroupDef(Strict):
    """A two-group comparison on one demographic (a ``grouping`` of ttests.csv)."""

    key: Key
    demographic: Text
    group_a: GroupDef
    group_b: GroupDef
    leave_out: list[Answer] = Field(default_factory=list, description="answers that leave a participant out (blank and Prefer not to answer always do)")


class RegionsDef(Strict):
    """Regions of one demographic answer: the built-in US Census map, or the study's own map."""

    demographic: Text
    # Tagged, so that a problem is reported on the form given only ("regions.map.own map.West: ...").
    map: Annotated[
        Annotated[Text, Tag("built-in map")]
        | Annotated[dict[Answer, Annotated[str, Field(min_length=1, max_length=limits.REGION_NAME), NO_NUL]],
                    Tag("own map")],
        Discriminator(lambda value: "built-in map" if isinstance(value, str) else "own map"),
    ]


class ComparisonDef(Strict):
    """The head-to-head comparison: the baseline condition and the treatment condition."""

    baseline: ConditionName
    treatment: ConditionName


class JudgeDef(Strict):
    """A judge declared by the study (judges/): it answers the blocks' own questions beside the people."""

    name: Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9._-]{0,59}$"), NO_NUL] = Field(
        description="lower-case letters, digits and . _ - (a column value of judges.csv)")
    kind: Literal["llm", "other"] = Field(
        default="llm", description="llm: run against the OpenAI-compatible endpoint (manage.py judge_run); other: "
        "its answers are imported (manage.py import_judgements). Automatic metrics join as kind metric by themselves")
    model: Annotated[str, Field(max_length=200), NO_NUL] = Field(default="", description="llm: the model to ask "
                                                                 "(default: the server's JUDGE_MODEL)")
    prompt: Text = Field(default="", description="llm: the prompt template, in the study's language; $instructions, "
                         "$conversation, $responses, $questions and $answer_format are filled in (empty: the "
                         "default template)")


class SampleDef(Strict):
    """How ``manage.py new_study`` drew the study's prompts from a larger outputs file (surveys.outputs).

    Recorded so that the same file and seed give the same study again; the loader ignores it."""

    prompts: int = Field(ge=1, description="how many prompts to draw")
    seed: int = Field(description="seed of the draw: the same file and seed draw the same prompts")
    stratify: Text | None = Field(
        default=None, description="a column of the outputs file; each of its values gets its share of the prompts",
    )


class RetentionDef(Strict):
    """How long the panel's identifiers are kept (surveys.retention)."""

    identifiers_days: int = Field(
        ge=0, le=36500,
        description="days after the study closes when its panel identifiers are replaced by their pseudonyms "
                    "(identifiers.csv then says they were removed, and when); 0: at the first pass after closing",
    )


class QualityDef(Strict):
    duration_min_minutes: float = Field(default=10, ge=0)
    duration_max_minutes: float = Field(default=75, gt=0)
    fast_block_seconds: float = Field(default=10, ge=0)
    fast_share_max: float = Field(default=0.25, ge=0, le=1)
    straightline_sd_max: float = Field(default=0.6, ge=0)
    straightline_mae_min: float = Field(default=0.9, ge=0)
    attention_failures_allowed: int = Field(default=0, ge=0, le=column_max(Study, "attention_failures_allowed"))

    @model_validator(mode="after")
    def _window(self) -> "QualityDef":
        if self.duration_max_minutes <= self.duration_min_minutes:
            raise ValueError("duration_max_minutes must be greater than duration_min_minutes")
        return self


PROLIFIC_COMPLETION_URL = "https://app.prolific.com/submissions/complete?cc={code}"
# What a panel study uses when the file leaves them out; other modes have no panel.
PANEL_DEFAULTS = {
    "completion_url": PROLIFIC_COMPLETION_URL,
    "id_param": "PROLIFIC_PID",
    "study_param": "STUDY_ID",
    "session_param": "SESSION_ID",
    "id_pattern": r"^[0-9a-f]{24}$",
}
PANEL_ONLY = ("completion_code", *PANEL_DEFAULTS)


class RecruitmentDef(Strict):
    mode: Literal["panel", "open", "invited"] = Field(
        default="panel",
        description="panel: a link carrying the panel's id (Prolific by default); "
                    "open: one anonymous link for anyone, one participant per browser; "
                    "invited: personal links of named raters only (manage.py rater_links)",
    )
    completion_code: Annotated[
        str, Field(min_length=1, max_length=limits.COMPLETION_CODE, pattern=r"^[A-Za-z0-9_\-]+$"), NO_NUL
    ] | None = Field(default=None, validate_default=True, description="panel studies only (required there)")
    completion_url: Annotated[str, Field(max_length=limits.COMPLETION_URL), NO_NUL] | None = Field(
        default=None, validate_default=True,
        description="panel studies only; http(s) URL; {code} (the only placeholder) becomes the completion code; "
                    "empty: no panel to return to; default Prolific's",
    )
    target_completions: int | None = Field(default=None, gt=0, le=column_max(Study, "target_completions"))
    estimated_minutes: int | None = Field(
        default=None, ge=1, le=24 * 60,
        description="how long the study takes, as announced to participants; a place is held for twice this",
    )
    hold_minutes: int | None = Field(
        default=None, ge=1, le=30 * 24 * 60,
        description="how long a participant in progress holds a place; default 2 x estimated_minutes, "
                    "else quality.duration_max_minutes",
    )
    id_param: Param | None = Field(default=None, validate_default=True, description="panel studies only; default PROLIFIC_PID")
    study_param: Param | None = Field(default=None, validate_default=True, description="panel studies only; default STUDY_ID")
    session_param: Param | None = Field(default=None, validate_default=True, description="panel studies only; default SESSION_ID")
    id_pattern: Annotated[str, Field(max_length=limits.ID_PATTERN), NO_NUL] | None = Field(
        default=None, validate_default=True,
        description="panel studies only; regular expression a panel id must match in full (default ^[0-9a-f]{24}$); "
                    "no backreferences, lookarounds or nested quantifiers",
    )

    @field_validator("id_pattern")
    @classmethod
    def _regex(cls, value: str | None) -> str | None:
        if value is not None and (problem := id_pattern_problem(value)):
            raise ValueError(problem)
        return value

    @field_validator("completion_url")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        if value is not None and (problem := completion_url_problem(value)):
            raise ValueError(problem)
        return value

    @field_validator(*PANEL_ONLY)
    @classmethod
    def _panel_only(cls, value: str | None, info: ValidationInfo) -> str | None:
        """Panel studies get the defaults of what they leave out; other modes may not set these at all."""
        mode = info.data.get("mode")
        if mode == "panel" and value is None:
            if info.field_name == "completion_code":
                raise ValueError("a panel study needs the code its finishers are paid on")
            return PANEL_DEFAULTS[info.field_name]
        if mode not in (None, "panel") and value is not None:
            raise ValueError(f"an {mode} study has no panel (no panel ids, completion code or link back); remove it")
        return value


class AllocationDef(Strict):
    """Each participant judges k blocks, until every block has r judgements (surveys.allocation)."""

    blocks_per_participant: int = Field(ge=1, description="k: blocks each participant judges")
    judgements_per_block: int = Field(ge=1, description="r: judgements each block gets; the study's target of "
                                      "completions follows: r x blocks / k, rounded up")


# "construct" is the definition's word for what is judged; as a field it shadows pydantic's
# deprecated BaseModel.construct classmethod, which nothing here uses, so that warning is silenced.
with warnings.catch_warnings():
    warnings.filterwarnings("ignore", message='Field name "construct"', category=UserWarning)

    class _StudyDefinitionBase(Strict):
        # Each field says whether participants see or answer on it (facing) or only researchers do (not_facing).
        slug: Annotated[
            str, Field(min_length=1, max_length=limits.SLUG, pattern=r"^[a-z0-9]+(?:-[a-z0-9]+)*$"), NO_NUL
        ] = not_facing()
        title: Title = not_facing()
        participant_title: Annotated[str, Field(max_length=limits.TITLE), NO_NUL] = facing(
            "", description="the title participants see (page header and browser title), in the study's "
            "language; empty shows none. ``title`` is for researchers only: it may name the systems compared",
        )
        description: Text = not_facing("")
        demo_content: bool = not_facing(False)
        consent: NonEmpty = facing()
        instructions: NonEmpty = facing()
        question_text: Text = facing("")
        construct: Annotated[str, Field(min_length=1, max_length=limits.CONSTRUCT), NO_NUL] = facing(
            "preferred", description='what is judged, as an adjective, e.g. "helpful" or "clear"'
        )
        language: Annotated[str, Field(min_length=1, max_length=limits.LANGUAGE), NO_NUL] = facing(
            "en", description='the language of the participant pages\' fixed texts, one of the platform\'s '
            'languages (settings.LANGUAGES: "en", "zh-hans"); the study\'s own texts are written in it',
        )
        letter_labels: bool = facing(
            False, description="show responses as A, B, C ... by display position: the letters are drawn "
            "at random per participant and block with the order, so they never reveal a source",
        )
        systems: list[SystemName] = facing(min_length=1)
        conditions: list[ConditionName] = facing(min_length=1)
        reference_conditions: list[Text] = facing(default_factory=list)
        comparison: ComparisonDef | None = not_facing(None)
        scenarios: list[ScenarioDef] = facing(min_length=1)
        blocks: list[BlockDef] = facing(min_length=1)
        attention_checks: list[AttentionCheckDef] = facing(default_factory=list)
        demographics: list[DemographicDef] = facing(default_factory=list)
        subgroups: list[SubgroupDef] = not_facing(default_factory=list)
        regions: RegionsDef | None = not_facing(None)
        quality: QualityDef = not_facing(default_factory=QualityDef)
        recruitment: RecruitmentDef = not_facing()
        sample: SampleDef | None = not_facing(None)
        retention: RetentionDef | None = not_facing(
            None, description="{identifiers_days: N}: panel identifiers are replaced by pseudonyms N days after the "
            "study closes; absent: kept until the study is deleted")
        judges: list[JudgeDef] = not_facing(default_factory=list)
        allocation: Literal["all"] | AllocationDef = facing(
            "all", description='"all": every participant judges every block; or {blocks_per_participant: k, '
            "judgements_per_block: r}: each participant is given k blocks among those furthest from r judgements",
        )

        @field_validator("language")
        @classmethod
        def _known_language(cls, value: str) -> str:
            # Only languages whose translation ships complete are offered (settings.LANGUAGES).
            known = [code for code, _ in settings.LANGUAGES]
            if value not in known:
                raise ValueError(f'unknown language "{value}"; use one of {", ".join(known)}')
            return value


def _study_definition_model() -> type[BaseModel]:
    """The base completed by the parts each registered question type owns (its "dimensions", "ranking",
    "pairwise", "free_text" ...)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message='Field name "construct"', category=UserWarning)
        return create_model(
            "StudyDefinition", __base__=_StudyDefinitionBase, __module__=__name__,
            **{name: spec for kind in QUESTION_TYPES for name, spec in kind.definition_fields.items()},
        )


StudyDefinition = _study_definition_model()


def unclassified_fields(model: type[BaseModel] | None = None) -> list[str]:
    """Fields declared with neither ``facing`` nor ``not_facing`` (a test keeps StudyDefinition's empty)."""
    model = model or StudyDefinition
    return [name for name, field in model.model_fields.items() if facing_mark(field) is None]


def participant_facing_fields(model: type[BaseModel] | None = None) -> frozenset[str]:
    """The fields participants see or answer on. One declared without its mark counts among them, so that
    forgetting the mark can only refuse a reload, never let a change under existing answers through."""
    model = model or StudyDefinition
    return frozenset(name for name, field in model.model_fields.items() if facing_mark(field) is not False)


#: What a participant sees or answers on: it must not change once they exist (``surveys.loader``).
PARTICIPANT_FACING = participant_facing_fields()


@receiver(question_types_changed)
def _question_types_changed(**_: Any) -> None:
    """A type registered later brings its fields: the model and the frozen list follow. Readers look them up
    here (``definition.StudyDefinition``, ``definition.PARTICIPANT_FACING``) at the time they need them."""
    global StudyDefinition, PARTICIPANT_FACING
    StudyDefinition = _study_definition_model()
    PARTICIPANT_FACING = participant_facing_fields()


class DefinitionError(Exception):
    """Every problem found in a definition file, each prefixed by its path."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__("\n".join(problems))


def read_definition_file(path: str | Path) -> Any:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise DefinitionError([f"{path}: cannot read the file ({exc})"]) from None
    try:
        if path.suffix.lower() in {".yaml", ".yml"}:
            return yaml.safe_load(text)
        return json.loads(text)
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        raise DefinitionError([f"{path}: not valid {'YAML' if path.suffix.lower() in {'.yaml', '.yml'} else 'JSON'}: {exc}"]) from None


def format_location(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            part = str(part).replace("\0", "\\0")  # a NUL in a key: shown, not written into the message
            out += f".{part}" if out else part
    return out or "(top level)"


def parse_definition(data: Any) -> StudyDefinition:
    if not isinstance(data, dict):
        raise DefinitionError(["(top level): the file must hold one JSON object"])
    try:
        definition = StudyDefinition.model_validate(data)
    except ValidationError as exc:
        raise DefinitionError([f"{format_location(e['loc'])}: {e['msg']}" for e in exc.errors()]) from None
    problems = cross_reference_problems(definition)
    if problems:
        raise DefinitionError(problems)
    return definition


def _duplicates(values: list[str]) -> set[str]:
    return {value for value, count in Counter(values).items() if count > 1}


def cross_reference_problems(d: StudyDefinition) -> list[str]:
    """Checks that span several parts of the file (unknown names, duplicates)."""
    problems: list[str] = []
    for name, values in (("systems", d.systems), ("conditions", d.conditions)):
        for i, value in enumerate(values):
            if value in _duplicates(values):
                problems.append(f'{name}[{i}]: "{value}" is listed twice')
    for i, ref in enumerate(d.reference_conditions):
        if ref not in d.conditions:
            problems.append(f'reference_conditions[{i}]: unknown condition "{ref}"')
    problems += _check_keys("scenarios", [s.id for s in d.scenarios])
    problems += _check_keys("blocks", [b.id for b in d.blocks])
    problems += _check_keys("dimensions", [x.key for x in d.dimensions])
    problems += _check_keys("attention_checks", [a.id for a in d.attention_checks])
    problems += _check_keys("free_text", [f.key for f in d.free_text])
    problems += _check_keys("demographics", [x.key for x in d.demographics])
    problems += [problem.replace(".id:", ".name:") for problem in _check_keys("judges", [j.name for j in d.judges])]
    problems += _check_blocks(d)
    problems += _check_answer_modes(d)
    problems += _check_comparison(d)
    problems += _check_demographics(d)
    problems += _check_subgroups(d)
    problems += _check_regions(d)
    problems += allocation_problems(d)
    return problems


def allocation_target(*, blocks: int, blocks_per_participant: int, judgements_per_block: int) -> int:
    """Completions that give every block r judgements when each participant judges k: r x blocks / k, rounded up."""
    return -(-judgements_per_block * blocks // blocks_per_participant)


def allocation_problems(d: StudyDefinition) -> list[str]:
    if d.allocation == "all":
        return []
    k, r, n_blocks = d.allocation.blocks_per_participant, d.allocation.judgements_per_block, len(d.blocks)
    if k > n_blocks:
        return [f"allocation.blocks_per_participant: {k} is more than the study's {n_blocks} blocks"]
    needed = allocation_target(blocks=n_blocks, blocks_per_participant=k, judgements_per_block=r)
    target = d.recruitment.target_completions
    if target is not None and target < needed:
        return [f"allocation.judgements_per_block: {r} judgements of each of {n_blocks} blocks, {k} per participant, "
                f"need {needed} completions; recruitment.target_completions is {target} (leave it out: it follows "
                "from the allocation)"]
    if target is not None and target > needed:
        return [f"recruitment.target_completions: {target} is more than the allocation needs ({r} x {n_blocks} "
                f"blocks / {k} = {needed}); later participants would find no block to judge (leave it out: it "
                "follows from the allocation)"]
    return []


def _check_keys(name: str, keys: list[str]) -> list[str]:
    dupes = _duplicates(keys)
    return [f'{name}[{i}].id: "{key}" is used twice' for i, key in enumerate(keys) if key in dupes]


def _check_blocks(d: StudyDefinition) -> list[str]:
    problems = []
    scenario_ids = {s.id for s in d.scenarios}
    systems, conditions = set(d.systems), set(d.conditions)
    response_ids = [r.id for b in d.blocks for r in b.responses]
    duplicate_ids = _duplicates(response_ids)
    for i, block in enumerate(d.blocks):
        where = f"blocks[{i}]"
        if block.scenario not in scenario_ids:
            problems.append(f'{where}.scenario: unknown scenario "{block.scenario}"')
        options = [r.option for r in block.responses if r.option is not None]
        if len(options) != len(set(options)):
            problems.append(f"{where}.responses: the same option number is used twice")
        for k, response in enumerate(block.responses):
            at = f"{where}.responses[{k}]"
            if response.system not in systems:
                problems.append(f'{at}.system: unknown system "{response.system}"')
            if response.condition not in conditions:
                problems.append(f'{at}: unknown condition "{response.condition}"')
            if response.id in duplicate_ids:
                problems.append(f'{at}.id: "{response.id}" is used by another response')
    return problems


def _check_answer_modes(d: StudyDefinition) -> list[str]:
    problems = definition_problems(d)
    if d.attention_checks and not d.dimensions:
        problems.append("attention_checks: instructed checks need a rating dimension to answer on")
    if d.dimensions:
        first = d.dimensions[0]
        for i, check in enumerate(d.attention_checks):
            if not first.min <= check.expected <= first.max:
                problems.append(
                    f"attention_checks[{i}].expected: {check.expected} is outside the {first.key} scale "
                    f"{first.min}-{first.max}"
                )
    return problems


def _check_comparison(d: StudyDefinition) -> list[str]:
    if d.comparison is None:
        return []
    problems = []
    for side in ("baseline", "treatment"):
        name = getattr(d.comparison, side)
        if name not in d.conditions:
            problems.append(f'comparison.{side}: unknown condition "{name}"')
        elif name in d.reference_conditions:
            problems.append(f'comparison.{side}: "{name}" is a reference condition')
    if d.comparison.baseline == d.comparison.treatment:
        problems.append("comparison.treatment: must differ from the baseline")
    return problems


def _check_demographics(d: StudyDefinition) -> list[str]:
    problems = []
    for i, question in enumerate(d.demographics):
        if question.key in RESERVED_PARTICIPANT_COLUMNS:
            problems.append(f'demographics[{i}].key: "{question.key}" is a column of participants.csv already')
        offered = question.offered()
        for word, answer in question.synonyms.items():
            if answer not in offered:
                problems.append(f'demographics[{i}].synonyms.{word}: "{answer}" is not an answer of {question.key}')
    return problems


def _answer_problems(where: str, answers: list[str], question: DemographicDef) -> list[str]:
    if question.type not in ("choice", "us_state"):
        return [f"{where}: {question.key} is a {question.type} question; it has no answers to list"]
    offered = set(question.offered())
    return [f'{where}[{k}]: "{answer}" is not an answer of {question.key}'
            for k, answer in enumerate(answers) if answer not in offered]


def _check_group(where: str, group: GroupDef, question: DemographicDef) -> list[str]:
    if group.answers:
        return _answer_problems(f"{where}.answers", group.answers, question)
    if group.rest:
        return []
    if question.type != "number":
        return [f"{where}: at_least/below need a number question; {question.key} is a {question.type} question"]
    return []


def _check_subgroups(d: StudyDefinition) -> list[str]:
    problems = _check_keys("subgroups", [g.key for g in d.subgroups])
    questions = {q.key: q for q in d.demographics}
    for i, subgroup in enumerate(d.subgroups):
        where = f"subgroups[{i}]"
        question = questions.get(subgroup.demographic)
        if question is None:
            problems.append(f'{where}.demographic: unknown demographic "{subgroup.demographic}"')
            continue
        problems += _check_group(f"{where}.group_a", subgroup.group_a, question)
        problems += _check_group(f"{where}.group_b", subgroup.group_b, question)
        if subgroup.group_a.rest and subgroup.group_b.rest:
            problems.append(f"{where}.group_b.rest: only one group can take the rest")
        if subgroup.group_a.label == subgroup.group_b.label:
            problems.append(f"{where}.group_b.label: must differ from group_a's")
        if subgroup.leave_out:
            problems += _answer_problems(f"{where}.leave_out", subgroup.leave_out, question)
    return problems


def _check_regions(d: StudyDefinition) -> list[str]:
    if d.regions is None:
        return []
    question = next((q for q in d.demographics if q.key == d.regions.demographic), None)
    if question is None:
        return [f'regions.demographic: unknown demographic "{d.regions.demographic}"']
    region_map = d.regions.map
    if isinstance(region_map, str):
        if region_map not in BUILT_IN_REGION_MAPS:
            return [f'regions.map: unknown built-in map "{region_map}"; use one of {", ".join(BUILT_IN_REGION_MAPS)} '
                    "or give the study's own map (answer -> region)"]
        if question.type != "us_state":
            return [f"regions.map: us_census needs a us_state question; {question.key} is a {question.type} question"]
        return []
    if not region_map:
        return ["regions.map: the map is empty"]
    if question.type not in ("choice", "us_state"):
        return [f"regions.map: {question.key} is a {question.type} question; regions need a choice question"]
    offered = set(question.offered())
    return [f'regions.map.{answer}: "{answer}" is not an answer of {question.key}'
            for answer in region_map if answer not in offered]
