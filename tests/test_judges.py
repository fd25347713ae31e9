"""Judges beside people: the judgements import, the OpenAI-compatible client against a fake endpoint that
fails on demand (tests/support/fake_llm.py), and resumable runs without duplicate calls."""

from __future__ import annotations

import io
import json
import logging
import re
from decimal import Decimal

import pytest
from django.core.management import CommandError, call_command
from django.db import connection

from judges import services
from judges.client import JudgeClient, JudgeEndpointError
from judges.importers import ImportProblems, judgements_import
from judges.models import Judge, JudgeAnswer, JudgeCall, JudgeRun
from judges.selectors import judge_runs_progress, judges_table
from surveys.models import Item
from tests.support.fake_llm import KEY, FakeLLM


def _rating_reply(prompt: str) -> str:
    """Every response gets a score drawn from its text, on each dimension named in the prompt; ranked in reverse
    order of display when the block asks for a ranking."""
    labels = re.findall(r"^\[([A-Z]+)\]$", prompt, flags=re.M)
    keys = re.findall(r"^(\w+): .*\((\d+)-(\d+)", prompt, flags=re.M)
    reply = {label: {key: int(low) + len(label) % (int(high) - int(low) + 1) for key, low, high in keys}
             for label in labels}
    if '"ranking"' in prompt:
        reply["ranking"] = labels[::-1]
    return json.dumps(reply)


@pytest.fixture
def llm():
    fake = FakeLLM(_rating_reply).start()
    yield fake
    fake.stop()


def _client(fake: FakeLLM, slept: list | None = None, **kw) -> JudgeClient:
    return JudgeClient(api_key=kw.pop("api_key", KEY), base_url=fake.url, model="judge-model", timeout=0.5,
                       retries=kw.pop("retries", 2), sleep=(slept if slept is not None else []).append, **kw)


def _snapshot() -> dict:
    return {model.__name__: sorted(map(repr, model.objects.values())) for model in (Judge, JudgeAnswer, JudgeCall)}


def _csv(text: str) -> io.BytesIO:
    data = io.BytesIO(text.encode())
    data.name = "judgements.csv"
    return data


# ------------------------------------------------------------------ import


def test_it_imports_ratings_and_registers_a_new_judge(tide):
    a, b = Item.objects.filter(study=tide).order_by("id")[:2]
    report = judgements_import(study=tide, file=_csv(
        "judge,block_id,response_id,dimension,value,kind\n"
        f"gpt-x,{a.block.key},{a.key},empathy,4,llm\n"
        f"gpt-x,{b.block.key},{b.key},empathy,2,llm\n"))
    assert (report.judges_created, report.answers_written, report.answers_replaced) == (1, 2, 0)
    judge = Judge.objects.get(study=tide, name="gpt-x")
    assert judge.kind == "llm" and judge.seed == services.judge_seed(study=tide, name="gpt-x")
    assert sorted(JudgeAnswer.objects.values_list("item__key", "value")) == sorted([(a.key, 4.0), (b.key, 2.0)])
    again = judgements_import(study=tide, file=_csv(
        f"judge,block_id,response_id,dimension,value\ngpt-x,{a.block.key},{a.key},empathy,5\n"))
    assert (again.judges_created, again.answers_replaced) == (0, 1)
    assert JudgeAnswer.objects.get(item=a).value == 5.0


