"""Security headers and cookies of the production settings, `check --deploy`, and
panel ids kept out of gunicorn's access log."""

from __future__ import annotations

import base64
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from django.test import Client, override_settings

from tests.support.paths import ROOT
from web.security import CHART_PAGE_CSP, DEFAULT_CSP, chart_page_csp, with_style_source

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
    # 'self' plus the hash of the inlined participant stylesheet, nothing else.
    assert re.fullmatch(r"style-src 'self' 'sha256-[A-Za-z0-9+/]{43}='", policy["style-src"])
    assert policy["script-src"] == "script-src 'self'"
    assert policy["frame-ancestors"] == "frame-ancestors 'none'"
    assert "unsafe-inline" not in response["Content-Security-Policy"]


def _inline_style(html: str) -> str:
    styles = re.findall(r"<style>(.*?)</style>", html, flags=re.DOTALL)
    assert len(styles) == 1, f"{len(styles)} <style> elements"
    return styles[0]


def _sha256_source(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode() + "'"


def test_the_csp_allows_exactly_the_inlined_stylesheet_by_its_hash(participant, tide, steps):
    pages = {
        "block": participant.get(f"/s/{tide.slug}/page/"),
        "bad link": Client().get(f"/s/{tide.slug}/?PROLIFIC_PID=bad%20id"),
        "session expired": Client().get(f"/s/{tide.slug}/page/", follow=True),
    }
    for name, response in pages.items():
        assert response.status_code in (200, 400, 403), name
        html, header = response.content.decode(), response["Content-Security-Policy"]
        css = _inline_style(html)
        # The hash of what was rendered, byte for byte (no autoescaping, same whitespace).
        assert _sha256_source(css) in _directives(header)["style-src"].split(), name
        assert "unsafe-inline" not in header, name
        assert css == (ROOT / "static" / "css" / "site.css").read_text(), f"{name}: not the file's exact text"
        assert '<link rel="stylesheet"' not in html, name


def test_participant_pages_have_no_inline_scripts_or_style_attributes(participant, tide):
    html = participant.get(f"/s/{tide.slug}/page/").content.decode()
    assert not re.search(r"<script(?![^>]*\bsrc=)[^>]*>", html), "inline <script> would be blocked by the CSP"
    assert not re.search(r"\son[a-z]+=\"", html), "inline event handlers would be blocked by the CSP"
    # A hash admits the <style> element only, never style="..." attributes.
    assert not re.search(r"\sstyle=", html), "style attributes would be blocked by the CSP"


def test_researcher_pages_link_the_stylesheet_instead(client, owner):
    client.force_login(owner)
    html = client.get("/studies/").content.decode()
    assert "<style" not in html
    assert re.search(r'<link rel="stylesheet" href="/static/css/site\.css">', html)


def test_chart_pages_allow_inline_styles_only():
    response = chart_page_csp(lambda request: __import__("django.http").http.HttpResponse("x"))(None)
    policy = _directives(response["Content-Security-Policy"])
    assert policy["style-src"] == "style-src 'self' 'unsafe-inline'"
    assert policy["script-src"] == "script-src 'self'"
    assert CHART_PAGE_CSP.replace(" 'unsafe-inline'", "") == DEFAULT_CSP
    # No hash next to 'unsafe-inline': browsers would then ignore 'unsafe-inline' (and plotly's styles).
    assert "sha256" not in response["Content-Security-Policy"]


HASH = "'sha256-AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA='"


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        (DEFAULT_CSP, DEFAULT_CSP.replace("style-src 'self'", f"style-src 'self' {HASH}")),
        (CHART_PAGE_CSP, CHART_PAGE_CSP),
        # Styles fall back on default-src: the hash goes into a style-src copied from it.
        ("default-src 'self' https://cdn.example; img-src *",
         f"default-src 'self' https://cdn.example; img-src *; style-src 'self' https://cdn.example {HASH}"),
        ("default-src 'none'", f"default-src 'none'; style-src {HASH}"),
        ("style-src-elem 'self'; style-src 'self'", f"style-src-elem 'self' {HASH}; style-src 'self' {HASH}"),
        ("img-src 'self'", "img-src 'self'"),  # no restriction on styles to widen
    ],
)
def test_an_operator_s_own_policy_admits_the_stylesheet_hash_too(policy, expected):
    assert with_style_source(policy, HASH) == expected


