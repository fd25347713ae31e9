"""Writing a validated study definition into the database.

A study with no participants is updated in place (rows matched by their keys,
rows the file no longer names removed). Once anyone has taken part, only
settings that do not change what participants saw may change: the researchers' title,
recruitment targets, quality thresholds, the completion URL.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.db.models import F
from django.utils import timezone
from pydantic import ValidationError

from web.signals import announce_action

from . import allocation
from . import definition as definition_module
from .definition import PANEL_ONLY, RecruitmentDef, StudyDefinition, allocation_target
from .models import (
    AttentionCheck,
    Block,
    Condition,
    DemographicQuestion,
    Dimension,
    FreeTextQuestion,
    Item,
    Participant,
    Scenario,
    Study,
    System,
)


class StudyLocked(Exception):
    """The file would change what existing participants saw."""


@dataclass(frozen=True)
class LoadResult:
    study: Study
    created: bool
    content_changed: bool


def participant_facing_content(d: StudyDefinition) -> dict[str, Any]:
    """Everything a participant sees or answers on (the fields declared ``facing`` in the schema); must not
    change once they exist."""
    return d.model_dump(mode="json", include=definition_module.PARTICIPANT_FACING)


def stored_content(study: Study) -> dict[str, Any]:
    """The participant-facing content of the definition ``study`` was last loaded from.

    Stored definitions are complete dumps, so one that the schema now refuses
    (loaded before a check was added, e.g. on a completion URL or on a length
    that SQLite never enforced) is compared as stored: reloading is how it gets fixed."""
    try:
        return participant_facing_content(definition_module.StudyDefinition.model_validate(study.definition))
    except ValidationError:
        return {key: value for key, value in study.definition.items() if key in definition_module.PARTICIPANT_FACING}


def content_differences(old: dict[str, Any], new: dict[str, Any], path: str = "") -> list[str]:
    if isinstance(old, dict) and isinstance(new, dict):
        out = []
        for key in sorted(set(old) | set(new), key=str):
            out += content_differences(old.get(key), new.get(key), f"{path}.{key}" if path else str(key))
        return out
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        out = []
        for i, (a, b) in enumerate(zip(old, new)):
            out += content_differences(a, b, f"{path}[{i}]")
        return out
    return [] if old == new else [path]


def _study_fields(d: StudyDefinition) -> dict[str, Any]:
    return {
        "title": d.title,
        "participant_title": d.participant_title,
        "description": d.description,
        "is_demo_content": d.demo_content,
        "consent_text": d.consent,
        "instructions_text": d.instructions,
        "question_text": d.question_text,
        "construct": d.construct,
        "ranking_enabled": d.ranking,
        "best_worst_enabled": d.best_worst,
        "pairwise_enabled": d.pairwise,
        "letter_labels": d.letter_labels,
        "language": d.language,
        **_recruitment_fields(d.recruitment),
        **_allocation_fields(d),
        **d.quality.model_dump(),
        "definition": d.model_dump(mode="json"),
    }


def _recruitment_fields(r: RecruitmentDef) -> dict[str, Any]:
    fields = r.model_dump(exclude={"mode"})
    for name in PANEL_ONLY:  # empty, not null, in the columns of studies without a panel
        fields[name] = fields[name] or ""
    return {**fields, "recruitment_mode": r.mode}


def _allocation_fields(d: StudyDefinition) -> dict[str, Any]:
    if d.allocation == "all":
        return {"blocks_per_participant": None, "judgements_per_block": None}
    k, r = d.allocation.blocks_per_participant, d.allocation.judgements_per_block
    # The target follows from the allocation (the definition's checks refuse any other).
    return {"blocks_per_participant": k, "judgements_per_block": r,
            "target_completions": allocation_target(blocks=len(d.blocks), blocks_per_participant=k,
                                                    judgements_per_block=r)}


@transaction.atomic
def study_load(*, definition: StudyDefinition, as_draft: bool = False, actor: Any = None, request: Any = None,
               via: str = "") -> LoadResult:
    """Create the study, or update it under the rules above. ``as_draft``: a study this creates starts as a
    draft (closed until ``surveys.launch.study_launch``), as researchers' studies do (``load_study``, the API);
    otherwise it is created launched and open (the demo, tests). An existing study keeps its state.
    ``actor``/``request``/``via`` go to the audit trail ("study.load" for a new study, else "study.reload")."""
    study = Study.objects.select_for_update().filter(slug=definition.slug).first()
    created = study is None
    new_content = participant_facing_content(definition)
    if study is not None:
        old_content = stored_content(study)
        changed = content_differences(old_content, new_content)
        has_participants = Participant.objects.filter(study=study, is_preview=False).exists()
        if changed and has_participants:
            listed = ", ".join(changed[:8]) + (" ..." if len(changed) > 8 else "")
            raise StudyLocked(
                f'study "{study.slug}" already has participants, so what they saw cannot change '
                f"(changed: {listed}). Load it under a new slug instead."
            )
        if has_participants and study.recruitment_mode != definition.recruitment.mode:
            # Those in progress could no longer come back through the link they have.
            raise StudyLocked(
                f'study "{study.slug}" already has participants, so its recruitment.mode cannot change '
                f"from {study.recruitment_mode} to {definition.recruitment.mode}. Load it under a new slug instead."
            )
    else:
        changed = ["(new study)"]
    fields = _study_fields(definition)
    if created:
        launched_at = None if as_draft else timezone.now()
        study = Study.objects.create(slug=definition.slug, launched_at=launched_at, is_open=not as_draft, **fields)
    else:
        Study.objects.filter(pk=study.pk).update(**fields)
        study.refresh_from_db()
    if changed:
        # Preview participants have no counted answers; they go with the old content.
        Participant.objects.filter(study=study, is_preview=True).delete()
        _write_content(study, definition)
        allocation.tallies_create(study=study)
    # Every process re-reads the study's dimensions and questions at its next request (surveys.study_content).
    Study.objects.filter(pk=study.pk).update(content_version=F("content_version") + 1)
    study.refresh_from_db(fields=["content_version"])
    announce_action(actor=actor, study=study, action="study.load" if created else "study.reload", object=study.slug,
                    detail=" ".join(filter(None, [via, "draft" if created and as_draft else "",
                                                  "content changed" if changed and not created else ""])),
                    request=request)
    return LoadResult(study=study, created=created, content_changed=bool(changed))


def _sync(model, study: Study, key_field: str, wanted: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Upsert rows of ``model`` for ``study`` by key; delete the ones not wanted."""
    existing = {getattr(row, key_field): row for row in model.objects.filter(study=study)}
    for key, row in existing.items():
        if key not in wanted:
            row.delete()
    rows, new = {}, []
    for key, values in wanted.items():
        row = existing.get(key)
        if row is None:
            new.append(model(study=study, **{key_field: key}, **values))
        else:
            for name, value in values.items():
                setattr(row, name, value)
            row.save()
            rows[key] = row
    # New rows go in batches: a study built from thousands of model outputs loads in seconds (issue 25).
    for row in model.objects.bulk_create(new, batch_size=500):
        rows[getattr(row, key_field)] = row
    return rows


