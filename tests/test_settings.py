"""Settings come from the environment and fail loudly on malformed values."""

import os
import subprocess
import sys

import pytest
from django.core.exceptions import ImproperlyConfigured

from config.settings import database_config, env_bool, env_int, env_list
from tests.support.paths import ROOT


def test_it_reads_booleans(monkeypatch):
    monkeypatch.setenv("X_FLAG", "Yes")
    assert env_bool("X_FLAG", False) is True
    monkeypatch.setenv("X_FLAG", "off")
    assert env_bool("X_FLAG", True) is False
    monkeypatch.delenv("X_FLAG")
    assert env_bool("X_FLAG", True) is True


def test_it_rejects_a_malformed_boolean(monkeypatch):
    monkeypatch.setenv("X_FLAG", "maybe")
    with pytest.raises(ImproperlyConfigured, match="X_FLAG='maybe' is not a boolean"):
        env_bool("X_FLAG", False)


def test_it_rejects_a_malformed_number(monkeypatch):
    monkeypatch.setenv("X_NUM", "ten")
    with pytest.raises(ImproperlyConfigured, match="X_NUM='ten' is not a whole number"):
        env_int("X_NUM", 1)
    monkeypatch.setenv("X_NUM", "5")
    with pytest.raises(ImproperlyConfigured, match="must be at least 10"):
        env_int("X_NUM", 1, minimum=10)


def test_it_rejects_empty_list_entries(monkeypatch):
    monkeypatch.setenv("X_HOSTS", "a.example,,b.example")
    with pytest.raises(ImproperlyConfigured, match="empty entry"):
        env_list("X_HOSTS", [])
    monkeypatch.setenv("X_HOSTS", "a.example, b.example")
    assert env_list("X_HOSTS", []) == ["a.example", "b.example"]


def test_it_defaults_to_sqlite_for_concurrent_use(tmp_path):
    config = database_config(None, base_dir=tmp_path)
    assert config["ENGINE"] == "django.db.backends.sqlite3"
    assert config["OPTIONS"]["transaction_mode"] == "IMMEDIATE"
    assert "journal_mode=WAL" in config["OPTIONS"]["init_command"]
    assert config["OPTIONS"]["timeout"] >= 10


def test_it_parses_a_postgres_url(tmp_path):
    config = database_config("postgres://alice@db.example:5433/survey", base_dir=tmp_path)
    assert config["ENGINE"] == "django.db.backends.postgresql"
    assert (config["NAME"], config["HOST"], config["PORT"], config["USER"]) == ("survey", "db.example", 5433, "alice")


def test_postgres_prepares_statements_unless_switched_off(tmp_path, monkeypatch):
    url = "postgres://alice@db.example:5433/survey"
    assert database_config(url, base_dir=tmp_path)["OPTIONS"]["prepare_threshold"] == 0
    monkeypatch.setenv("DATABASE_PREPARED_STATEMENTS", "false")
    assert "prepare_threshold" not in database_config(url, base_dir=tmp_path)["OPTIONS"]
    monkeypatch.setenv("DATABASE_PREPARED_STATEMENTS", "sometimes")
    with pytest.raises(ImproperlyConfigured, match="DATABASE_PREPARED_STATEMENTS"):
        database_config(url, base_dir=tmp_path)


@pytest.mark.parametrize("url", ["mysql://x@h/db", "nonsense", "postgres://h:notaport/db"])
def test_it_rejects_an_unsupported_database_url(url, tmp_path):
    with pytest.raises(ImproperlyConfigured, match="DATABASE_URL"):
        database_config(url, base_dir=tmp_path)


def _import_settings(env: dict) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if k not in {"DEBUG", "SECRET_KEY", "CELERY_BROKER_URL", "ALLOWED_HOSTS"}}
    return subprocess.run(
        [sys.executable, "-c", "import config.settings as s; print(s.CELERY_TASK_ALWAYS_EAGER)"],
        cwd=ROOT, env={**clean, **env}, capture_output=True, text=True, timeout=60,
    )


def test_production_refuses_to_start_without_a_secret():
    result = _import_settings({"DEBUG": "false"})
    assert result.returncode != 0
    assert "SECRET_KEY must be set when DEBUG is false" in result.stderr


def test_production_refuses_a_short_secret():
    result = _import_settings({"DEBUG": "false", "SECRET_KEY": "short"})
    assert result.returncode != 0
    assert "SECRET_KEY is too short" in result.stderr


def test_development_works_with_no_variables_and_runs_tasks_in_process():
    result = _import_settings({})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "True"


def test_a_broker_url_turns_off_in_process_tasks():
    result = _import_settings({"CELERY_BROKER_URL": "redis://127.0.0.1:6379/9"})
    assert result.stdout.strip() == "False"
    bad = _import_settings({"CELERY_BROKER_URL": "http://nope"})
    assert bad.returncode != 0 and "CELERY_BROKER_URL" in bad.stderr


def test_check_deploy_is_clean_with_production_variables():
    env = {
        "DEBUG": "false", "SECRET_KEY": "x" * 20 + "-production-secret-for-the-check-only-0123456789",
        "ALLOWED_HOSTS": "survey.example.org", "SECURE_SSL_REDIRECT": "true",
    }
    dropped = {"DEBUG", "SECRET_KEY", "ALLOWED_HOSTS", "DJANGO_ALLOW_ASYNC_UNSAFE"}
    clean = {k: v for k, v in os.environ.items() if k not in dropped}
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT, env={**clean, **env}, capture_output=True, text=True, timeout=120,
    )
    # The only warning left is HSTS preload, an opt-in decision documented in the README.
    warnings = [line for line in (result.stdout + result.stderr).splitlines() if line.startswith("?: (security.")]
    assert [w.split(")")[0] for w in warnings] == ["?: (security.W021"], result.stdout + result.stderr


def test_the_log_filter_masks_panel_ids():
    from web.security import mask_identifiers

    line = '"GET /s/tide/?PROLIFIC_PID=5f3a9b2c1d4e6f7a8b9c0d1e&STUDY_ID=abc&SESSION_ID=xyz HTTP/1.1" 303'
    masked = mask_identifiers(line)
    assert "5f3a9b2c1d4e6f7a8b9c0d1e" not in masked and "abc" not in masked and "xyz" not in masked
    assert "PROLIFIC_PID=[masked]" in masked
