"""The suite's own timing check: a test slower than ``--max-test-seconds`` fails the run.

``bin/test`` passes ``--max-test-seconds=20`` (the contributor suite must stay near
ten minutes, so one test may not quietly grow to a minute); ``bin/test --all`` and a
plain ``pytest`` leave it off (0). A test's time is what ``--durations`` reports for
it: set-up + call + tear-down, so a module fixture's cost counts against the first
test that builds it, which is where it is paid.

A test marked ``@pytest.mark.slow(reason="...")`` is exempt: it is left out of the
default run anyway, and the reason says why it may take longer when someone selects
it (``bin/test -m slow``). A bare ``@pytest.mark.slow`` is not an exemption.

The overrun is reported as a failure at the test's tear-down, naming the test and its
time, so the run exits non-zero and the summary lists it with the other failures.
"""

from __future__ import annotations

import pytest

_PHASES = "_timing_phases"


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
    total = sum(phases.values())
    if total <= limit or slow_reason(item) is not None:
        return
    report.outcome = "failed"
    report.longrepr = (
        f"{item.nodeid} took {total:.1f} s (set-up {phases.get('setup', 0):.1f} s, "
        f"call {phases.get('call', 0):.1f} s, tear-down {phases.get('teardown', 0):.1f} s), "
        f"more than the suite's limit of {limit:g} s. Make it faster (share its set-up, test "
        f"the one piece it checks) or mark it @pytest.mark.slow(reason=\"...\") so that only "
        f"bin/test --all runs it."
    )
