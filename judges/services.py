"""Writes of the judges app: register a judge, create a run, carry a run out (resumably)."""

from __future__ import annotations

import hashlib
import logging
import random
import re
import time
from collections.abc import Callable
from decimal import Decimal

from django.conf import settings
from django.db import transaction
from django.utils import timezone, translation

from judges import prompts
from judges.client import JudgeClient, JudgeEndpointError
from judges.models import NAME_PATTERN, Judge, JudgeAnswer, JudgeCall, JudgeRun
from surveys.models import Block, Dimension, Item, Study
from surveys.services import sequence_plan

logger = logging.getLogger(__name__)


def judge_seed(*, study: Study, name: str) -> int:
    """A stable seed per judge, from its name and the study's secret key: the same judge gets the same presentation,
    and no one can choose a name to get a chosen order."""
    return int.from_bytes(hashlib.sha256(f"{study.pseudonym_key}:judge:{name}".encode()).digest()[:6], "big")


def judge_register(*, study: Study, name: str, kind: str = Judge.Kind.OTHER, model: str = "",
                   prompt_template: str = "") -> Judge:
    """The study's judge called ``name``, created with its seed if it is new (its kind, model and template then)."""
    if not re.fullmatch(NAME_PATTERN, name):
        raise ValueError(f'"{name}" is not a judge name: lower-case letters, digits and . _ - only, '
                         "starting with a letter or digit, at most 60 characters")
    judge, _ = Judge.objects.get_or_create(
        study=study, name=name,
        defaults={"kind": kind, "seed": judge_seed(study=study, name=name), "model": model,
                  "prompt_template": prompt_template},
    )
    return judge


def judges_declared_register(*, study: Study) -> list[Judge]:
    """The judges the study's definition declares (``judges:``), registered if new; a judge already registered
    keeps its kind and seed (its answers were given under them)."""
    declared = (study.definition or {}).get("judges") or []
    return [judge_register(study=study, name=spec["name"], kind=spec.get("kind", "llm"), model=spec.get("model", ""),
                           prompt_template=spec.get("prompt", "")) for spec in declared]


def judge_plan(*, judge: Judge, both_orders: bool) -> list[list]:
    """[[block id, item ids in display order, swapped], ...]: the judge's presentation, drawn from its seed as a
    participant's is (blocks shuffled, responses counterbalanced, the pair shown); pairwise blocks also swapped."""
    pages = sequence_plan(study=judge.study, rng=random.Random(judge.seed), record_pairs=False)
    plan = []
    for page in pages:
        if page.block is None:  # attention checks are for people
            continue
        plan.append([page.block.pk, list(page.item_ids), False])
        if judge.study.pairwise_enabled and both_orders:
            plan.append([page.block.pk, list(reversed(page.item_ids)), True])
    return plan


def judge_run_create(*, judge: Judge, requests_per_minute: int = 60, cost_cap: Decimal | float = 1,
                     both_orders: bool = True) -> JudgeRun:
    """A queued run of ``judge`` over every block of its study, with its plan fixed now."""
    if judge.kind != Judge.Kind.LLM:
        raise ValueError(f'judge "{judge.name}" is of kind {judge.kind}; only LLM judges are run')
    if requests_per_minute < 1:
        raise ValueError("requests_per_minute must be at least 1")
    if not Decimal(str(cost_cap)) > 0:
        raise ValueError("cost_cap must be more than 0")
    return JudgeRun.objects.create(judge=judge, requests_per_minute=requests_per_minute,
                                   cost_cap=Decimal(str(cost_cap)), both_orders=both_orders,
                                   plan=judge_plan(judge=judge, both_orders=both_orders))


def prompt_words(language: str) -> dict[str, str]:
    """The platform's words of a judge's prompt (speakers, how to answer) in ``language``."""
    with translation.override(language):
        return {key: translation.gettext(text) for key, text in prompts.WORDS.items()}


def _page(study: Study, block: Block, item_ids: list[int], scales: list[prompts.Scale]) -> prompts.Page:
    texts = dict(Item.objects.filter(pk__in=item_ids).values_list("id", "text"))
    return prompts.Page(instructions=study.instructions_text, question_text=study.question_text,
                        context=list(block.scenario.context or []), user_input=block.scenario.user_input,
                        responses=[texts[i] for i in item_ids], scales=scales, pairwise=study.pairwise_enabled,
                        ranking=study.ranking_enabled, best_worst=study.best_worst_enabled,
                        construct=study.construct, words=prompt_words(study.language))


def _scales(study: Study) -> tuple[list[prompts.Scale], dict[str, int]]:
    dimensions = list(Dimension.objects.filter(study=study).order_by("order", "id"))
    return ([prompts.Scale(d.key, d.label, d.scale_min, d.scale_max, d.point_labels) for d in dimensions],
            {d.key: d.pk for d in dimensions})


def _price(prompt_tokens: int, completion_tokens: int) -> Decimal:
    return (Decimal(str(settings.JUDGE_PRICE_PROMPT_PER_1K)) * prompt_tokens
            + Decimal(str(settings.JUDGE_PRICE_COMPLETION_PER_1K)) * completion_tokens) / 1000


