"""Model outputs become a study (issue 25, items 1-2): manage.py new_study, sampling, the fixtures, bad input."""

from __future__ import annotations

import json
import random

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from django.core.management import CommandError, call_command

from surveys.definition import StudyDefinition, parse_definition, read_definition_file
from surveys.launch import study_launch
from surveys.models import Study
from surveys.outputs import stratum_quotas
from tests.support.outputs_files import TEMPLATE, csv_bytes, jsonl_bytes, outputs_rows, template_bytes
from tests.support.paths import FIXTURES

FIXTURE_SOURCES = {
    "tide": "tide.csv", "counselor": "counselor.jsonl", "counselor_zh": "counselor_zh.jsonl",
    "most_least": "most_least.csv", "pairwise": "pairwise.csv",
}


def new_study(tmp_path, outputs: bytes, template: bytes, *, outputs_name="outputs.csv",
              template_name="template.json", out="definition.json", load=False) -> dict:
    """Run the command on files written to tmp_path; the definition it wrote."""
    (tmp_path / outputs_name).write_bytes(outputs)
    (tmp_path / template_name).write_bytes(template)
    call_command("new_study", "--outputs", str(tmp_path / outputs_name), "--template", str(tmp_path / template_name),
                 "--out", str(tmp_path / out), *(["--load"] if load else []))
    return read_definition_file(tmp_path / out)


def refused(tmp_path, outputs: bytes, template: bytes, **kwargs) -> str:
    """The command's refusal; nothing was written (no definition file, no study)."""
    with pytest.raises(CommandError) as caught:
        new_study(tmp_path, outputs, template, **kwargs)
    assert not (tmp_path / kwargs.get("out", "definition.json")).exists()
    assert "nothing was written" in str(caught.value)
    return str(caught.value)


# --- the fixtures come from output files -----------------------------------------------------------

@pytest.mark.parametrize("name", sorted(FIXTURE_SOURCES))
def test_each_fixture_is_built_from_its_outputs_and_template(tmp_path, name):
    call_command("new_study", "--outputs", str(FIXTURES / "outputs" / FIXTURE_SOURCES[name]),
                 "--template", str(FIXTURES / "templates" / f"{name}.yaml"), "--out", str(tmp_path / "built.json"))
    built = read_definition_file(tmp_path / "built.json")
    assert built == read_definition_file(FIXTURES / f"{name}.json")


def test_a_fixture_loaded_through_new_study_is_the_study_load_study_makes(db, tmp_path, tide):
    """new_study --load (as a draft, under another slug) writes the same blocks, items and scenarios."""
    template = yaml.safe_load((FIXTURES / "templates" / "tide.yaml").read_text())
    (tmp_path / "t.json").write_text(json.dumps({**template, "slug": "tide-again"}))
    call_command("new_study", "--outputs", str(FIXTURES / "outputs" / "tide.csv"), "--template",
                 str(tmp_path / "t.json"), "--out", str(tmp_path / "d.yaml"), "--load")
    again = Study.objects.get(slug="tide-again")
    assert not again.is_open  # a draft: closed to participants until the researcher opens it

    def content(study):
        return sorted(study.items.values_list("key", "block__key", "block__set_number", "block__scenario__key",
                                              "block__scenario__label", "option", "system__name", "condition__name",
                                              "condition__is_reference", "text"))
    assert content(again) == content(tide) and len(content(tide)) == 120
    assert yaml.safe_load((tmp_path / "d.yaml").read_text())["slug"] == "tide-again"  # --out .yaml writes YAML


def test_no_builder_scripts_are_left_in_fixtures():
    assert not list(FIXTURES.glob("build_*.py"))


# --- sampling (CUHK drew 100 of its dialogues at random) ---------------------------------------------

