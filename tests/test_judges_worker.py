"""A judge run on a real Celery worker (Redis, PostgreSQL) survives the worker being killed mid-run: another
worker takes the message again and the run resumes where it stopped, without asking any prompt twice.

Skipped unless CELERY_BROKER_URL is set (and the database is PostgreSQL), like tests/test_tasks_worker.py;
with REQUIRE_SERVICES=1 a missing service fails the test instead.
"""

from __future__ import annotations

import json
import re

import pytest

from judges import services
from judges.models import JudgeAnswer, JudgeCall, JudgeRun
from tests.support.fake_llm import KEY, FakeLLM
from tests.test_tasks_worker import broker, wait_for, workers  # noqa: F401 - fixtures shared with the run tests

pytestmark = [pytest.mark.worker, pytest.mark.slow(
    reason="the first worker asks at 20 requests per minute so that it is surely between two calls when killed")]


def _reply(prompt: str) -> str:
    labels = re.findall(r"^\[([A-Z]+)\]$", prompt, flags=re.M)
    return json.dumps({**{label: {"empathy": 3} for label in labels}, "ranking": labels})


@pytest.fixture
def llm():
    fake = FakeLLM(_reply).start()
    yield fake
    fake.stop()


def test_a_judge_run_whose_worker_is_killed_resumes_on_another_without_a_duplicate_call(
        broker, transactional_db, tide, workers, llm):  # noqa: F811
    from judges.tasks import judge_run

    env = {"JUDGE_API_URL": llm.url, "JUDGE_API_KEY": KEY, "JUDGE_MODEL": "judge-model"}
    doomed = workers("doomed", app="tests.support.celery_test_app", TEST_VISIBILITY_TIMEOUT="3600", **env)
    judge = services.judge_register(study=tide, name="llm-w", kind="llm")
    run = services.judge_run_create(judge=judge, requests_per_minute=20, cost_cap=100)
    judge_run.apply_async((run.pk,))

    calls = lambda: JudgeCall.objects.filter(run=run).count()  # noqa: E731
    wait_for(lambda: calls() >= 3, 90, "three calls of the first worker", [doomed])
    doomed.kill()  # 3 s between calls: it dies waiting for the next one, with its message unacknowledged
    stopped_at = calls()
    assert JudgeRun.objects.get(pk=run.pk).status == "running" and 3 <= stopped_at < len(run.plan)

    JudgeRun.objects.filter(pk=run.pk).update(requests_per_minute=6000)  # the rest quickly
    rescuer = workers("rescuer", app="tests.support.celery_test_app", TEST_VISIBILITY_TIMEOUT="3", **env)
    wait_for(lambda: JudgeRun.objects.get(pk=run.pk).status in {"done", "failed"}, 120,
             "the redelivered run to finish", [doomed, rescuer])
    run.refresh_from_db()
    assert run.status == "done", run.error
    assert calls() == len(run.plan) and JudgeAnswer.objects.filter(judge=judge, question="rating").count() == tide.items.count()
    # The fake endpoint answered each prompt exactly once, across both workers.
    assert len(llm.per_prompt) == len(run.plan) and set(llm.per_prompt.values()) == {1}
    assert KEY not in doomed.output() + rescuer.output()