def test_it_reports_every_bad_line_and_writes_nothing(tide):
    a, other = Item.objects.filter(study=tide).order_by("id")[0], Item.objects.filter(study=tide).order_by("-id")[0]
    call_command("import_judgements", "--study", tide.slug, str(_write_tmp(
        f"judge,block_id,response_id,dimension,value\nok,{a.block.key},{a.key},empathy,3\n")))
    before = _snapshot()
    with pytest.raises(ImportProblems) as caught:
        judgements_import(study=tide, file=_csv(
            "judge,block_id,response_id,dimension,value\n"
            f"new-judge,{a.block.key},{a.key},empathy,3\n"       # fine alone
            f"new-judge,nope,{a.key},empathy,3\n"               # unknown block
            f"new-judge,{a.block.key},ghost,empathy,3\n"        # unknown response
            f"new-judge,{a.block.key},{other.key},empathy,3\n"  # response of another block
            f"new-judge,{a.block.key},{a.key},warmth,3\n"       # unknown dimension
            f"new-judge,{a.block.key},{a.key},empathy,6\n"      # out of scale (1-5), also a repeat
            f"Bad Name!,{a.block.key},{a.key},empathy,3\n"      # judge name of the wrong shape
            f"new-judge,{a.block.key},{a.key},empathy,x\n"))
    problems = caught.value.problems
    assert problems == [
        'judgements.csv:3:block_id: unknown block "nope"',
        'judgements.csv:4:response_id: unknown response "ghost"',
        f'judgements.csv:5:response_id: response "{other.key}" is not in this block',
        'judgements.csv:6:dimension: unknown dimension "warmth"',
        "judgements.csv:7:value: 6 is outside the empathy scale 1-5",
        "judgements.csv:7:: the same judgement is given twice (first on line 2)",
        'judgements.csv:8:judge: "Bad Name!" is not a judge name: lower-case letters, digits and . _ - only, '
        "starting with a letter or digit, at most 60 characters",
        'judgements.csv:9:value: "x" is not a number',
        "judgements.csv:9:: the same judgement is given twice (first on line 2)",
    ]
    assert _snapshot() == before


def _write_tmp(text: str):
    import tempfile
    handle = tempfile.NamedTemporaryFile("w", suffix=".csv", delete=False, encoding="utf-8")
    handle.write(text)
    handle.close()
    return handle.name


def test_the_command_lists_the_problems_and_imports_nothing(tide):
    with pytest.raises(CommandError, match=r"nothing was imported:\n.*unknown block"):
        call_command("import_judgements", "--study", tide.slug,
                     _write_tmp("judge,block_id,response_id,dimension,value\nj,zz,zz,empathy,1\n"))
    assert not Judge.objects.exists()


def test_it_imports_pairwise_choices_in_both_orders(pairwise):
    block = pairwise.blocks.order_by("id").first()
    left, right = block.items.order_by("id")[:2]
    judgements_import(study=pairwise, file=_csv(
        "judge,block_id,left_response_id,right_response_id,preference\n"
        f"pj,{block.key},{left.key},{right.key},left\npj,{block.key},{right.key},{left.key},right\n"))
    assert sorted(JudgeAnswer.objects.values_list("left_item__key", "preference")) == sorted(
        [(left.key, "left"), (right.key, "right")])
    with pytest.raises(ImportProblems) as caught:
        judgements_import(study=pairwise, file=_csv(
            "judge,block_id,left_response_id,right_response_id,preference\n"
            f"pj,{block.key},{left.key},{left.key},maybe\n"))
    assert caught.value.problems == [
        "judgements.csv:2:right_response_id: the two responses of a pair must differ",
        'judgements.csv:2:preference: "maybe" is not a preference; use one of left, right, tie, both_bad']


# ------------------------------------------------------------------ the client


def test_the_client_retries_500_and_429_respecting_retry_after(llm):
    slept = []
    llm.fail_next(500, 429)
    reply = _client(llm, slept).complete([{"role": "user", "content": "[A]\nx"}])
    assert reply.text == '{"A": {}}' and (reply.prompt_tokens, reply.completion_tokens) == (1000, 100)
    assert slept == [1, 0.2] and len(llm.requests) == 3


@pytest.mark.parametrize("faults, message", [
    ((401,), "refused the key (401)"),
    ((500, 500, 500), "answered 500 (server error) 3 times"),
    ((429, 429, 429), "answered 429 (rate limited) 3 times"),
    (("timeout", "timeout", "timeout"), "did not answer within 0.5 s (3 tries)"),
    (("garbage",), "not a chat completion"),
])
def test_the_client_gives_a_clear_message(llm, faults, message):
    llm.fail_next(*faults)
    with pytest.raises(JudgeEndpointError, match=re.escape(message)):
        _client(llm).complete([{"role": "user", "content": "hi"}])


