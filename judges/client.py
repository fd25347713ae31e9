"""A thin client of an OpenAI-compatible chat endpoint (``POST {base}/chat/completions``).

``complete`` returns the reply's text and token counts, or raises ``JudgeEndpointError`` with a
message a researcher can act on. It retries what may pass (429, respecting ``Retry-After``; 5xx;
a timeout) up to ``retries`` times and gives up at once on what will not (401, 403, 400). The key
is sent in the ``Authorization`` header only: never part of a URL, a message or a log line.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import requests
from django.conf import settings

# Longest wait a Retry-After may ask for; beyond it the run fails with a message rather than sleeping for hours.
MAX_RETRY_AFTER_SECONDS = 120.0


class JudgeEndpointError(Exception):
    """The endpoint refused, failed, did not answer, or answered something that is not a chat completion."""


@dataclass(frozen=True)
class Completion:
    text: str
    prompt_tokens: int
    completion_tokens: int


class JudgeClient:
    def __init__(self, *, api_key: str | None = None, base_url: str | None = None, model: str | None = None,
                 timeout: float | None = None, retries: int | None = None,
                 sleep: Callable[[float], None] = time.sleep):
        self._key = settings.JUDGE_API_KEY if api_key is None else api_key
        self.base_url = (base_url or settings.JUDGE_API_URL).rstrip("/")
        self.model = model or settings.JUDGE_MODEL
        self.timeout = timeout or settings.JUDGE_API_TIMEOUT
        self.retries = settings.JUDGE_RETRIES if retries is None else retries
        self._sleep = sleep
        if not self.model:
            raise JudgeEndpointError("no model is set: give the judge a model or set JUDGE_MODEL in the environment")

    def __repr__(self) -> str:  # never show the key, even in a traceback's locals
        return f"JudgeClient({self.base_url!r}, {self.model!r})"

    def complete(self, messages: list[dict[str, str]]) -> Completion:
        """One chat completion, retried on 429, 5xx and timeouts."""
        for attempt in range(self.retries + 1):
            last = attempt == self.retries
            try:
                answer = requests.post(
                    f"{self.base_url}/chat/completions", timeout=self.timeout,
                    json={"model": self.model, "messages": messages, "temperature": 0},
                    headers={"Authorization": f"Bearer {self._key}"} if self._key else {},
                )
            except requests.Timeout:
                if last:
                    raise JudgeEndpointError(f"the judge endpoint did not answer within {self.timeout:g} s "
                                             f"({self.retries + 1} tries)") from None
                self._sleep(min(2 ** attempt, MAX_RETRY_AFTER_SECONDS))
                continue
            except requests.RequestException as exc:
                raise JudgeEndpointError(f"could not reach the judge endpoint at {self.base_url}: "
                                         f"{type(exc).__name__}") from None
            if answer.status_code in (401, 403):
                raise JudgeEndpointError(f"the judge endpoint refused the key ({answer.status_code}): set "
                                         "JUDGE_API_KEY in the server's environment")
            if answer.status_code == 429 or answer.status_code >= 500:
                if last:
                    raise JudgeEndpointError(f"the judge endpoint answered {answer.status_code} "
                                             f"{'(rate limited)' if answer.status_code == 429 else '(server error)'} "
                                             f"{self.retries + 1} times; try again later")
                self._sleep(_retry_after(answer, attempt))
                continue
            if answer.status_code >= 400:
                raise JudgeEndpointError(f"the judge endpoint refused the request ({answer.status_code}): "
                                         f"{answer.text[:200]}")
            return _completion(answer)
        raise AssertionError("unreachable")  # the loop returns or raises


def _retry_after(answer: requests.Response, attempt: int) -> float:
    try:
        wait = float(answer.headers.get("Retry-After", ""))
    except ValueError:
        wait = float(2 ** attempt)
    if wait > MAX_RETRY_AFTER_SECONDS:
        raise JudgeEndpointError(f"the judge endpoint asks to wait {wait:g} s (Retry-After); try again later")
    return max(wait, 0.0)


def _completion(answer: requests.Response) -> Completion:
    try:
        body = answer.json()
        text = body["choices"][0]["message"]["content"]
        usage = body.get("usage") or {}
        if not isinstance(text, str):
            raise TypeError
        return Completion(text=text, prompt_tokens=int(usage.get("prompt_tokens") or 0),
                          completion_tokens=int(usage.get("completion_tokens") or 0))
    except (ValueError, KeyError, IndexError, TypeError):
        raise JudgeEndpointError("the judge endpoint answered something that is not a chat completion") from None