def test_with_debug_off_the_stylesheet_comes_from_the_source_tree_not_static_root():
    # With DEBUG off (manifest storage, nothing collected) the page still inlines the
    # file and the middleware's header still carries its hash.
    script = (
        "import django, re; django.setup()\n"
        "from django.http import HttpResponse\n"
        "from django.template.loader import render_to_string\n"
        "from web.inline_style import style_hash\n"
        "from web.security import ContentSecurityPolicyMiddleware\n"
        "html = render_to_string('surveys/notice_full.html', {'study': {'title': 'T'}})\n"
        "css = re.search(r'<style>(.*?)</style>', html, re.S).group(1)\n"
        "header = ContentSecurityPolicyMiddleware(lambda r: HttpResponse())(None)['Content-Security-Policy']\n"
        "print(len(css), style_hash(css) in header)\n"
    )
    env = _production_env(DJANGO_SETTINGS_MODULE="config.settings")
    result = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [str(len((ROOT / "static" / "css" / "site.css").read_text())), "True"]


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


def _deploy_check_ids(env: dict[str, str]) -> set[str]:
    result = subprocess.run([sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
                            cwd=ROOT, env=env, capture_output=True, text=True)
    return set(re.findall(r"\(([a-z_.]+\.[WE]\d+)\)", result.stdout + result.stderr))


def test_check_deploy_is_clean_but_for_the_documented_hsts_preload_warning():
    # W021: HSTS preload is opt-in (SECURE_HSTS_PRELOAD) -- docs/launch.md says why.
    assert _deploy_check_ids(_production_env(CELERY_BROKER_URL="redis://127.0.0.1:6379/0")) <= {"security.W021"}


def test_check_deploy_warns_that_without_a_broker_runs_happen_inside_web_requests():
    env = {k: v for k, v in _production_env().items() if k != "CELERY_BROKER_URL"}
    assert "analysis.W001" in _deploy_check_ids(env)


@pytest.mark.slow(reason="starts gunicorn and sends requests with every parameter name")
@pytest.mark.skipif(shutil.which("gunicorn") is None and not (Path(sys.executable).parent / "gunicorn").exists(),
                    reason="gunicorn is not installed")
def test_gunicorn_access_log_never_shows_a_panel_id_of_any_parameter_name(tmp_path):
    from bench import _stack

    pid = "5f8a2b9c1d3e4f5a6b7c8d9e"
    worker, email = "A2WORKER77XQ", "ann.lee%40example.org"
    database = tmp_path / "db.sqlite3"
    env = _stack.production_env(database_url=f"sqlite:///{database}", SECURE_COOKIES="false")
    _stack.prepare_site(env, collectstatic=False)
    # A second study whose panel calls its id workerId and takes any id.
    _stack.manage("shell", "-c", "from surveys.models import Study; s = Study.objects.get(slug='tide'); "
                  "s.pk, s.slug, s.id_param, s.id_pattern = None, 'mturk', 'workerId', '^[A-Za-z0-9]+$'; s.save()", env=env)
    log = tmp_path / "gunicorn.log"
    server = _stack.Gunicorn(env, 8139, workers=1, log_path=log).start()
    try:
        status, _ = _stack.http_get(server.base_url, f"/s/tide/?PROLIFIC_PID={pid}&STUDY_ID=st-{pid}&SESSION_ID=se-{pid}")
        assert status == 303
        _stack.http_get(server.base_url, f"/s/tide/?participant={pid}")  # a mistyped parameter name
        status, _ = _stack.http_get(server.base_url, f"/s/mturk/?workerId={worker}&assignmentId=AS{worker}",
                                    headers={"Referer": f"https://worker.example.com/task?workerId={worker}"})
        assert status == 303
        _stack.http_get(server.base_url, f"/s/mturk/?id={email}")  # an e-mail in a parameter of any name
        _stack.http_get(server.base_url, f"/?{email}")
    finally:
        server.stop()
    text = log.read_text()
    assert "GET /s/tide/?PROLIFIC_PID=" in text, "the access log line is missing: " + text[-2000:]
    assert "GET /s/mturk/?workerId=[masked]&assignmentId=[masked]" in text, text[-2000:]
    assert '"https://worker.example.com/task?workerId=[masked]"' in text  # the Referer field of the default format
    for secret in (pid, worker, email, "ann.lee"):
        assert secret not in text, secret
