"""free_text.csv and choices.csv (DESIGN 3.3): exact columns, retained participants only, escaped cells,
the labels participants saw; the same rows under the API; the researchers' page of written answers."""

from __future__ import annotations

import csv
import string

import pytest
from django.core.management import call_command

from analysis.models import ParticipantResult
from surveys.models import FreeTextAnswer, Item, ItemPlacement, Participant, Study
from tests.support.downloads import csv_rows
from tests.support.researcher import fill_with_bots, finished_run
from tests.support.shared import in_process_tasks, rows_kept_until_exit
from tests.support.studies import load_reasons_per_block

FREE_TEXT_HEADER = ["participant_id", "question_key", "block_id", "scenario", "text"]
CHOICES_HEADER = ["participant_id", "block_id", "scenario", "response_id", "model", "condition", "label", "position",
                  "choice"]


@pytest.fixture
def ml_run(most_least, owner, quick_stats):
    """most-least (letters by position, one final "why" question), owned by ``owner``, 12 bots, a finished run."""
    most_least.owners.add(owner)
    fill_with_bots(most_least, 12)
    return finished_run(most_least)


def retained_pseudonyms(run) -> set[str]:
    return set(ParticipantResult.objects.filter(run=run, excluded_by="").values_list("participant__pseudonym", flat=True))


def download(client, run, name: str) -> list[list[str]]:
    response = client.get(f"/studies/{run.study.slug}/exports/{name}.csv")
    assert response.status_code == 200, response
    return csv_rows(response)


def test_choices_csv_has_one_row_per_chosen_response_of_retained_participants(owner_client, ml_run):
    rows = download(owner_client, ml_run, "choices")
    assert rows[0] == CHOICES_HEADER
    records = [dict(zip(rows[0], row, strict=True)) for row in rows[1:]]
    retained = retained_pseudonyms(ml_run)
    # Independently from the stored placements: every choice of a retained participant, nothing else.
    stored = ItemPlacement.objects.filter(visit__participant__study=ml_run.study).exclude(choice="")
    expected = {(p.visit.participant.pseudonym, p.item.key, {"best": "most", "worst": "least"}[p.choice], p.position)
                for p in stored.select_related("visit__participant", "item") if p.visit.participant.pseudonym in retained}
    assert {(r["participant_id"], r["response_id"], r["choice"], int(r["position"])) for r in records} == expected
    assert len(records) == len(expected) > 0
    # The data set has excluded participants who chose too, so "retained only" is tested.
    excluded_choosers = {p.visit.participant.pseudonym for p in stored.select_related("visit__participant")} - retained
    assert excluded_choosers and not excluded_choosers & {r["participant_id"] for r in records}
    items = {i.key: i for i in Item.objects.filter(study=ml_run.study).select_related("block__scenario", "system",
                                                                                      "condition")}
    per_block: dict[tuple[str, str], list[str]] = {}
    for r in records:
        item = items[r["response_id"]]
        assert (r["block_id"], r["scenario"], r["model"], r["condition"]) == (
            item.block.key, item.block.scenario.key, item.system.name, item.condition.name)
        # The study shows letters by display position: position 1 is A, 2 is B ...
        assert r["label"] == string.ascii_uppercase[int(r["position"]) - 1]
        per_block.setdefault((r["participant_id"], r["block_id"]), []).append(r["choice"])
    assert all(sorted(choices) == ["least", "most"] for choices in per_block.values())


def test_without_letters_the_label_is_the_source_label(owner_client, ml_run):
    study = ml_run.study
    study.letter_labels = False
    study.save(update_fields=["letter_labels"])
    for item in Item.objects.filter(study=study):
        item.source_label = f"Source {item.option}"
        item.save(update_fields=["source_label"])
    rows = download(owner_client, ml_run, "choices")
    options = dict(Item.objects.filter(study=study).values_list("key", "option"))
    assert len(rows) > 1
    for row in rows[1:]:
        assert row[6] == f"Source {options[row[3]]}"


