"""The live server's requests in progress, so that a test can wait for them to end.

A browser test ends while a request it caused may still be running in the live
server: a draft the page sent as it was closed (a ``keepalive`` fetch on
``pagehide``), a results poll. Flushing the test database then (a TRUNCATE of
every table) meets that request's locks, and PostgreSQL breaks the lock cycle by
failing the flush as a deadlock. Counting the requests in the server's WSGI
application, around the whole response (a streamed export reads the database
while it is sent), lets the suite wait until the server is idle first.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator

_WAIT_SECONDS = 30
# A closing page's last request (a keepalive fetch) can reach the server just after
# the test ends: idle counts once no request has started for this long.
_QUIET_SECONDS = 0.25


class _Requests:
    def __init__(self) -> None:
        self.active = 0
        self.started = 0
        self.changed = threading.Condition()

    def enter(self) -> None:
        with self.changed:
            self.active += 1
            self.started += 1
            self.changed.notify_all()

    def leave(self) -> None:
        with self.changed:
            self.active -= 1
            self.changed.notify_all()

    def wait_until_idle(self, timeout: float = _WAIT_SECONDS) -> bool:
        """True once no request is in progress and none started for ``_QUIET_SECONDS``."""
        deadline = time.monotonic() + timeout
        with self.changed:
            while True:
                if not self.changed.wait_for(lambda: self.active == 0, timeout=deadline - time.monotonic()):
                    return False
                started = self.started
                self.changed.wait_for(lambda: self.started != started, timeout=_QUIET_SECONDS)
                if self.started == started and self.active == 0:
                    return True


class _Counted:
    """A WSGI response that says when the server is done with it (``close``, per PEP 3333)."""

    def __init__(self, chunks: Iterable[bytes], done: Callable[[], None]) -> None:
        self.chunks, self.done = chunks, done

    def __iter__(self) -> Iterator[bytes]:
        return iter(self.chunks)

    def close(self) -> None:
        try:
            if hasattr(self.chunks, "close"):
                self.chunks.close()
        finally:
            self.done()


def counting_requests(live_server) -> _Requests:
    """Wrap the live server's application once (the server lives for the session)."""
    httpd = live_server.thread.httpd
    requests = getattr(httpd, "requests_in_progress", None)
    if requests is None:
        requests = httpd.requests_in_progress = _Requests()
        application = httpd.get_app()

        def counted(environ, start_response):
            requests.enter()
            try:
                chunks = application(environ, start_response)
            except BaseException:
                requests.leave()
                raise
            return _Counted(chunks, requests.leave)

        httpd.set_app(counted)
    return requests
