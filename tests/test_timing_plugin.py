"""The suite's timing check (tests/support/timing.py), run on small test files by pytester.

The inner tests sleep on purpose: a test that takes time is the input here. The
limit is a tenth of a second so that the module takes a few seconds; the inner
runs are in-process (a subprocess would import the whole plugin stack each time).
"""

from __future__ import annotations

import pytest

LIMIT = ["-p", "tests.support.timing", "-p", "no:django", "-p", "no:cacheprovider", "--max-test-seconds=0.1"]

SLOW_AND_FAST = """
import time
import pytest

def test_fast():
    pass

def test_too_slow():
    time.sleep(0.3)

@pytest.mark.slow(reason="reads a large file")
def test_slow_with_a_reason():
    time.sleep(0.3)

@pytest.mark.slow
def test_slow_without_a_reason():
    time.sleep(0.3)
"""


@pytest.fixture
def inner(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeini("[pytest]\nmarkers =\n    slow: slow\n")
    pytester.makepyfile(test_inner=SLOW_AND_FAST)
    return pytester


def test_a_test_over_the_limit_fails_the_run_with_its_name_and_time(inner):
    result = inner.runpytest_inprocess(*LIMIT)

    assert result.ret == pytest.ExitCode.TESTS_FAILED
    # Three pass their call; the two overruns fail at tear-down, the one with a reason does not.
    result.assert_outcomes(passed=4, errors=2)
    result.stdout.fnmatch_lines([
        "*test_inner.py::test_too_slow took 0.* s (set-up *, call 0.* s, tear-down *), "
        "more than the suite's limit of 0.1 s*",
    ])
    output = result.stdout.str()
    assert "test_slow_without_a_reason took" in output
    assert "test_slow_with_a_reason took" not in output
    assert "test_fast took" not in output


def test_set_up_time_counts_against_the_test(pytester):
    pytester.makepyfile(test_setup="""
import time
import pytest

@pytest.fixture
def expensive():
    time.sleep(0.3)

def test_uses_it(expensive):
    pass
""")
    result = pytester.runpytest_inprocess(*LIMIT)

    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*test_uses_it took 0.* s (set-up 0.* s, call 0.0 s*"])


def test_a_session_fixture_set_up_by_the_test_is_not_counted(pytester):
    # The test database's migrations are paid by whichever test comes first.
    pytester.makepyfile(test_session="""
import time
import pytest

@pytest.fixture(scope="session")
def database():
    time.sleep(0.3)

def test_first(database):
    pass

def test_second(database):
    pass
""")
    result = pytester.runpytest_inprocess(*LIMIT)

    result.assert_outcomes(passed=2)


def test_without_the_option_nothing_is_timed(inner):
    result = inner.runpytest_inprocess("-p", "tests.support.timing", "-p", "no:django", "-p", "no:cacheprovider")

    assert result.ret == pytest.ExitCode.OK
    result.assert_outcomes(passed=4)