def _write_content(study: Study, d: StudyDefinition) -> None:
    # Items go first so that removing a block, system or condition is not
    # blocked by PROTECT references from items that are about to go anyway.
    wanted_items = {r.id for b in d.blocks for r in b.responses}
    Item.objects.filter(study=study).exclude(key__in=wanted_items).delete()
    Block.objects.filter(study=study).exclude(key__in=[b.id for b in d.blocks]).delete()

    systems = _sync(System, study, "name", {name: {} for name in d.systems})
    conditions = _sync(
        Condition, study, "name", {name: {"is_reference": name in d.reference_conditions} for name in d.conditions}
    )
    scenarios = _sync(
        Scenario,
        study,
        "key",
        {s.id: {"label": s.label, "user_input": s.user_input, "context": [t.model_dump() for t in s.context]}
         for s in d.scenarios},
    )
    _sync(
        Dimension,
        study,
        "key",
        {
            x.key: {"label": x.label, "scale_min": x.min, "scale_max": x.max, "point_labels": x.labels, "order": i}
            for i, x in enumerate(d.dimensions)
        },
    )
    blocks = _sync(
        Block,
        study,
        "key",
        {b.id: {"scenario": scenarios[b.scenario], "order": i, "set_number": b.set} for i, b in enumerate(d.blocks)},
    )
    # Options are re-numbered in two passes so the (block, option) constraint
    # never sees two rows with the same option in the middle of an update.
    Item.objects.filter(study=study).update(option=F("option") + 1000)
    wanted = {}
    for block in d.blocks:
        for k, r in enumerate(block.responses):
            wanted[r.id] = {
                "block": blocks[block.id],
                "option": r.option or k + 1,
                "source_label": r.label,
                "text": r.text,
                "system": systems[r.system],
                "condition": conditions[r.condition],
            }
    _sync(Item, study, "key", wanted)
    _sync(AttentionCheck, study, "key", {a.id: {"text": a.text, "expected_value": a.expected} for a in d.attention_checks})
    _sync(
        FreeTextQuestion,
        study,
        "key",
        {
            f.key: {"prompt": f.prompt, "max_length": f.max_length, "required": f.required, "per_block": f.per_block, "order": i}
            for i, f in enumerate(d.free_text)
        },
    )
    _sync(
        DemographicQuestion,
        study,
        "key",
        {
            q.key: {"prompt": q.prompt, "kind": q.type, "choices": q.choices, "min_value": q.min, "max_value": q.max,
                    "integer": q.integer, "max_length": q.max_length, "synonyms": q.synonyms, "order": i}
            for i, q in enumerate(d.demographics)
        },
    )
