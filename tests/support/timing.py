"""The suite's own timing check: a test slower than ``--max-test-seconds`` fails the run.

``bin/test`` passes ``--max-test-seconds=20`` (the contributor suite must stay near
ten minutes, so one test may not quietly grow to a minute); ``bin/test --all`` and a
plain ``pytest`` leave it off (0). A test's time is what ``--durations`` reports for
it (set-up + call + tear-down) less the set-up of session-scoped fixtures: the test
database's migrations or chromium's start are paid once by whichever test comes
first, and are no test's fault. A module fixture's cost does count against the
first test that builds it: the module chose to pay it there.

A test marked ``@pytest.mark.slow(reason="...")`` is exempt: it is left out of the
default run anyway, and the reason says why it may take longer when someone selects
it (``bin/test -m slow``). A bare ``@pytest.mark.slow`` is not an exemption.

The overrun is reported as a failure at the test's tear-down, naming the test and its
time, so the run exits non-zero and the summary lists it with the other failures.
"""

from __future__ import annotations

import time

import pytest

_PHASES = "_timing_phases"
_SESSION_SETUP = "_timing_session_setup"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--max-test-seconds",
        type=float,
        default=0.0,
        help="fail a test (at tear-down) that takes longer than this, set-up and tear-down "
        "included, unless it is marked slow with a reason; 0 (the default) turns the check off",
    )


def slow_reason(item: pytest.Item) -> str | None:
    """The reason given on the test's ``slow`` marker, or None when it has none."""
    for marker in item.iter_markers("slow"):
        reason = marker.kwargs.get("reason") or (marker.args[0] if marker.args else None)
        if isinstance(reason, str) and reason.strip():
            return reason
    return None


@pytest.hookimpl(hookwrapper=True)
def pytest_fixture_setup(fixturedef: pytest.FixtureDef, request: pytest.FixtureRequest):
    if fixturedef.scope != "session" or not request.config.getoption("max_test_seconds"):
        yield
        return
    start = time.perf_counter()
    yield
    item = request._pyfuncitem  # the test whose set-up built it
    item.__dict__[_SESSION_SETUP] = item.__dict__.get(_SESSION_SETUP, 0.0) + time.perf_counter() - start


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    outcome = yield
    limit = item.config.getoption("max_test_seconds")
    if not limit:
        return
    report = outcome.get_result()
    phases = item.__dict__.setdefault(_PHASES, {})
    phases[report.when] = report.duration
    if report.when != "teardown" or not report.passed:
        return
    shared = item.__dict__.get(_SESSION_SETUP, 0.0)
    total = sum(phases.values()) - shared
    if total <= limit or slow_reason(item) is not None:
        return
    report.outcome = "failed"
    report.longrepr = (
        f"{item.nodeid} took {total:.1f} s (set-up {phases.get('setup', 0) - shared:.1f} s, "
        f"call {phases.get('call', 0):.1f} s, tear-down {phases.get('teardown', 0):.1f} s), "
        f"more than the suite's limit of {limit:g} s. Make it faster (share its set-up, test "
        f"the one piece it checks) or mark it @pytest.mark.slow(reason=\"...\") so that only "
        f"bin/test --all runs it."
    )
