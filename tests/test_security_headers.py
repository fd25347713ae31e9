"""Security headers and cookies of the production settings, `check --deploy`, and
panel ids kept out of gunicorn's access log."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from django.test import Client, override_settings

from config.security import CHART_PAGE_CSP, DEFAULT_CSP, chart_page_csp

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _directives(policy: str) -> dict[str, str]:
    return {part.split()[0]: part.strip() for part in policy.split(";") if part.strip()}


@pytest.fixture
def participant(client, tide, steps):
    steps.start(client, tide)
    return client


def test_it_sends_a_strict_csp_on_participant_pages(participant, tide):
    response = participant.get(f"/s/{tide.slug}/page/")
    policy = _directives(response["Content-Security-Policy"])
    assert policy["style-src"] == "style-src 'self'"
    assert policy["script-src"] == "script-src 'self'"
    assert policy["frame-ancestors"] == "frame-ancestors 'none'"
    assert "unsafe-inline" not in response["Content-Security-Policy"]


def test_participant_pages_have_no_inline_scripts_or_styles(participant, tide):
    html = participant.get(f"/s/{tide.slug}/page/").content.decode()
    assert not re.search(r"<script(?![^>]*\bsrc=)[^>]*>", html), "inline <script> would be blocked by the CSP"
    assert "<style" not in html
    assert not re.search(r"\son[a-z]+=\"", html), "inline event handlers would be blocked by the CSP"


def test_chart_pages_allow_inline_styles_only():
    response = chart_page_csp(lambda request: __import__("django.http").http.HttpResponse("x"))(None)
    policy = _directives(response["Content-Security-Policy"])
    assert policy["style-src"] == "style-src 'self' 'unsafe-inline'"
    assert policy["script-src"] == "script-src 'self'"
    assert CHART_PAGE_CSP.replace(" 'unsafe-inline'", "") == DEFAULT_CSP


def test_it_sends_nosniff_referrer_policy_and_frame_denial(participant, tide):
    response = participant.get(f"/s/{tide.slug}/page/")
    assert response["X-Content-Type-Options"] == "nosniff"
    assert response["Referrer-Policy"] == "same-origin"
    assert response["X-Frame-Options"] == "DENY"


@override_settings(SECURE_HSTS_SECONDS=31536000, SECURE_HSTS_INCLUDE_SUBDOMAINS=True)
def test_it_sends_hsts_over_https(db):
    response = Client().get("/", secure=True)
    assert response["Strict-Transport-Security"] == "max-age=31536000; includeSubDomains"


@override_settings(SESSION_COOKIE_SECURE=True, CSRF_COOKIE_SECURE=True)
def test_session_and_csrf_cookies_are_secure_and_httponly(tide, steps):
    client = Client()
    client.get(steps.link(tide))
    consent = client.get(f"/s/{tide.slug}/consent/")
    session, csrf = client.cookies["sessionid"], consent.cookies.get("csrftoken") or client.cookies["csrftoken"]
    for cookie in (session, csrf):
        assert cookie["secure"] is True
        assert cookie["httponly"] is True


def _production_env(**extra) -> dict[str, str]:
    # DJANGO_ALLOW_ASYNC_UNSAFE is set for this process by the browser tests only.
    dropped = {"DEBUG", "SECURE_HSTS_SECONDS", "SECURE_COOKIES", "DJANGO_ALLOW_ASYNC_UNSAFE"}
    env = {k: v for k, v in os.environ.items() if k not in dropped}
    env.update(DEBUG="false", SECRET_KEY="x" * 20 + "-production-like-secret-key-for-the-test", ALLOWED_HOSTS="example.org")
    env.update(extra)
    return env


def test_check_deploy_is_clean_but_for_the_documented_hsts_preload_warning():
    result = subprocess.run([sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
                            cwd=ROOT, env=_production_env(), capture_output=True, text=True)
    found = set(re.findall(r"\(([a-z_.]+\.[WE]\d+)\)", result.stdout + result.stderr))
    # W021: HSTS preload is opt-in (SECURE_HSTS_PRELOAD) -- docs/launch.md says why.
    assert found <= {"security.W021"}, result.stdout + result.stderr


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("gunicorn") is None and not (Path(sys.executable).parent / "gunicorn").exists(),
                    reason="gunicorn is not installed")
def test_gunicorn_access_log_never_shows_a_prolific_id(tmp_path):
    from bench import _stack

    pid = "5f8a2b9c1d3e4f5a6b7c8d9e"
    database = tmp_path / "db.sqlite3"
    env = _stack.production_env(database_url=f"sqlite:///{database}", SECURE_COOKIES="false")
    _stack.prepare_site(env, collectstatic=False)
    log = tmp_path / "gunicorn.log"
    server = _stack.Gunicorn(env, 8139, workers=1, log_path=log).start()
    try:
        status, _ = _stack.http_get(server.base_url, f"/s/tide/?PROLIFIC_PID={pid}&STUDY_ID=st-{pid}&SESSION_ID=se-{pid}")
        assert status == 303
        _stack.http_get(server.base_url, f"/s/tide/?participant={pid}")  # a mistyped parameter name
    finally:
        server.stop()
    text = log.read_text()
    assert "GET /s/tide/?PROLIFIC_PID=" in text, "the access log line is missing: " + text[-2000:]
    assert pid not in text