def test_the_same_file_and_seed_give_a_byte_identical_definition(tmp_path):
    outputs = csv_bytes(outputs_rows(300))
    template = template_bytes(sample={"prompts": 100, "seed": 7})
    first = tmp_path / "a"
    second = tmp_path / "b"
    first.mkdir(), second.mkdir()
    definition = new_study(first, outputs, template)
    new_study(second, outputs, template)
    assert (first / "definition.json").read_bytes() == (second / "definition.json").read_bytes()
    chosen = [s["id"] for s in definition["scenarios"]]
    assert len(chosen) == 100 and len(definition["blocks"]) == 100
    assert all(len(b["responses"]) == 4 for b in definition["blocks"])
    assert definition["sample"] == {"prompts": 100, "seed": 7}  # recorded, for whoever draws it again
    # The draw is Python's random.sample over the prompts in file order, seeded: reproducible by anyone.
    ids = [f"P{p:05d}" for p in range(1, 301)]
    assert set(chosen) == set(random.Random(7).sample(ids, 100))
    assert chosen == sorted(chosen)  # kept in file order
    other = new_study(tmp_path, outputs, template_bytes(sample={"prompts": 100, "seed": 8}))
    assert {s["id"] for s in other["scenarios"]} != set(chosen)


def test_a_stratified_sample_gives_each_stratum_its_share(tmp_path):
    rows = outputs_rows(300, strata={"grief": 150, "anxiety": 90, "work": 60})
    definition = new_study(tmp_path, csv_bytes(rows), template_bytes(sample={"prompts": 100, "seed": 7,
                                                                             "stratify": "topic"}))
    topic = {row["prompt_id"]: row["topic"] for row in rows}
    drawn = [topic[s["id"]] for s in definition["scenarios"]]
    # 100 x 150/300, 100 x 90/300, 100 x 60/300
    assert {name: drawn.count(name) for name in set(drawn)} == {"grief": 50, "anxiety": 30, "work": 20}


def test_stratum_shares_round_by_largest_remainder():
    # 7 of 15: exact shares 7x7/15 = 3.27, 7x5/15 = 2.33, 7x3/15 = 1.40; floors 3 + 2 + 1 = 6, and the
    # seventh goes to the largest remainder (0.40, stratum c).
    assert stratum_quotas({"a": 7, "b": 5, "c": 3}, 7) == {"a": 3, "b": 2, "c": 2}
    # Equal remainders: the larger stratum first, then by name.
    assert stratum_quotas({"x": 1, "y": 3}, 2) == {"x": 0, "y": 2}  # 0.5 and 1.5: y is larger
    assert stratum_quotas({"x": 2, "y": 2, "z": 2}, 2) == {"x": 1, "y": 1, "z": 0}  # 0.67 each: by name


# --- what a file can say --------------------------------------------------------------------------

def test_context_becomes_the_scenario_conversation(tmp_path):
    rows = outputs_rows(2, ("a", "b"))
    turns = [{"role": "user", "text": "I can't sleep."}, {"role": "assistant", "text": "Since when?"}]
    for row in rows:
        row["context"] = json.dumps(turns) if row["prompt_id"] == "P00001" else ""
    definition = new_study(tmp_path, csv_bytes(rows), template_bytes())
    assert definition["scenarios"][0]["context"] == turns
    assert "context" not in definition["scenarios"][1]
    assert parse_definition(definition).scenarios[1].context == []


def test_a_block_column_shows_one_prompt_in_several_blocks(tmp_path):
    rows = outputs_rows(2, ("a", "b", "c", "d"))
    for row in rows:
        row["block"] = f'{row["prompt_id"]}-{"x" if row["system"] in ("a", "b") else "y"}'
    definition = new_study(tmp_path, csv_bytes(rows), template_bytes())
    assert [(b["id"], b["scenario"], [r["system"] for r in b["responses"]]) for b in definition["blocks"]] == [
        ("P00001-x", "P00001", ["a", "b"]), ("P00001-y", "P00001", ["c", "d"]),
        ("P00002-x", "P00002", ["a", "b"]), ("P00002-y", "P00002", ["c", "d"]),
    ]
    assert [s["id"] for s in definition["scenarios"]] == ["P00001", "P00002"]


