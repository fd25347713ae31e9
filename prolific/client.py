"""A thin client of Prolific's public API (https://docs.prolific.com/api-reference).

One method per endpoint we use; each returns Prolific's JSON or raises
``ProlificError`` with a message a researcher can act on. The token is sent in
the ``Authorization`` header only: it is never part of a URL, a message or a log line.
"""

from __future__ import annotations

import json
from typing import Any

import requests
from django.conf import settings


class ProlificError(Exception):
    """Prolific refused, failed or did not answer; the message says which and why."""


class ProlificClient:
    def __init__(self, *, token: str | None = None, base_url: str | None = None, timeout: float | None = None):
        self._token = settings.PROLIFIC_API_TOKEN if token is None else token
        self.base_url = (base_url or settings.PROLIFIC_API_URL).rstrip("/")
        self.timeout = timeout or settings.PROLIFIC_API_TIMEOUT
        if not self._token:
            raise ProlificError("PROLIFIC_API_TOKEN is not set: create a token in Prolific's settings "
                                "and put it in the server's environment")

    def __repr__(self) -> str:  # never show the token, even in a traceback's locals
        return f"ProlificClient({self.base_url!r})"

    def _call(self, method: str, path: str, body: dict | None = None) -> Any:
        where = f"{method} {path}"
        try:
            answer = requests.request(
                method, self.base_url + path, json=body, timeout=self.timeout,
                headers={"Authorization": f"Token {self._token}", "Accept": "application/json"},
            )
        except requests.Timeout:
            raise ProlificError(f"Prolific did not answer within {self.timeout:g} s ({where}); "
                                "nothing was changed here, try again later") from None
        except requests.RequestException as exc:
            raise ProlificError(f"could not reach Prolific at {self.base_url} ({where}): "
                                f"{type(exc).__name__}; nothing was changed here") from None
        if answer.status_code >= 400:
            raise ProlificError(_refusal(answer, where))
        if not answer.content:
            return {}
        try:
            return answer.json()
        except ValueError:
            raise ProlificError(f"Prolific answered {where} with something that is not JSON; "
                                "nothing was changed here") from None

    # ------------------------------------------------------------------ studies
    def study_create(self, payload: dict) -> dict:
        return self._call("POST", "/api/v1/studies/", payload)

    def study_transition(self, prolific_id: str, action: str) -> dict:
        return self._call("POST", f"/api/v1/studies/{prolific_id}/transition/", {"action": action})

    def study_get(self, prolific_id: str) -> dict:
        return self._call("GET", f"/api/v1/studies/{prolific_id}/")

    # -------------------------------------------------------------- submissions
    def submissions(self, prolific_id: str) -> list[dict]:
        """Every submission of the study, following Prolific's pages."""
        results, path = [], f"/api/v1/studies/{prolific_id}/submissions/"
        while path:
            page = self._call("GET", path)
            results.extend(page.get("results", []))
            following = ((page.get("_links") or {}).get("next") or {}).get("href")
            path = following.removeprefix(self.base_url) if following else ""
        return results

    def submissions_bulk_approve(self, prolific_id: str, submission_ids: list[str]) -> dict:
        return self._call("POST", "/api/v1/submissions/bulk-approve/",
                          {"study_id": prolific_id, "submission_ids": submission_ids})

    def submission_reject(self, submission_id: str, *, category: str, message: str) -> dict:
        return self._call("POST", f"/api/v1/submissions/{submission_id}/transition/",
                          {"action": "REJECT", "rejection_category": category, "message": message})

    # ------------------------------------------------------------------ bonuses
    def bonus_setup(self, prolific_id: str, csv_bonuses: str) -> dict:
        return self._call("POST", "/api/v1/submissions/bonus-payments/",
                          {"study_id": prolific_id, "csv_bonuses": csv_bonuses})

    def bonus_pay(self, bulk_id: str) -> dict:
        return self._call("POST", f"/api/v1/bulk-bonus-payments/{bulk_id}/pay/")

    # ------------------------------------------------------- participant groups
    def group_create(self, *, workspace_id: str, name: str, participant_ids: list[str]) -> dict:
        return self._call("POST", "/api/v1/participant-groups/",
                          {"workspace_id": workspace_id, "name": name, "participant_ids": participant_ids})

    def group_add(self, group_id: str, participant_ids: list[str]) -> dict:
        return self._call("POST", f"/api/v1/participant-groups/{group_id}/participants/",
                          {"participant_ids": participant_ids})


def _refusal(answer: requests.Response, where: str) -> str:
    try:
        detail = answer.json()
        detail = detail.get("error", detail) if isinstance(detail, dict) else detail
        detail = json.dumps(detail, ensure_ascii=False) if not isinstance(detail, str) else detail
    except ValueError:
        detail = answer.text
    detail = " ".join(detail.split())[:300] or answer.reason
    kind = "refused" if answer.status_code < 500 else "failed"
    hint = {401: " (is PROLIFIC_API_TOKEN right?)", 403: " (does the token's account own this study?)",
            404: " (not found on Prolific)", 429: " (too many requests: wait a minute)"}.get(answer.status_code, "")
    return f"Prolific {kind} {where} with {answer.status_code}{hint}: {detail}; nothing was changed here"
