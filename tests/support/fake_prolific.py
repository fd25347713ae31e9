"""A fake Prolific API server on 127.0.0.1, following Prolific's public API documentation.

The one fake allowed in the tests: Prolific is outside our stack. It keeps studies,
submissions, bonus payments and participant groups in memory, checks the token and
the request bodies the way the documentation describes, records every request, and
can be told to fail the next matching request (a status code, or no answer in time).
"""

from __future__ import annotations

import json
import re
import secrets
import threading
import time
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

TOKEN = "test-prolific-token-" + "x7Q" * 10
REJECTION_CATEGORIES = {"TOO_QUICKLY", "TOO_SLOWLY", "FAILED_INSTRUCTIONS", "INCOMP_LONGITUDINAL", "FAILED_CHECK",
                        "LOW_EFFORT", "MALINGERING", "NO_CODE", "BAD_CODE", "NO_DATA", "UNSUPP_DEVICE", "OTHER"}
CODE_TYPES = {"COMPLETED", "SCREENED_OUT", "FAILED_ATTENTION_CHECK", "FOLLOW_UP_STUDY", "GIVE_BONUS",
              "INCOMPATIBLE_DEVICE", "NO_CONSENT", "OTHER"}
STUDY_TRANSITIONS = {"PUBLISH": ({"UNPUBLISHED"}, "ACTIVE"), "PAUSE": ({"ACTIVE"}, "PAUSED"),
                     "START": ({"PAUSED"}, "ACTIVE"), "STOP": ({"ACTIVE", "PAUSED"}, "AWAITING REVIEW")}
PAGE_SIZE = 2  # small, so that listing follows Prolific's "next" links


def new_id() -> str:
    return secrets.token_hex(12)