def test_a_reference_column_adds_a_reference_response_to_each_block(tmp_path):
    rows = outputs_rows(2, ("a", "b"))
    for row in rows:
        row["reference"] = f'What a counselor wrote to {row["prompt_id"]}.'
    definition = new_study(tmp_path, csv_bytes(rows), template_bytes(comparison={"baseline": "base",
                                                                                 "treatment": "tuned"},
                                                                     reference_conditions=["counselor"]))
    # The template names the reference (the study's word, not the code's).
    assert definition["reference_conditions"] == ["counselor"]
    assert definition["conditions"] == ["base", "tuned", "counselor"]
    last = definition["blocks"][1]["responses"][-1]
    assert last == {"id": "P00002-R3", "option": 3, "system": "counselor", "condition": "counselor",
                    "text": "What a counselor wrote to P00002."}


def test_a_reference_column_without_the_templates_reference_conditions_is_refused(tmp_path):
    rows = [{**row, "reference": "What a counselor wrote." if i == 1 else ""}  # line 3 (the header is line 1)
            for i, row in enumerate(outputs_rows(2, ("a", "b")))]
    message = refused(tmp_path, csv_bytes(rows), template_bytes())
    assert ("outputs.csv:3:reference: template.json: reference_conditions: the outputs give a reference response, so "
            "the template must name its condition") in message.replace(str(tmp_path) + "/", "")


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_jsonl_and_parquet_give_the_same_definition_as_csv(tmp_path, fmt):
    rows = outputs_rows(5)
    rows[0]["context"] = [{"role": "user", "text": "Hello"}]
    for row in rows[1:4]:
        row["context"] = rows[0]["context"]
    as_csv = [{**row, "context": json.dumps(row.get("context", ""))} if row.get("context") else {**row, "context": ""}
              for row in rows]
    expected = new_study(tmp_path, csv_bytes(as_csv), template_bytes(), out="csv.json")
    if fmt == "jsonl":
        data = jsonl_bytes(rows)
    else:
        sink = pa.BufferOutputStream()
        records = [{**row, "context": json.dumps(row["context"]) if row.get("context") else None} for row in rows]
        pq.write_table(pa.Table.from_pylist(records), sink)
        data = sink.getvalue().to_pybytes()
    assert new_study(tmp_path, data, template_bytes(), outputs_name=f"outputs.{fmt}", out=f"{fmt}.json") == expected


def test_the_template_passes_allocation_through(tmp_path):
    from surveys.outputs import build_definition, read_outputs

    allocation = {"blocks_per_participant": 5, "judgements_per_block": 3}
    rows = read_outputs("o.csv", csv_bytes(outputs_rows(20)))
    definition = build_definition(rows, {**TEMPLATE, "allocation": allocation})
    assert definition["allocation"] == allocation and len(definition["blocks"]) == 20


# --- bad input: refused with its line and column (or its path), nothing written -----------------------

def test_a_missing_column_is_refused(tmp_path):
    rows = outputs_rows(3)
    message = refused(tmp_path, csv_bytes(rows, ["prompt_id", "prompt", "system", "response"]), template_bytes())
    assert 'outputs.csv:1:condition: missing column "condition"' in message


def test_a_jsonl_line_without_a_column_is_refused(tmp_path):
    rows = outputs_rows(2)
    del rows[2]["response"]
    assert 'outputs.jsonl:3:response: this line has no "response"' in refused(
        tmp_path, jsonl_bytes(rows), template_bytes(), outputs_name="outputs.jsonl")


def test_a_duplicate_prompt_and_system_is_refused(tmp_path):
    rows = outputs_rows(3)
    rows.insert(5, dict(rows[4]))  # P00002 alpha again, on line 7 (the header is line 1)
    message = refused(tmp_path, csv_bytes(rows), template_bytes())
    assert "outputs.csv:7:system: duplicate (prompt_id, system, condition): P00002, alpha, base" in message


def test_a_duplicate_block_and_system_is_refused(tmp_path):
    rows = outputs_rows(2, ("a", "b", "c"))
    for row in rows:
        row["block"] = "B1" if row["prompt_id"] == "P00001" else "B2"
    rows.append({**rows[3], "response": "again"})  # B2, a on line 8
    assert "outputs.csv:8:system: duplicate (block, system, condition): B2, a, base" in refused(
        tmp_path, csv_bytes(rows), template_bytes())


