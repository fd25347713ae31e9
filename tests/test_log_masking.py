"""Panel ids never reach a log line, whatever the study calls its id parameter.

Lines go through the logging configured in config/settings.py (the same filter is
on gunicorn's loggers in config/gunicorn.conf.py); the real gunicorn access log is
checked in tests/test_security_headers.py.
"""

from __future__ import annotations

import io
import logging
import os
import subprocess
import sys
from contextlib import contextmanager

import pytest
from django.test import Client
from gunicorn.config import Config

from tests.support.paths import ROOT
from web.security import mask_identifiers

WORKER = "A2WORKER77XQ"
EMAIL = "ann.lee+hev@example.org"


@contextmanager
def captured_log():
    """What the configured console handler writes, whichever logger the record came through."""
    handler = next(h for h in logging.getLogger("django.server").handlers if h.get_name() == "console")
    stream = io.StringIO()
    previous = handler.setStream(stream)
    try:
        yield stream
    finally:
        handler.setStream(previous)


@pytest.mark.parametrize(
    ("line", "secret", "kept"),
    [
        ('"GET /s/mturk/?workerId=A2WORKER77XQ&assignmentId=3X HTTP/1.1" 303', WORKER, "workerId=[masked]"),
        ('"GET /s/any/?id=W-1234 HTTP/1.1" 303', "W-1234", "/s/any/?id=[masked]"),
        ('"GET /s/any/?email=ann.lee%2Bhev%40example.org HTTP/1.1" 303', "ann.lee", "email=[masked]"),
        ('"GET /s/any/?who=ann.lee+hev@example.org HTTP/1.1" 303', "ann.lee", "who=[masked]"),
        ('"GET /?A2WORKER77XQ HTTP/1.1" 200', WORKER, "/?[masked]"),  # a bare value
        ('"GET /api/participants/ann.lee@example.org/ HTTP/1.1" 404', "ann.lee", "/api/participants/[email]/"),
        ('"GET /api/studies/?format=ann.lee%40example.org HTTP/1.1" 400', "ann.lee", "format=[masked]"),
        ("mail from ann.lee+hev@example.org bounced", "ann.lee", "mail from [email] bounced"),
        ("Key (study_id, external_id)=(3, W-1234) already exists.", "W-1234", "external_id)=([masked])"),
        ("note workerId=A2WORKER77XQ in a message", WORKER, "workerId=[masked] in"),
    ],
)
def test_it_masks_ids_in_any_parameter_and_e_mails_anywhere(line, secret, kept):
    masked = mask_identifiers(line)
    assert secret not in masked
    assert kept in masked


@pytest.mark.parametrize(
    ("line", "kept"),
    [
        ('"GET /accounts/login/?next=/s/x/?invite=TOKEN77 HTTP/1.1" 302', "next=/s/x/?invite=[masked]"),
        ('"GET /accounts/login/?next=/s/x/%3Finvite%3DTOKEN77 HTTP/1.1" 302', "next=/s/x/?invite=[masked]"),
        ('"GET /accounts/login/?next=%2Fs%2Fx%2F%3Finvite%3DTOKEN77%26PROLIFIC_PID%3DW-1 HTTP/1.1" 302',
         "next=/s/x/?invite=[masked]&PROLIFIC_PID=[masked]"),
        ('"GET /accounts/login/?next=/s/x/%253Finvite%253DTOKEN77 HTTP/1.1" 302', "next=/s/x/?invite=[masked]"),
        ('"GET /accounts/login/?next=/a/%3Fnext%3D/s/x/%253Finvite%253DTOKEN77 HTTP/1.1" 302',
         "next=/a/?next=/s/x/?invite=[masked]"),
    ],
)
def test_values_inside_a_url_given_as_next_are_masked_too(line, kept):
    masked = mask_identifiers(line)
    assert "TOKEN77" not in masked and "W-1" not in masked
    assert kept in masked


def test_a_next_without_a_query_of_its_own_is_kept_as_it_was():
    line = '"GET /accounts/login/?next=/studies/tide/runs/ HTTP/1.1" 302 "GET /?next=%2Fstudies%2F"'
    assert mask_identifiers(line) == line


