"""Issue 25's done-when: a study built from a generated outputs file with ``sample`` and ``allocation``,
scripted participants sent through it over HTTP, and every block found with r judgements (within 1 of
each other while running, exactly r at the end)."""

from __future__ import annotations

import pytest

from bots.drive import run_over_http
from bots.personas import Persona
from surveys.coverage import block_coverage_rows
from surveys.definition import parse_definition
from surveys.launch import study_launch
from surveys.loader import study_load
from surveys.models import Participant
from surveys.outputs import definition_from_outputs
from tests.support.outputs_files import csv_bytes, outputs_rows, template_bytes
from tests.support.threads import in_threads

K, R = 4, 3


@pytest.mark.slow(reason="bots over HTTP against a live server until every block has r judgements")
def test_bots_over_http_leave_every_block_with_r_judgements(live_server):
    """Built as ``manage.py new_study`` builds it (surveys.outputs), loaded as a draft and launched."""
    outputs = csv_bytes(outputs_rows(40))
    template = template_bytes(slug="sampled", sample={"prompts": 12, "seed": 7}, recruitment={"completion_code": "GEN12"},
                              allocation={"blocks_per_participant": K, "judgements_per_block": R})
    definition = definition_from_outputs("outputs.csv", outputs, "template.json", template)
    # The same file and seed draw the same prompts.
    assert definition == definition_from_outputs("outputs.csv", outputs, "template.json", template)
    study = study_load(definition=parse_definition(definition), as_draft=True).study
    study_launch(study=study)
    study.refresh_from_db()
    assert study.blocks.count() == 12 and study.target_completions == -(-R * 12 // K) == 9

    def judged() -> list[int]:
        return [row["judged"] for row in block_coverage_rows(study)]

    def bot(i: int, wave: int):
        return run_over_http(persona=Persona(), base_url=live_server.url, slug="sampled", seed=100 * wave + i)

    for wave in range(3):  # three at a time, as they would arrive
        runs = in_threads(3, lambda i: bot(i, wave))
        assert [run.outcome for run in runs] == ["completed"] * 3
        counts = judged()
        assert max(counts) - min(counts) <= 1, (wave, counts)
        assert sum(counts) == 3 * K * (wave + 1)
    assert judged() == [R] * 12
    assert Participant.objects.filter(study=study, status="completed").count() == 9
    late = run_over_http(persona=Persona(), base_url=live_server.url, slug="sampled", seed=999)
    assert late.outcome == "refused"  # the study is full: every block has its r judgements
    assert judged() == [R] * 12