def test_a_prompt_with_fewer_systems_than_the_design_needs_is_refused(tmp_path):
    rows = [row for row in outputs_rows(3) if not (row["prompt_id"] == "P00002" and row["system"] == "gamma")]
    message = refused(tmp_path, csv_bytes(rows), template_bytes())
    assert "outputs.csv:6:system: prompt P00002 lacks gamma (base)" in message
    one = [row for row in outputs_rows(2, ("a", "b")) if not (row["prompt_id"] == "P00002" and row["system"] == "b")]
    for row in one:
        row["block"] = row["prompt_id"]
    assert "outputs.csv:4:system: block P00002 has 1 response" in refused(tmp_path, csv_bytes(one), template_bytes())


@pytest.mark.parametrize("context, why", [
    ('{"role": "user", "text": "hi"}', "Input should be a valid list"),
    ('[{"role": "therapist", "text": "hi"}]', "context[0].role"),
    ('[{"role": "user"}]', "context[0].text: Field required"),
    ("[{'role': 'user'", "not valid JSON"),
])
def test_a_context_that_is_not_a_list_of_turns_is_refused(tmp_path, context, why):
    rows = outputs_rows(2)
    rows = [{**row, "context": context if i == 5 else ""} for i, row in enumerate(rows)]
    message = refused(tmp_path, csv_bytes(rows), template_bytes())
    assert "outputs.csv:7:context: " in message and why in message


def test_k_larger_than_the_blocks_is_refused(tmp_path):
    template = template_bytes(allocation={"blocks_per_participant": 12, "judgements_per_block": 2})
    assert ("template.json: allocation.blocks_per_participant: 12 blocks per participant, but the study has 10 "
            "blocks") in refused(tmp_path, csv_bytes(outputs_rows(10)), template)


def test_r_that_the_target_cannot_reach_is_refused(tmp_path):
    # r x blocks / k = 5 x 10 / 4 = 12.5: 13 participants are needed, the target is 12.
    template = template_bytes(allocation={"blocks_per_participant": 4, "judgements_per_block": 5},
                              recruitment={"mode": "open", "target_completions": 12})
    assert ("allocation.judgements_per_block: 5 judgements of each of 10 blocks, 4 per participant, need 13 "
            "participants, but recruitment.target_completions is 12") in refused(
        tmp_path, csv_bytes(outputs_rows(10)), template)


def test_a_sample_larger_than_the_file_is_refused(tmp_path):
    assert "template.json: sample.prompts: 40 prompts asked for, but " in refused(
        tmp_path, csv_bytes(outputs_rows(30)), template_bytes(sample={"prompts": 40, "seed": 1}))


def test_a_stratify_column_the_file_lacks_is_refused(tmp_path):
    assert 'sample.stratify: ' in refused(tmp_path, csv_bytes(outputs_rows(30)),
                                          template_bytes(sample={"prompts": 4, "seed": 1, "stratify": "topic"}))


def test_a_file_that_is_not_utf8_is_refused(tmp_path):
    rows = outputs_rows(3)
    rows[4]["response"] = "Caf\u00e9 au lait"
    data = csv_bytes(rows).decode("utf-8").encode("latin-1")
    line = 6
    column = data.split(b"\n")[line - 1].index(b"\xe9") + 1
    message = refused(tmp_path, data, template_bytes())
    assert f"outputs.csv:{line}:{column}: the file is not UTF-8 (byte 0xe9)" in message


def test_a_template_that_lists_blocks_is_refused(tmp_path):
    assert "template.json: blocks: a template has no blocks" in refused(
        tmp_path, csv_bytes(outputs_rows(3)), template_bytes(blocks=[]))


def test_a_template_problem_names_its_path(tmp_path):
    message = refused(tmp_path, csv_bytes(outputs_rows(3)), template_bytes(construct=""))
    assert "template.json: construct: String should have at least 1 character" in message