def _answers(judge: Judge, block: Block, item_ids: list[int], page: prompts.Page, reply: str,
             dimension_ids: dict[str, int]) -> list[JudgeAnswer] | None:
    if page.pairwise:
        preference = prompts.parse_preference(reply)
        if preference is None or len(item_ids) != 2:
            return None
        return [JudgeAnswer(judge=judge, block=block, question="pairwise", left_item_id=item_ids[0],
                            right_item_id=item_ids[1], preference=preference)]
    parsed = prompts.parse_reply(reply, page)
    if parsed is None:
        return None
    answers = [JudgeAnswer(judge=judge, block=block, question="rating", item_id=item_ids[position - 1],
                           dimension_id=dimension_ids[key], value=value, position=position)
               for position, values in parsed.scores.items() for key, value in values.items()]
    answers += [JudgeAnswer(judge=judge, block=block, question="rank", item_id=item_ids[position - 1], value=rank,
                            position=position) for position, rank in parsed.ranks.items()]
    if parsed.most is not None:
        answers += [JudgeAnswer(judge=judge, block=block, question="best_worst", item_id=item_ids[position - 1],
                                value=value, position=position)
                    for position, value in ((parsed.most, 1), (parsed.least, -1))]
    return answers


def _claim(run_id: int) -> JudgeRun | None:
    """The run, marked running; None when it is finished (a second delivery of its task does nothing)."""
    with transaction.atomic():
        run = JudgeRun.objects.select_for_update().select_related("judge__study").get(pk=run_id)
        if run.status in (JudgeRun.Status.DONE, JudgeRun.Status.CAPPED):
            return None
        run.status, run.error = JudgeRun.Status.RUNNING, ""
        run.started_at = run.started_at or timezone.now()
        run.save(update_fields=["status", "error", "started_at"])
        return run


def _finish(run: JudgeRun, status: str, error: str = "") -> JudgeRun:
    run.status, run.error, run.finished_at = status, error, timezone.now()
    run.save(update_fields=["status", "error", "finished_at"])
    return run


def judge_run_execute(*, run_id: int, client: JudgeClient | None = None, max_calls: int | None = None,
                      sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.monotonic
                      ) -> JudgeRun | None:
    """Ask the endpoint every prompt of the run's plan that has no recorded call yet.

    Each reply is written with the answers parsed from it in one transaction, so the run can be
    killed at any point and resumed by calling this again: prompts already answered are not sent
    again. ``max_calls`` stops after that many calls (the task then sends itself again, so a long run
    never holds one worker for hours). An endpoint failure after the client's retries stops the run
    with the message, writing nothing for that prompt. Returns None for a finished run.
    """
    run = _claim(run_id)
    if run is None:
        return None
    judge, study = run.judge, run.judge.study
    try:
        client = client or JudgeClient(model=judge.model or None)
    except JudgeEndpointError as exc:
        return _finish(run, JudgeRun.Status.FAILED, str(exc))
    scales, dimension_ids = _scales(study)
    done = set(JudgeCall.objects.filter(run=run).values_list("block_id", "swapped"))
    blocks = Block.objects.select_related("scenario").in_bulk([entry[0] for entry in run.plan])
    interval, last_call, calls = 60.0 / run.requests_per_minute, None, 0
    for block_id, item_ids, swapped in run.plan:
        if (block_id, swapped) in done:
            continue
        if run.cost >= run.cost_cap:  # checked before each call: one call may pass the cap by its own price
            return _finish(run, JudgeRun.Status.CAPPED, f"stopped at the cost cap ({run.cost} of {run.cost_cap})")
        if max_calls is not None and calls >= max_calls:
            return run
        if last_call is not None and (wait := interval - (clock() - last_call)) > 0:
            sleep(wait)  # the requests-per-minute limit
        page = _page(study, blocks[block_id], item_ids, scales)
        last_call = clock()
        try:
            reply = client.complete(prompts.render(page, judge.prompt_template))
        except JudgeEndpointError as exc:
            logger.warning("judge run %s stopped: %s", run.pk, exc)
            return _finish(run, JudgeRun.Status.FAILED, str(exc))
        calls += 1
        answers = _answers(judge, blocks[block_id], item_ids, page, reply.text, dimension_ids)
        cost = _price(reply.prompt_tokens, reply.completion_tokens)
        with transaction.atomic():
            call = JudgeCall.objects.create(run=run, block_id=block_id, swapped=swapped, raw=reply.text,
                                            parsed=answers is not None, prompt_tokens=reply.prompt_tokens,
                                            completion_tokens=reply.completion_tokens, cost=cost)
            for answer in answers or []:
                answer.call = call
            _replace_answers(judge, answers or [])
            run.cost += cost
            run.save(update_fields=["cost"])
    return _finish(run, JudgeRun.Status.DONE)


def _replace_answers(judge: Judge, answers: list[JudgeAnswer]) -> None:
    """A new run's answer replaces the judge's earlier one on the same response and dimension (or pair and order,
    or the block's ranking or most/least)."""
    for answer in answers:
        if answer.question in ("rank", "best_worst"):
            JudgeAnswer.objects.filter(judge=judge, question=answer.question, block_id=answer.block_id).delete()
        elif answer.question == "rating":
            JudgeAnswer.objects.filter(judge=judge, question="rating", item_id=answer.item_id,
                                       dimension_id=answer.dimension_id).delete()
        else:
            JudgeAnswer.objects.filter(judge=judge, question="pairwise", left_item_id=answer.left_item_id,
                                       right_item_id=answer.right_item_id).delete()
    JudgeAnswer.objects.bulk_create(answers)
