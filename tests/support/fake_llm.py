"""A fake OpenAI-compatible chat endpoint on 127.0.0.1 (``POST /v1/chat/completions``).

The LLM endpoint is outside our stack, so it is faked like Prolific (tests/support/fake_prolific.py).
It checks the key, records every request, counts calls per prompt, answers through a function the
test gives (prompt text -> reply text), and can be told to fail the next requests: a status code
(429 with a Retry-After), no answer in time, or a body that is not a chat completion.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

KEY = "sk-test-judge-" + "Zq9" * 12


class FakeLLM:
    def __init__(self, answer: Callable[[str], str]) -> None:
        self.answer = answer
        self.requests: list[dict] = []
        self.per_prompt: Counter[str] = Counter()
        self._faults: list[int | str] = []
        self._lock = threading.Lock()
        self.timeout_seconds = 1.5
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/v1"
        # shutdown() waits for serve_forever's next poll: at the default 0.5 s, every test using the server
        # paid half a second in its tear-down.
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.02},
                                        daemon=True)

    def start(self) -> FakeLLM:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def fail_next(self, *how: int | str) -> None:
        """The next requests answer these, in order: a status code, "timeout" or "garbage"."""
        self._faults.extend(how)

    def handle(self, headers: dict, body: dict) -> tuple[int, dict, dict | str]:
        with self._lock:
            self.requests.append({"headers": headers, "body": body})
            fault = self._faults.pop(0) if self._faults else None
        if fault == "timeout":
            time.sleep(self.timeout_seconds)
            return 500, {}, {"error": "too late"}
        if isinstance(fault, int):
            extra = {"Retry-After": "0.2"} if fault == 429 else {}
            return fault, extra, {"error": {"message": f"fault {fault}"}}
        if headers.get("authorization") != f"Bearer {KEY}":
            return 401, {}, {"error": {"message": "Incorrect API key provided"}}
        if fault == "garbage":
            return 200, {}, "<html>not json</html>"
        prompt = body["messages"][-1]["content"]
        with self._lock:
            self.per_prompt[prompt] += 1
        reply = self.answer(prompt)
        return 200, {}, {"id": "chatcmpl-1", "object": "chat.completion", "model": body.get("model"),
                         "choices": [{"index": 0, "message": {"role": "assistant", "content": reply},
                                      "finish_reason": "stop"}],
                         "usage": {"prompt_tokens": 1000, "completion_tokens": 100, "total_tokens": 1100}}


def _handler_for(fake: FakeLLM) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            length = int(self.headers.get("Content-Length") or 0)
            try:
                body = json.loads(self.rfile.read(length) or b"{}")
            except ValueError:
                body = {}
            if self.path != "/v1/chat/completions":
                status, extra, payload = 404, {}, {"error": "not found"}
            else:
                status, extra, payload = fake.handle({k.lower(): v for k, v in self.headers.items()}, body)
            data = payload.encode() if isinstance(payload, str) else json.dumps(payload).encode()
            try:
                self.send_response(status)
                for name, value in extra.items():
                    self.send_header(name, value)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (a timeout test)

        def log_message(self, *args) -> None:
            pass

    return Handler