def test_free_text_csv_holds_retained_answers_with_blank_block_fields_for_study_level_questions(owner_client, ml_run):
    retained = retained_pseudonyms(ml_run)
    answers = FreeTextAnswer.objects.filter(participant__study=ml_run.study).select_related("participant")
    mine = next(a for a in answers if a.participant.pseudonym in retained)
    mine.text = '=HYPERLINK("http://x")'
    mine.save(update_fields=["text"])
    # An excluded participant's answer (planted: the bots that get excluded seldom reach the last question).
    outsider = Participant.objects.filter(study=ml_run.study).exclude(pseudonym__in=retained).exclude(
        free_text_answers__isnull=False).first()
    excluded = FreeTextAnswer.objects.create(participant=outsider, question=ml_run.study.free_text_questions.get(),
                                             text="excluded")
    rows = download(owner_client, ml_run, "free-text")
    assert rows[0] == FREE_TEXT_HEADER
    expected = {(a.participant.pseudonym, a.text) for a in answers.all() if a.participant.pseudonym in retained}
    written = {(r[0], r[4].removeprefix("'")) for r in rows[1:]}
    assert written == {(p, t) for p, t in expected} and len(rows) - 1 == len(expected)
    assert excluded.participant.pseudonym not in {r[0] for r in rows[1:]}
    assert all(r[1] == "why" and r[2] == "" and r[3] == "" for r in rows[1:])
    assert [mine.participant.pseudonym, "why", "", "", "'=HYPERLINK(\"http://x\")"] in rows


def test_a_per_block_answer_names_its_block_and_scenario(client, owner, reasons_per_block, quick_stats):
    reasons_per_block.owners.add(owner)
    fill_with_bots(reasons_per_block, 8)
    run = finished_run(reasons_per_block)
    client.force_login(owner)
    rows = download(client, run, "free-text")
    assert rows[0] == FREE_TEXT_HEADER and len(rows) > 1
    stored = {(a.participant.pseudonym, a.visit.block.key, a.visit.block.scenario.key, a.text)
              for a in FreeTextAnswer.objects.filter(participant__study=reasons_per_block, visit__isnull=False)
              .select_related("participant", "visit__block__scenario")}
    for row in rows[1:]:
        assert row[1] == "why" and (row[0], row[2], row[3], row[4]) in stored
    # Block by block, in the order the participant saw them.
    first = rows[1][0]
    shown = [r[2] for r in rows[1:] if r[0] == first]
    order = list(FreeTextAnswer.objects.filter(participant__pseudonym=first, participant__study=reasons_per_block)
                 .order_by("visit__sequence").values_list("visit__block__key", flat=True))
    assert shown == order


def test_the_answer_exports_exist_only_for_designs_that_ask_those_answers(owner_client, ml_run, done_run):
    page = owner_client.get(f"/studies/{ml_run.study.slug}/exports/").content.decode()
    assert "free_text.csv" in page and "choices.csv" in page and "/free-text/" in page
    tide_page = owner_client.get(f"/studies/{done_run.study.slug}/exports/").content.decode()
    assert "free_text.csv" not in tide_page and "choices.csv" not in tide_page


def test_the_export_command_writes_both_files(ml_run, tmp_path):
    call_command("export", "--study", ml_run.study.slug, "--what", "free-text", "--what", "choices", "--out",
                 str(tmp_path))
    with (tmp_path / "choices.csv").open(newline="") as handle:
        assert next(csv.reader(handle)) == CHOICES_HEADER
    with (tmp_path / "free_text.csv").open(newline="") as handle:
        assert next(csv.reader(handle)) == FREE_TEXT_HEADER


# --------------------------------------------------------------------------- API


def test_the_api_serves_both_as_csv_and_as_json_records(owner_api, ml_run):
    base = f"/api/studies/{ml_run.study.slug}/exports"
    listed = [e["name"] for e in owner_api.get(base + "/").json()]
    assert listed[:4] == ["participants", "ratings", "choices", "free-text"]  # answer exports in question-type order
    csv_choices = csv_rows(owner_api.get(base + "/choices.csv"))
    records = []
    url = base + "/choices/"
    while url:
        body = owner_api.get(url).json()
        records += body["results"]
        url = body["next"]
    assert [list(r) for r in records[:1]] == [CHOICES_HEADER]
    assert [[str(v) for v in r.values()] for r in records] == csv_choices[1:]
    answer = FreeTextAnswer.objects.filter(
        participant__pseudonym__in=retained_pseudonyms(ml_run), participant__study=ml_run.study).first()
    answer.text = "+raw in JSON"
    answer.save(update_fields=["text"])
    texts = owner_api.get(base + "/free-text/").json()["results"]
    assert {"participant_id": answer.participant.pseudonym, "question_key": "why", "block_id": None,
            "scenario": None, "text": "+raw in JSON"} in texts
    assert ["'+raw in JSON"] == [r[4] for r in csv_rows(owner_api.get(base + "/free-text.csv")) if r[0] ==
                                 answer.participant.pseudonym]