def test_a_wrong_key_is_refused_without_retrying(llm):
    with pytest.raises(JudgeEndpointError, match="refused the key"):
        _client(llm, api_key="sk-wrong").complete([{"role": "user", "content": "hi"}])
    assert len(llm.requests) == 1


# ------------------------------------------------------------------ runs


def _run(study, **kw) -> JudgeRun:
    judge = services.judge_register(study=study, name="llm-a", kind=Judge.Kind.LLM, model="judge-model")
    return services.judge_run_create(judge=judge, requests_per_minute=kw.pop("rpm", 6000),
                                     cost_cap=kw.pop("cost_cap", 100), **kw)


def test_a_run_rates_every_response_from_the_judges_own_blinded_presentation(tide, llm):
    run = _run(tide)
    assert len(run.plan) == tide.blocks.count()
    done = services.judge_run_execute(run_id=run.pk, client=_client(llm))
    assert done.status == "done" and done.error == ""
    n_items = Item.objects.filter(study=tide).count()
    assert JudgeAnswer.objects.filter(judge=run.judge, question="rating").count() == n_items
    # The judge ranks too, as a participant of this study does: here in reverse order of display.
    assert JudgeAnswer.objects.filter(judge=run.judge, question="rank").count() == n_items
    assert set(JudgeAnswer.objects.filter(judge=run.judge, question="rank").values_list("position", "value")) == {
        (k, 6.0 - k) for k in range(1, 6)}
    prompts = [r["body"]["messages"][0]["content"] for r in llm.requests]
    system_names = list(tide.systems.values_list("name", flat=True)) + list(tide.conditions.values_list("name", flat=True))
    assert not any(name in prompt for prompt in prompts for name in system_names)  # blinded
    # Its presentation is its own seed's: the same judge draws the same plan; another judge another order.
    assert services.judge_plan(judge=run.judge, both_orders=True) == run.plan
    other = services.judge_register(study=tide, name="llm-b", kind="llm")
    assert services.judge_plan(judge=other, both_orders=True) != run.plan
    first_block, order, _ = run.plan[0]
    assert list(JudgeAnswer.objects.filter(judge=run.judge, block_id=first_block, question="rating").order_by("position")
                .values_list("item_id", flat=True).distinct()) == order
    assert all(count == 1 for count in llm.per_prompt.values()) and len(llm.per_prompt) == len(run.plan)


def test_a_run_interrupted_between_calls_resumes_without_a_duplicate_call(tide, llm):
    run = _run(tide)
    partial = services.judge_run_execute(run_id=run.pk, client=_client(llm), max_calls=5)
    assert partial.status == "running" and JudgeCall.objects.filter(run=run).count() == 5
    llm.fail_next(500, 500, 500)  # the endpoint fails: the run stops with the message, nothing of that prompt kept
    failed = services.judge_run_execute(run_id=run.pk, client=_client(llm))
    assert failed.status == "failed" and "answered 500" in failed.error
    assert JudgeCall.objects.filter(run=run).count() == 5
    assert JudgeAnswer.objects.filter(judge=run.judge, question="rating").count() == 5 * 5
    resumed = services.judge_run_execute(run_id=run.pk, client=_client(llm))
    assert resumed.status == "done"
    assert len(llm.per_prompt) == len(run.plan) and set(llm.per_prompt.values()) == {1}
    assert services.judge_run_execute(run_id=run.pk, client=_client(llm)) is None  # finished: nothing more


def test_a_reply_in_the_wrong_format_is_stored_unparsed_and_counted(tide):
    fake = FakeLLM(lambda prompt: "I think response A is the most empathetic." if "[E]" in prompt
                   else _rating_reply(prompt)).start()
    try:
        run = _run(tide)
        services.judge_run_execute(run_id=run.pk, client=_client(fake))
    finally:
        fake.stop()
    unparsed = JudgeCall.objects.filter(run=run, parsed=False)
    assert unparsed.count() == JudgeCall.objects.filter(run=run).count() - JudgeCall.objects.filter(
        run=run, parsed=True).count() and unparsed.exists()
    assert all(call.raw.startswith("I think") and not call.answers.exists() for call in unparsed)
    progress = judge_runs_progress(study=tide)[0]
    assert progress.unparsed == unparsed.count() and progress.calls_done == len(run.plan)
    assert judges_table(tide).set_index("judge").loc["llm-a", "unparsed"] == unparsed.count()


