"""The suite's wait for the live server to be idle before a test's database is flushed."""

from __future__ import annotations

import threading

from tests.support.live_server import _Counted, _Requests


def test_the_wait_ends_only_after_the_last_response_is_closed_and_nothing_new_started():
    requests = _Requests()
    requests.enter()
    response = _Counted([b"streamed"], requests.leave)
    finished = threading.Event()
    waiter = threading.Thread(target=lambda: requests.wait_until_idle(timeout=5) and finished.set())
    waiter.start()
    assert not finished.wait(0.3)  # a request is still being answered
    assert list(response) == [b"streamed"]
    response.close()
    assert finished.wait(2)
    waiter.join()


def test_the_wait_gives_up_at_its_timeout_while_a_request_runs():
    requests = _Requests()
    requests.enter()
    assert requests.wait_until_idle(timeout=0.1) is False
