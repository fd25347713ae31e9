"""Never a 500, on any study: generated definitions end to end.

Hypothesis draws valid definitions that differ in what the platform must not
assume (condition names and how many, with or without a comparison and
references, dimensions, ranking, best-worst or pairwise, demographic questions of every
type, subgroups and regions, free text). Each is loaded, filled with scripted
participants, analysed, and every researcher page and export is opened: all
answer 200, and a run computes exactly the analyses its design applies to.
"""

from __future__ import annotations

import csv
import io
import itertools
import string

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from analysis import registry
from analysis.design import study_design
from analysis.exporting.exports import result_exports_of
from analysis.selectors import result_table_names
from surveys.definition import parse_definition
from surveys.loader import study_load
from tests.support.researcher import fill_with_bots, finished_run

pytestmark = [
    pytest.mark.slow(reason="hypothesis: generated studies filled by bots and analysed"),
    pytest.mark.django_db(transaction=False),
]

EXAMPLES = itertools.count(1)
NAME = st.text(alphabet=string.ascii_lowercase + "-", min_size=2, max_size=12).filter(lambda s: s.strip("-") == s)


@st.composite
def demographics(draw) -> list[dict]:
    questions = []
    kinds = draw(st.lists(st.sampled_from(["choice", "number", "us_state", "text"]), max_size=4, unique=True))
    for k, kind in enumerate(kinds):
        question = {"key": f"q{k}_{kind}", "prompt": f"Question {k}?", "type": kind}
        if kind == "choice":
            choices = draw(st.lists(st.text(alphabet=string.ascii_letters + " ,/'", min_size=1, max_size=80)
                                    .map(str.strip).filter(bool), min_size=2, max_size=5, unique=True))
            question["choices"] = choices
        elif kind == "number":
            low = draw(st.integers(0, 50))
            question.update(min=low, max=low + draw(st.integers(10, 80)))
        elif kind == "text":
            question["max_length"] = draw(st.integers(5, 300))
        questions.append(question)
    return questions


def _subgroups(questions: list[dict]) -> list[dict]:
    out = []
    for question in questions:
        if question["type"] == "choice":
            out.append({"key": f"by_{question['key']}", "demographic": question["key"],
                        "group_a": {"label": "first", "answers": question["choices"][:1]},
                        "group_b": {"label": "rest", "rest": True}})
        elif question["type"] == "number":
            middle = (question["min"] + question["max"]) / 2
            out.append({"key": f"by_{question['key']}", "demographic": question["key"],
                        "group_a": {"label": "high", "at_least": middle}, "group_b": {"label": "low", "below": middle}})
    return out


def _regions(questions: list[dict], draw) -> dict | None:
    for question in questions:
        if question["type"] == "us_state":
            return {"demographic": question["key"], "map": "us_census"}
        if question["type"] == "choice" and draw(st.booleans()):
            return {"demographic": question["key"],
                    "map": {answer: f"R{k % 2}" for k, answer in enumerate(question["choices"])}}
    return None