def test_it_keeps_the_platform_s_own_harmless_parameters_readable():
    line = '"GET /studies/tide/runs/4/?level=rating HTTP/1.1" 200 "GET /api/studies/?format=csv&page=2"'
    assert mask_identifiers(line) == line


def test_a_study_s_own_id_parameter_is_masked_in_the_request_logs(db, tide):
    tide.id_param, tide.id_pattern = "workerId", r"^[A-Z0-9]+$"
    tide.save()
    link = f"/s/tide/?workerId={WORKER}&STUDY_ID=s1&SESSION_ID=s2"
    with captured_log() as log:
        response = Client().get(link)
        # What runserver writes for that request (django.core.servers.basehttp), and a warning naming it.
        logging.getLogger("django.server").info('"%s" %s %s', f"GET {link} HTTP/1.1", "303", "0")
        logging.getLogger("surveys.views").warning("entry refused for %s", link)
    text = log.getvalue()
    assert response.status_code == 303
    assert "GET /s/tide/?workerId=[masked]&STUDY_ID=[masked]&SESSION_ID=[masked] HTTP/1.1" in text
    assert WORKER not in text


def test_gunicorn_s_access_line_is_masked_in_its_default_format():
    atoms = {
        "h": "203.0.113.9", "l": "-", "u": "-", "t": "[24/Nov/2026:10:00:00 +0000]",
        "r": f"GET /s/mturk/?workerId={WORKER}&hitId=H1 HTTP/1.1", "s": "303", "b": "0",
        "f": f"https://worker.example.com/task?workerId={WORKER}&mail={EMAIL}", "a": "Mozilla/5.0",
    }
    with captured_log() as log:
        # Exactly how gunicorn.glogging.Logger.access writes its line.
        logging.getLogger("gunicorn.access").info(Config().access_log_format, atoms)
    line = log.getvalue()
    assert '"GET /s/mturk/?workerId=[masked]&hitId=[masked] HTTP/1.1" 303 0' in line
    assert '"https://worker.example.com/task?workerId=[masked]&mail=[masked]" "Mozilla/5.0"' in line
    assert WORKER not in line and "ann.lee" not in line


def test_a_line_is_masked_once_though_both_its_logger_and_the_handler_filter_it():
    """gunicorn's loggers and the console handler each carry the filter; the handler's leaves a record the
    logger's filter masked as it is (the same line, the masking not done twice)."""
    from unittest import mock

    from web import security

    with captured_log() as log, mock.patch.object(security, "mask_identifiers", wraps=mask_identifiers) as masking:
        logging.getLogger("gunicorn.access").info("GET /s/mturk/?workerId=%s HTTP/1.1", WORKER)
    assert masking.call_count == 1
    assert "GET /s/mturk/?workerId=[masked] HTTP/1.1" in log.getvalue() and WORKER not in log.getvalue()


def test_tracebacks_are_masked_too():
    with captured_log() as log:
        try:
            raise ValueError(f"no participant {EMAIL}")
        except ValueError:
            logging.getLogger("django.request").exception("Internal Server Error: /s/tide/?id=%s", WORKER)
    text = log.getvalue()
    assert "Traceback" in text and "ValueError: no participant [email]" in text
    assert "ann.lee" not in text and WORKER not in text


# A fresh process, configured as the server is: in the suite's own process, earlier tests (workers started in
# process, gunicorn's configuration, libraries) change the logging set-up this would depend on.
_LOG_ONE_QUERY = f"""
import logging, django
django.setup()
from django.db import connection
logging.getLogger("django.db.backends").setLevel(logging.DEBUG)
connection.force_debug_cursor = True
with connection.cursor() as cursor:
    cursor.execute("SELECT %s AS external_id", ["{WORKER}"])
"""


def test_logged_sql_shows_no_literal_values():
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DJANGO_SETTINGS_MODULE": "config.settings",
           "DATABASE_URL": "sqlite://:memory:"}
    done = subprocess.run([sys.executable, "-c", _LOG_ONE_QUERY], env=env, capture_output=True, text=True,
                          timeout=120, check=True)
    text = done.stdout + done.stderr
    assert "AS external_id" in text and "'[masked]'" in text
    assert WORKER not in text