def test_the_rate_limit_and_the_cost_cap(tide, llm, settings):
    settings.JUDGE_PRICE_PROMPT_PER_1K, settings.JUDGE_PRICE_COMPLETION_PER_1K = 0.01, 0.03  # 0.013 per call
    run = _run(tide, rpm=120, cost_cap=Decimal("0.05"))
    waits = []
    clock = iter([0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9])
    done = services.judge_run_execute(run_id=run.pk, client=_client(llm), sleep=waits.append,
                                      clock=lambda: next(clock))
    # 0.013 per call: the cap of 0.05 is reached after 4 calls (0.052); no fifth call is made.
    assert done.status == "capped" and JudgeCall.objects.filter(run=run).count() == 4
    assert done.cost == Decimal("0.052") and "cost cap" in done.error
    # 120 per minute: each call waits until 0.5 s have passed since the one before.
    assert waits == pytest.approx([0.4, 0.4, 0.4])
    assert judge_runs_progress(study=tide)[0].cost == Decimal("0.052")


def test_the_key_is_never_stored_nor_logged(tide, llm, caplog, settings):
    settings.JUDGE_API_KEY, settings.JUDGE_API_URL, settings.JUDGE_MODEL = KEY, llm.url, "judge-model"
    caplog.set_level(logging.DEBUG)
    run = _run(tide)
    llm.fail_next(401)
    refused = services.judge_run_execute(run_id=run.pk)
    assert refused.status == "failed" and "refused the key (401)" in refused.error
    assert services.judge_run_execute(run_id=run.pk, max_calls=2).status == "running"
    assert llm.requests[-1]["headers"]["authorization"] == f"Bearer {KEY}"
    with connection.cursor() as cursor:
        for table in connection.introspection.table_names():
            if table.startswith("judges_"):
                cursor.execute(f"SELECT * FROM {table}")
                assert KEY not in repr(cursor.fetchall())
    assert KEY not in caplog.text and KEY not in repr(JudgeClient())


# ------------------------------------------------------------------ declared judges and the command


def test_a_judge_declared_by_the_study_is_run_with_its_own_prompt_template(db, tide_definition, llm, settings):
    from surveys.definition import DefinitionError, parse_definition
    from surveys.loader import study_load

    tide_definition["judges"] = [{"name": "declared", "model": "judge-model",
                                  "prompt": "Lisez.\n$responses\n$questions\n$answer_format"}]
    study = study_load(definition=parse_definition(tide_definition)).study
    settings.JUDGE_API_URL, settings.JUDGE_API_KEY = llm.url, KEY
    call_command("judge_run", "--study", study.slug, "--judge", "declared", "--rpm", "6000", "--here",
                 stdout=io.StringIO())
    judge = Judge.objects.get(study=study, name="declared")
    assert (judge.kind, judge.model) == ("llm", "judge-model") and judge.runs.get().status == "done"
    assert all(r["body"]["messages"][0]["content"].startswith("Lisez.\n[A]") for r in llm.requests)
    tide_definition["judges"].append({"name": "declared", "kind": "other"})
    with pytest.raises(DefinitionError, match=r'judges\[1\]\.name: "declared" is used twice'):
        parse_definition(tide_definition)


def test_a_judge_of_a_study_in_chinese_is_asked_in_chinese(db, llm, settings):
    from tests.support.studies import load_fixture

    study = load_fixture("counselor_zh.json")
    assert study.language == "zh-hans"
    settings.JUDGE_API_URL, settings.JUDGE_API_KEY, settings.JUDGE_MODEL = llm.url, KEY, "judge-model"
    call_command("judge_run", "--study", study.slug, "--judge", "zh-judge", "--rpm", "6000", "--here",
                 stdout=io.StringIO())
    prompts_sent = [r["body"]["messages"][0]["content"] for r in llm.requests]
    assert prompts_sent
    for prompt in prompts_sent:
        # The speakers as the participant's page names them, and how to answer, in the study's language.
        assert "\n求助者： " in prompt
        assert "只用一个 JSON 对象作答" in prompt
        assert "Answer with one JSON object" not in prompt and "Person:" not in prompt
    assert Judge.objects.get(study=study, name="zh-judge").runs.get().status == "done"