def test_load_refuses_an_existing_slug_and_writes_nothing(db, tmp_path, tide):
    message = refused(tmp_path, csv_bytes(outputs_rows(3)), template_bytes(slug="tide"), load=True)
    assert 'a study with the slug "tide" exists already' in message
    assert tide.items.count() == 120


def test_load_creates_a_draft(db, tmp_path):
    new_study(tmp_path, csv_bytes(outputs_rows(6)), template_bytes(), load=True)
    study = Study.objects.get(slug="generated")
    assert not study.is_open and study.blocks.count() == 6 and study.items.count() == 24


# --- end to end: a sampled study from generated outputs, answered by bots through the views -----------

ALLOCATION_IN_SCHEMA = "allocation" in StudyDefinition.model_fields


@pytest.mark.slow(reason="a sampled study answered by bots to r judgements per block")
def test_a_sampled_study_from_outputs_is_answered_to_r_judgements_per_block(db, tmp_path):
    """CUHK's path: 12 of 300 prompts drawn, loaded as a draft, opened, answered by bots through every page.

    With allocation (k = 4 blocks each, r = 3 judgements) 9 participants complete it and every block stays
    within 1 of the others throughout; before the allocation schema is merged, everyone judges every block."""
    from bots.drive import run_in_process
    from bots.personas import Persona
    from surveys.models import BlockVisit

    allocation = {"blocks_per_participant": 4, "judgements_per_block": 3}
    template = template_bytes(sample={"prompts": 12, "seed": 7}, recruitment={"completion_code": "GEN12"},
                              **({"allocation": allocation} if ALLOCATION_IN_SCHEMA else {}))
    new_study(tmp_path, csv_bytes(outputs_rows(300)), template, load=True)
    study = Study.objects.get(slug="generated")
    assert study.blocks.count() == 12 and not study.is_open
    study_launch(study=study)  # the researcher launches the draft
    study.refresh_from_db()
    participants, per_participant = (9, 4) if ALLOCATION_IN_SCHEMA else (3, 12)

    def judgements() -> list[int]:
        counts = dict.fromkeys(study.blocks.values_list("pk", flat=True), 0)
        for block_id in BlockVisit.objects.filter(participant__study=study, submitted_at__isnull=False,
                                                  block__isnull=False).values_list("block_id", flat=True):
            counts[block_id] += 1
        return list(counts.values())

    for seed in range(participants):
        run = run_in_process(persona=Persona(), study=study, seed=100 + seed)
        assert run.outcome == "completed" and run.completion_code == "GEN12", run
        counts = judgements()
        assert max(counts) - min(counts) <= 1 and sum(counts) == (seed + 1) * per_participant
    assert judgements() == [3] * 12


def test_without_out_the_definition_goes_to_standard_output(tmp_path):
    import io

    (tmp_path / "o.csv").write_bytes(csv_bytes(outputs_rows(3)))
    (tmp_path / "t.json").write_bytes(template_bytes())
    printed = io.StringIO()
    call_command("new_study", "--outputs", str(tmp_path / "o.csv"), "--template", str(tmp_path / "t.json"),
                 stdout=printed)
    definition = json.loads(printed.getvalue())
    assert [b["id"] for b in definition["blocks"]] == ["P00001", "P00002", "P00003"]
    assert list(definition)[:2] == ["slug", "title"]  # the schema's order, whatever the template's


def test_a_large_new_study_is_written_in_batches_not_a_query_per_row(db, django_assert_max_num_queries):
    """300 prompts x 4 systems: 300 scenarios, 300 blocks, 1,200 items in a few dozen queries (one per
    row before: about 1,800)."""
    from surveys.outputs import definition_from_outputs
    from surveys.study_creation import study_create_draft

    definition = parse_definition(definition_from_outputs("o.csv", csv_bytes(outputs_rows(300)), "t.json",
                                                          template_bytes()))
    # 1,500 rows: a query per row would be over 1,500; batches of 500 plus the study's own rows stay under 50.
    with django_assert_max_num_queries(50):
        study = study_create_draft(definition=definition)
    assert study.items.count() == 1200 and study.blocks.count() == 300