@st.composite
def definitions(draw) -> dict:
    conditions = draw(st.lists(NAME, min_size=2, max_size=4, unique=True))
    references = conditions[2:3] if draw(st.booleans()) else []
    systems = [f"model-{k}" for k in range(draw(st.integers(1, 3)))]
    mode = draw(st.sampled_from(["ratings", "ratings+ranking", "best_worst", "ratings+best_worst", "pairwise",
                                 "ratings+pairwise"]))
    dimensions = [{"key": f"d{k}", "label": f"Dimension {k}", "min": 1, "max": draw(st.sampled_from([5, 7]))}
                  for k in range(draw(st.integers(1, 3)) if "ratings" in mode else 0)]
    per_block = 2 if "pairwise" in mode else draw(st.integers(2, 4))
    scenarios = [{"id": f"S{k}", "label": f"Scenario {k}", "user_input": f"Message {k}"} for k in range(2)]
    blocks = []
    for b in range(4):
        responses = [{"id": f"B{b}-R{k}", "system": systems[(b + k) % len(systems)],
                      "condition": conditions[k % len(conditions)], "text": f"Response {k} of block {b}"}
                     for k in range(per_block)]
        blocks.append({"id": f"B{b}", "scenario": f"S{b % 2}", "responses": responses})
    questions = draw(demographics())
    definition = {
        "slug": "generated", "title": "Generated study", "consent": "Consent text.", "instructions": "Do it.",
        "construct": draw(st.sampled_from(["helpful", "empathetic", "clear"])),
        "ranking": mode == "ratings+ranking", "best_worst": "best_worst" in mode, "pairwise": "pairwise" in mode,
        "letter_labels": draw(st.booleans()),
        "dimensions": dimensions, "systems": systems, "conditions": conditions,
        "reference_conditions": references, "scenarios": scenarios, "blocks": blocks,
        "free_text": [{"key": "why", "prompt": "Why?", "per_block": draw(st.booleans())}],
        "demographics": questions,
        "quality": {"duration_min_minutes": 0, "duration_max_minutes": 600, "fast_block_seconds": 0},
        "recruitment": {"completion_code": "GEN123"},
    }
    if draw(st.booleans()):
        definition["comparison"] = {"baseline": conditions[0], "treatment": conditions[1]}
    if draw(st.booleans()):
        definition["subgroups"] = _subgroups(questions)
    if regions := _regions(questions, draw):
        definition["regions"] = regions
    return definition


def _researcher_urls(study, run) -> list[str]:
    base = f"/studies/{study.slug}"
    urls = [f"{base}/", f"{base}/dashboard.json", f"{base}/exports/", f"{base}/import/",
            f"{base}/runs/{run.pk}/", f"{base}/runs/{run.pk}.json", f"{base}/exports/everything.zip"]
    urls += [f"{base}/runs/{run.pk}/tables/{name}.csv" for name in result_table_names(run=run)]
    urls += [f"{base}/exports/{name}.csv" for name in ["participants", "ratings", *result_exports_of(run)]]
    api = f"/api/studies/{study.slug}"
    urls += [f"{api}/", f"{api}/participants/", f"{api}/ratings/", f"{api}/runs/{run.pk}/",
             f"{api}/runs/{run.pk}/tables/", f"{api}/exports/"]
    urls += [f"{api}/runs/{run.pk}/tables/{name}/" for name in result_table_names(run=run)]
    return urls


@settings(max_examples=10, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=definitions())
def test_every_researcher_page_and_export_of_a_generated_study_answers_200(data, owner_client, owner, monkeypatch):
    # Hypothesis runs every example in the same test transaction: each study gets a slug of its own.
    data = {**data, "slug": f"generated-{next(EXAMPLES)}"}
    study = study_load(definition=parse_definition(data)).study
    study.owners.add(owner)
    fill_with_bots(study, 6, seed=3)
    run = finished_run(study)

    design = study_design(study.pk)
    expected = {a.name for a in registry.statistics_analyses(design=design.features)}
    expected |= {"filter_flow"} | ({"filter_flow_by_subgroup"} if design.subgroups else set())
    assert set(result_table_names(run=run)) == expected
    assert not run.failures, run.failures

    for url in _researcher_urls(study, run):
        response = owner_client.get(url)
        assert response.status_code == 200, (url, response.status_code)


@pytest.mark.parametrize("fixture", ["tide", "counselor", "most_least", "pairwise"])
def test_every_researcher_page_and_export_of_each_seed_study_answers_200(request, fixture, owner_client, owner):
    """The counselor results page once answered 500 (a win grid without a zero-shot condition)."""
    study = request.getfixturevalue(fixture)
    study.owners.add(owner)
    fill_with_bots(study, 8, seed=5)
    run = finished_run(study)
    assert not run.failures, run.failures
    for url in _researcher_urls(study, run):
        response = owner_client.get(url)
        assert response.status_code == 200, (url, response.status_code)
    if study.slug == "counselor":
        response = owner_client.get(f"/studies/{study.slug}/runs/{run.pk}/tables/win_table.csv")
        rows = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode("utf-8-sig"))))
        # The winner is named by the study's own conditions.
        assert rows and {row["winner"] for row in rows} <= {"base", "fine-tuned", "tie", ""}
        assert any(row["winner"] for row in rows)