def test_the_run_command_refuses_bad_input_with_a_message(tide):
    with pytest.raises(CommandError, match="not a judge name"):
        call_command("judge_run", "--study", tide.slug, "--judge", "Not OK", "--here")
    with pytest.raises(CommandError, match="cost_cap must be more than 0"):
        call_command("judge_run", "--study", tide.slug, "--judge", "ok", "--cost-cap", "0", "--here")
    with pytest.raises(CommandError, match="no judge run 999"):
        call_command("judge_run", "--resume", "999")
    assert not Judge.objects.exists()


# ------------------------------------------------------------------ rankings and most/least


def test_it_imports_a_judges_ranking_and_most_least_picks_checking_each_block(tide):
    block = tide.blocks.order_by("id").first()
    items = list(block.items.order_by("id"))
    ranking = "".join(f"ranker,{block.key},{item.key},{k}\n" for k, item in enumerate(items, start=1))
    judgements_import(study=tide, file=_csv("judge,block_id,response_id,rank\n" + ranking))
    assert list(JudgeAnswer.objects.filter(question="rank").order_by("value").values_list("item_id", flat=True)) == [
        item.pk for item in items]
    judgements_import(study=tide, file=_csv(
        f"judge,block_id,response_id,choice\npicker,{block.key},{items[0].key},most\n"
        f"picker,{block.key},{items[1].key},least\n"))
    again = judgements_import(study=tide, file=_csv(  # a new pick replaces the block's earlier one
        f"judge,block_id,response_id,choice\npicker,{block.key},{items[2].key},most\n"
        f"picker,{block.key},{items[1].key},least\n"))
    assert again.answers_replaced == 2
    assert sorted(JudgeAnswer.objects.filter(question="best_worst").values_list("item_id", "value")) == sorted(
        [(items[2].pk, 1.0), (items[1].pk, -1.0)])
    before = _snapshot()
    with pytest.raises(ImportProblems) as caught:
        judgements_import(study=tide, file=_csv(
            "judge,block_id,response_id,rank\n"
            f"r2,{block.key},{items[0].key},1\nr2,{block.key},{items[1].key},1\nr2,{block.key},{items[2].key},9\n"))
    assert caught.value.problems == [
        f'judgements.csv:4:rank: "9" is not a rank of this block (1-{len(items)})',
        f"judgements.csv:2:: r2's ranking of this block must rank each of its {len(items)} responses once "
        f"(ranks 1-{len(items)})"]
    with pytest.raises(ImportProblems) as caught:
        judgements_import(study=tide, file=_csv(
            f"judge,block_id,response_id,choice\np2,{block.key},{items[0].key},most\np2,{block.key},{items[1].key},best\n"))
    assert caught.value.problems == [
        'judgements.csv:3:choice: "best" is not a choice; use most or least',
        "judgements.csv:2:: p2 must pick exactly one most and one least response in this block"]
    assert _snapshot() == before


def test_a_most_least_judge_picks_one_of_each_and_a_bad_pick_is_stored_unparsed(most_least):
    replies = iter(['{"most": "A", "least": "A"}'])  # the first reply picks one response twice
    fake = FakeLLM(lambda prompt: next(replies, '{"most": "A", "least": "C"}')).start()
    try:
        run = _run(most_least)
        services.judge_run_execute(run_id=run.pk, client=_client(fake))
    finally:
        fake.stop()
    assert JudgeCall.objects.filter(run=run, parsed=False).count() == 1  # most and least the same: not guessed
    picks = JudgeAnswer.objects.filter(judge=run.judge, question="best_worst")
    assert picks.count() == 2 * (len(run.plan) - 1)
    assert set(picks.values_list("position", "value")) == {(1, 1.0), (3, -1.0)}