def test_another_researcher_gets_404_and_a_study_without_a_run_404(owner_api, ml_run, other, client, tide, owner):
    client.force_login(other)
    for path in ("exports/free-text/", "exports/choices/", "exports/choices.csv", "exports/free-text.csv"):
        assert client.get(f"/api/studies/{ml_run.study.slug}/{path}").status_code == 404, path
    assert client.get(f"/studies/{ml_run.study.slug}/free-text/").status_code == 404
    tide.owners.add(owner)
    assert owner_api.get(f"/api/studies/{tide.slug}/exports/free-text/").status_code == 404


# --------------------------------------------------------------------------- the page of written answers


@pytest.fixture(scope="module")
def _shared_rows_reasons(django_db_setup, django_db_blocker):
    """The per-block "why" study with 12 bots, built once for the module's page tests (each runs in a
    savepoint of it, tests/support/shared.py; conftest's collection hook runs them after the others)."""
    with rows_kept_until_exit(django_db_blocker), in_process_tasks():
        study = load_reasons_per_block()
        fill_with_bots(study, 12)
        yield study.pk


@pytest.fixture
def reasons(_shared_rows_reasons, owner):
    """conftest's ``reasons_per_block`` with 12 bots, owned by ``owner``."""
    study = Study.objects.get(pk=_shared_rows_reasons)
    study.owners.add(owner)
    return study


def page_answers(response) -> list[str]:
    import re

    return re.findall(r'data-answer="(\d+)"', response.content.decode())


def test_the_page_lists_answers_with_their_block_and_the_responses_shown(owner_client, reasons):
    answer = FreeTextAnswer.objects.filter(participant__study=reasons).select_related("visit__block__scenario").first()
    answer.text = "<script>alert(1)</script> B was zqxwarmer"
    answer.save(update_fields=["text"])
    response = owner_client.get(f"/studies/{reasons.slug}/free-text/", {"q": "ZQXWARMER"})
    assert response.status_code == 200
    page = response.content.decode()
    assert page_answers(response) == [str(answer.pk)]
    assert "&lt;script&gt;alert(1)&lt;/script&gt; B was zqxwarmer" in page and "<script>alert(1)" not in page
    assert f"block {answer.visit.block.key}" in page and answer.visit.block.scenario.key in page
    for placement in answer.visit.placements.select_related("item"):
        assert placement.item.text.replace("'", "&#x27;") in page
    chosen = answer.visit.placements.select_related("item__condition").get(choice="best")
    assert f"<td>{chosen.position}</td><td>{string.ascii_uppercase[chosen.position - 1]}</td>" in page
    # The stored "best" is shown in the words the participant read.
    assert f"<td>{chosen.item.condition.name}</td><td>most</td>" in page


def test_the_page_filters_by_question_and_block_and_pages(owner_client, reasons):
    url = f"/studies/{reasons.slug}/free-text/"
    stored = FreeTextAnswer.objects.filter(participant__study=reasons, participant__is_preview=False)
    block = stored.values_list("visit__block__key", flat=True).first()
    in_block = owner_client.get(url, {"question": "why", "block": block})
    assert sorted(page_answers(in_block)) == sorted(
        str(pk) for pk in stored.filter(visit__block__key=block).values_list("pk", flat=True))
    total = stored.count()
    assert total > 25  # more than a page
    first, second = owner_client.get(url), owner_client.get(url, {"page": 2})
    assert len(page_answers(first)) == 25 and not set(page_answers(first)) & set(page_answers(second))
    assert f"{total} answers" in first.content.decode()
    assert 'href="?page=2"' in first.content.decode()
    # The page links keep the filters.
    assert 'href="?question=why&amp;page=2"' in owner_client.get(url, {"question": "why"}).content.decode()


def test_the_page_says_when_no_answer_matches(owner_client, reasons):
    nothing = owner_client.get(f"/studies/{reasons.slug}/free-text/", {"q": "no answer says this"})
    assert nothing.status_code == 200 and "No written answers match." in nothing.content.decode()
    assert "0 answers" in nothing.content.decode()


@pytest.mark.parametrize("params, status", [
    ({"page": "abc"}, 200), ({"page": "999999"}, 200), ({"page": "-1"}, 200), ({"page": "1e400"}, 200),
    ({"question": "no-such-question"}, 400), ({"block": "\x00"}, 400), ({"q": "a\x00b"}, 400),
    ({"q": "x" * 500}, 400), ({"q": "%_'\""}, 200), ({"question": ["why", "why"]}, 200),
])
def test_odd_parameters_never_break_the_page(owner_client, reasons, params, status):
    response = owner_client.get(f"/studies/{reasons.slug}/free-text/", params)
    assert response.status_code == status
    if status == 400:
        assert "These filters cannot be used" in response.content.decode()
