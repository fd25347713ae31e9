"""Property-based API testing: schemathesis generates requests from our OpenAPI
schema and checks that no response is a server error and every response
matches the schema.

In-process: the schema is loaded from the Django WSGI app, and requests go to it
with an owner's token, given to schemathesis as the auth of the schema's
``tokenAuth`` scheme: schemathesis then knows the credentials are real (a bare
``Authorization`` header next to a session cookie it generated for ``cookieAuth``
reads to its ``ignored_auth`` check as "generated auth accepted"), drops the
credentials it would generate for the other scheme, and probes every operation
without auth and with invalid auth, expecting 401/403. Path parameters mostly point at real rows (the owner's
study, a finished run) so the generated bodies and query strings reach the
views' logic; about a third keep schemathesis's own values, to probe unknown
studies, tables and absurd ids. Fixed seed, bounded examples: reproducible, ~1-2 minutes.
"""

from __future__ import annotations

import re
import zlib

import pytest
from django.core import signals
from django.core.cache import cache
from django.db import close_old_connections
from hypothesis import HealthCheck, given, seed, settings

schemathesis = pytest.importorskip("schemathesis")
from schemathesis.generation import GenerationMode  # noqa: E402
from schemathesis.specs.openapi.checks import positive_data_acceptance  # noqa: E402

MAX_EXAMPLES = 20
SEED = 20250303
REAL_TABLES = ("filter_flow", "region_means", "win_table", "descriptives")
# Operations whose body's rules go beyond what a JSON Schema can state: a study
# definition's cross-references and required parts (docs/study-definition.md), a
# CSV file's rows. A schema-valid body can break them; the answer is then 400 with
# the key that lists the content's problems, and only that 400 is taken as the
# right answer to schema-valid data (any other 400 still fails positive_data_acceptance).
CONTENT_PROBLEMS_KEY = {
    "POST /api/studies/load/": "definition",
    "POST /api/studies/{slug}/imports/responses/": "problems",
    "POST /api/studies/{slug}/imports/gold/": "problems",
    "POST /api/studies/{slug}/imports/judgements/": "problems",
}
SLUG = re.compile(r"[-a-zA-Z0-9_]+")  # the schema's pattern of a study slug (Django's slug converter)


@pytest.fixture
def wsgi_app():
    """The project's WSGI app, kept inside the test transaction.

    A bare WSGI handler closes "old" database connections around each request,
    which would end pytest's test transaction; Django's test Client avoids it
    the same way.
    """
    from config.wsgi import application

    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    try:
        yield application
    finally:
        signals.request_started.connect(close_old_connections)
        signals.request_finished.connect(close_old_connections)


def _aim_at_real_rows(case, *, slug: str, run_id: int) -> None:
    # crc32, not hash(): string hashes change from one process to the next. A value
    # the schema forbids (a negative case's) stays as generated: its request must be refused.
    params = case.path_parameters or {}
    if "slug" in params and SLUG.fullmatch(str(params["slug"])) and zlib.crc32(str(params["slug"]).encode()) % 3:
        params["slug"] = slug
    if "run_id" in params and type(params["run_id"]) is int and zlib.crc32(str(params["run_id"]).encode()) % 3:
        params["run_id"] = run_id
    if "/tables/{name}/" in case.path and zlib.crc32(str(params["name"]).encode()) % 4:
        params["name"] = REAL_TABLES[zlib.crc32(str(params["name"]).encode()) % len(REAL_TABLES)]


def _content_problems_or_positive_data_acceptance(ctx, response, case):
    """positive_data_acceptance, except a 400 that lists only the body's content problems (CONTENT_PROBLEMS_KEY)."""
    key = CONTENT_PROBLEMS_KEY.get(case.operation.label)
    if key is not None and case.meta is not None and case.meta.generation.mode.is_positive \
            and response.status_code == 400:
        body = response.json()
        if set(body) == {key} and isinstance(body[key], list) and body[key]:
            return None
    return positive_data_acceptance(ctx, response, case)


@pytest.mark.slow(reason="schemathesis: generated requests against every API endpoint")
def test_the_api_never_errors_and_always_matches_its_schema(wsgi_app, done_run, owner_token, monkeypatch):
    from analysis.api import ExpensiveRequestThrottle

    # Hundreds of generated requests: the throttles are tested elsewhere.
    monkeypatch.setattr(ExpensiveRequestThrottle, "THROTTLE_RATES", {"expensive": "100000/hour"})
    cache.clear()
    schema = schemathesis.openapi.from_wsgi("/api/schema/?format=json", wsgi_app)

    @schema.auth()
    class OwnerToken:
        def get(self, case, context) -> str:
            return owner_token

        def set(self, case, data: str, context) -> None:
            case.headers = {**(case.headers or {}), "Authorization": f"Token {data}"}

    failures: list[str] = []
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 16

    for operation in operations:
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):

            @seed(SEED)
            @settings(max_examples=MAX_EXAMPLES, deadline=None, database=None, derandomize=True,
                      suppress_health_check=list(HealthCheck))
            @given(case=operation.as_strategy(generation_mode=mode))
            def exercise(case) -> None:
                _aim_at_real_rows(case, slug=done_run.study.slug, run_id=done_run.pk)
                response = case.call()
                # Every check schemathesis has; positive_data_acceptance only as CONTENT_PROBLEMS_KEY says.
                case.validate_response(response, excluded_checks=[positive_data_acceptance],
                                       additional_checks=[_content_problems_or_positive_data_acceptance])

            try:
                exercise()
            except (Exception, BaseExceptionGroup) as exc:  # noqa: BLE001 - collect every failure, then report all
                failures.append(f"{operation.label} ({mode.value}): {exc}")
    assert not failures, "\n\n".join(failures)
