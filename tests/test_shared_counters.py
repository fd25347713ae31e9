"""Sign-in and API throttle counters are shared by every worker process.

gunicorn runs with ``--max-requests 1``: every request is served by a fresh
worker process, so a counter kept in a process's memory would never reach its
limit. The default cache (the database) is what makes them count.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench import _stack  # noqa: E402

requests = pytest.importorskip("requests")
pytestmark = pytest.mark.slow(reason="several processes share rate-limit counters")

SETUP = """
from django.contrib.auth import get_user_model
from rest_framework.authtoken.models import Token
user = get_user_model().objects.create_user("ann", password="ann-password-123")
print(Token.objects.create(user=user).key)
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    folder = tmp_path_factory.mktemp("shared-counters")
    env = _stack.production_env(database_url=f"sqlite:///{folder / 'db.sqlite3'}", API_THROTTLE_RATE="5/hour", SECURE_COOKIES="false",
                                GUNICORN_CMD_ARGS="--max-requests 1")
    _stack.prepare_site(env, collectstatic=True)
    token = _stack.manage("shell", "-c", SETUP, env=env).stdout.strip().splitlines()[-1]
    gunicorn = _stack.Gunicorn(env, 8141, workers=2, log_path=folder / "gunicorn.log").start()
    yield gunicorn.base_url, token
    gunicorn.stop()


def _sign_in(base: str, username: str, password: str, address: str = "") -> int:
    browser = requests.Session()
    page = browser.get(f"{base}/accounts/login/", timeout=30).text
    csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)
    headers = {"Referer": f"{base}/accounts/login/"}
    response = browser.post(f"{base}/accounts/login/", timeout=30, allow_redirects=False, headers=headers,
                            data={"username": username, "password": password, "csrfmiddlewaretoken": csrf})
    return response.status_code


def test_ten_failures_lock_the_account_across_worker_processes_and_nobody_else(server):
    base, _ = server
    assert [_sign_in(base, "ann", "wrong") for _ in range(10)] == [200] * 10
    assert _sign_in(base, "ann", "ann-password-123") == 429  # locked, though each try met a new process
    assert _sign_in(base, "bob", "whatever") == 200  # another account is not locked out


def test_the_api_throttle_counts_across_worker_processes(server):
    base, token = server
    headers = {"Authorization": f"Token {token}"}
    codes = [requests.get(f"{base}/api/studies/", headers=headers, timeout=30).status_code for _ in range(6)]
    assert codes == [200] * 5 + [429]