class FakeProlific:
    def __init__(self) -> None:
        self.studies: dict[str, dict] = {}
        self.submissions: dict[str, dict] = {}
        self.bonuses: dict[str, dict] = {}
        self.groups: dict[str, dict] = {}
        self.requests: list[dict] = []
        self._faults: list[tuple[str, str, int | str]] = []
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        # shutdown() waits for serve_forever's next poll: at the default 0.5 s, every test using the server
        # paid half a second in its tear-down.
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.02},
                                        daemon=True)

    def start(self) -> FakeProlific:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    # ------------------------------------------------------------------ test controls
    def fail_next(self, method: str, path_pattern: str, how: int | str) -> None:
        """The next ``method`` request whose path matches answers ``how`` (a status, or "timeout")."""
        self._faults.append((method, path_pattern, how))

    def add_submission(self, study_id: str, participant_id: str, status: str = "AWAITING REVIEW") -> str:
        submission_id = new_id()
        self.submissions[submission_id] = {"id": submission_id, "study_id": study_id,
                                           "participant_id": participant_id, "status": status}
        return submission_id

    def calls(self, method: str, path_pattern: str) -> list[dict]:
        return [r for r in self.requests if r["method"] == method and re.fullmatch(path_pattern, r["path"])]

    # ------------------------------------------------------------------ the API
    def handle(self, method: str, path: str, body: dict) -> tuple[int, dict]:
        routes = [
            ("POST", r"/api/v1/studies/", self._study_create),
            ("GET", r"/api/v1/studies/(\w+)/", self._study_get),
            ("POST", r"/api/v1/studies/(\w+)/transition/", self._study_transition),
            ("GET", r"/api/v1/studies/(\w+)/submissions/(?:\?page=(\d+))?", self._submissions),
            ("POST", r"/api/v1/submissions/bulk-approve/", self._bulk_approve),
            ("POST", r"/api/v1/submissions/(\w+)/transition/", self._submission_transition),
            ("POST", r"/api/v1/submissions/bonus-payments/", self._bonus_setup),
            ("POST", r"/api/v1/bulk-bonus-payments/(\w+)/pay/", self._bonus_pay),
            ("POST", r"/api/v1/participant-groups/", self._group_create),
            ("POST", r"/api/v1/participant-groups/(\w+)/participants/", self._group_add),
        ]
        for route_method, pattern, view in routes:
            if method == route_method and (match := re.fullmatch(pattern, path)):
                with self._lock:
                    return view(body, *match.groups())
        return 404, {"error": {"detail": "Not found."}}

    def _study_create(self, body: dict) -> tuple[int, dict]:
        problems = {name: ["This field is required."] for name in
                    ("name", "description", "external_study_url", "prolific_id_option", "completion_codes",
                     "total_available_places", "estimated_completion_time", "reward") if name not in body}
        for name in ("total_available_places", "estimated_completion_time", "reward"):
            if name in body and not (isinstance(body[name], int) and body[name] > 0):
                problems[name] = ["A positive integer is required."]
        if body.get("prolific_id_option") == "url_parameters" and "{{%PROLIFIC_PID%}}" not in body.get(
                "external_study_url", ""):
            problems["external_study_url"] = ["The URL must carry {{%PROLIFIC_PID%}} with url_parameters."]
        for code in body.get("completion_codes", []):
            if not code.get("code") or code.get("code_type") not in CODE_TYPES:
                problems["completion_codes"] = ["Each code needs a code and a known code_type."]
        if problems:
            return 400, {"error": {"status": 400, "detail": problems}}
        study = {**body, "id": new_id(), "status": "UNPUBLISHED"}
        self.studies[study["id"]] = study
        return 201, study

    def _study_get(self, body: dict, study_id: str) -> tuple[int, dict]:
        if study_id not in self.studies:
            return 404, {"error": {"detail": "Not found."}}
        return 200, self.studies[study_id]

    def _study_transition(self, body: dict, study_id: str) -> tuple[int, dict]:
        study = self.studies.get(study_id)
        if study is None:
            return 404, {"error": {"detail": "Not found."}}
        allowed_from, to = STUDY_TRANSITIONS.get(body.get("action"), (set(), None))
        if study["status"] not in allowed_from:
            return 400, {"error": {"detail": f"Cannot {body.get('action')} a study that is {study['status']}."}}
        study["status"] = to
        return 200, study

    def _submissions(self, body: dict, study_id: str, page: str | None) -> tuple[int, dict]:
        if study_id not in self.studies:
            return 404, {"error": {"detail": "Not found."}}
        rows = [s for s in self.submissions.values() if s["study_id"] == study_id]
        number = int(page or 1)
        chunk = rows[(number - 1) * PAGE_SIZE: number * PAGE_SIZE]
        following = (f"{self.url}/api/v1/studies/{study_id}/submissions/?page={number + 1}"
                     if number * PAGE_SIZE < len(rows) else None)
        return 200, {"results": chunk, "_links": {"next": {"href": following}}, "meta": {"count": len(rows)}}

    def _bulk_approve(self, body: dict) -> tuple[int, dict]:
        ids = body.get("submission_ids") or []
        chosen = [self.submissions.get(i) for i in ids]
        if not body.get("study_id") or not ids or any(
                s is None or s["study_id"] != body["study_id"] or s["status"] != "AWAITING REVIEW" for s in chosen):
            return 400, {"error": {"detail": "Every submission must belong to the study and await review."}}
        for submission in chosen:
            submission["status"] = "APPROVED"
        return 200, {"message": "The request to bulk approve has been made successfully."}

    def _submission_transition(self, body: dict, submission_id: str) -> tuple[int, dict]:
        submission = self.submissions.get(submission_id)
        if submission is None:
            return 404, {"error": {"detail": "Not found."}}
        if body.get("action") != "REJECT" or submission["status"] != "AWAITING REVIEW":
            return 400, {"error": {"detail": "This transition is not allowed."}}
        if body.get("rejection_category") not in REJECTION_CATEGORIES or len(body.get("message", "")) < 100:
            return 400, {"error": {"detail": "A rejection needs a category and a message of 100 characters."}}
        submission["status"] = "REJECTED"
        return 200, submission

    def _bonus_setup(self, body: dict) -> tuple[int, dict]:
        study_id = body.get("study_id")
        participants = {s["participant_id"] for s in self.submissions.values() if s["study_id"] == study_id}
        lines = [line.split(",") for line in body.get("csv_bonuses", "").strip().splitlines()]
        if study_id not in self.studies or not lines or any(
                len(f) != 2 or f[0] not in participants for f in lines):
            return 400, {"error": {"detail": "Every line needs a participant of the study and an amount."}}
        amount = sum(Decimal(f[1]) for f in lines)
        bulk = {"id": new_id(), "study": study_id, "amount": float(amount), "fees": float(amount / 3),
                "total_amount": float(amount * 4 / 3), "paid": False, "lines": lines}
        self.bonuses[bulk["id"]] = bulk
        return 201, bulk

    def _bonus_pay(self, body: dict, bulk_id: str) -> tuple[int, dict]:
        if bulk_id not in self.bonuses:
            return 404, {"error": {"detail": "Not found."}}
        self.bonuses[bulk_id]["paid"] = True
        return 202, {}

    def _group_create(self, body: dict) -> tuple[int, dict]:
        if not body.get("name") or not (body.get("workspace_id") or body.get("project_id")):
            return 400, {"error": {"detail": "A name and a workspace_id or project_id are required."}}
        group = {"id": new_id(), "name": body["name"], "participant_ids": set(body.get("participant_ids", []))}
        self.groups[group["id"]] = group
        return 201, {"id": group["id"], "name": group["name"], "participant_count": len(group["participant_ids"])}

    def _group_add(self, body: dict, group_id: str) -> tuple[int, dict]:
        if group_id not in self.groups:
            return 404, {"error": {"detail": "Not found."}}
        self.groups[group_id]["participant_ids"] |= set(body.get("participant_ids", []))
        return 200, {"results": sorted(self.groups[group_id]["participant_ids"])}


def _handler_for(fake: FakeProlific) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:  # quiet
            pass

        def _serve(self, method: str) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            body = json.loads(raw) if raw else {}
            fake.requests.append({"method": method, "path": self.path, "body": body,
                                  "authorization": self.headers.get("Authorization")})
            for fault in list(fake._faults):
                if fault[0] == method and re.fullmatch(fault[1], self.path):
                    fake._faults.remove(fault)
                    if fault[2] == "timeout":
                        time.sleep(2.5)
                        return self._answer(200, {})
                    return self._answer(fault[2], {"error": {"detail": f"fault {fault[2]} injected by the test"}})
            if self.headers.get("Authorization") != f"Token {TOKEN}":
                return self._answer(401, {"error": {"detail": "Invalid token."}})
            self._answer(*fake.handle(method, self.path, body))

        def _answer(self, status: int, payload: dict) -> None:
            data = json.dumps(payload).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up waiting (a time-out test)

        def do_GET(self) -> None:
            self._serve("GET")

        def do_POST(self) -> None:
            self._serve("POST")

    return Handler
