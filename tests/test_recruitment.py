"""The panel round trip: completion URLs, id patterns, and sending a finisher back to the panel.

A completion URL with other braces was accepted at load and then gave every
finisher a 500; ``^(a+)+$`` as an id pattern let one entry link hold a worker
for seconds (x4 per two more characters). Both are refused at load with their
path; what is already stored is used defensively.
"""

from __future__ import annotations

import copy
import json
import logging
import re
import time

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from django.forms.models import model_to_dict
from django.test import Client
from rest_framework.test import APIClient

from surveys import limits
from surveys.admin import StudyAdminForm
from surveys.definition import DefinitionError, parse_definition
from surveys.loader import study_load
from surveys.models import Participant, Study
from surveys.recruitment import (
    MAX_MATCH_PATHS, _compiled_if_safe, completion_url_problem, external_id_valid, id_pattern_problem,
)
from tests.support.researcher import make_user

PID = "a" * 24
PROLIFIC = "https://app.prolific.com/submissions/complete?cc={code}"


def _recruitment(definition: dict, **values) -> dict:
    changed = copy.deepcopy(definition)
    changed["recruitment"].update(values)
    return changed


def _problems(definition: dict) -> list[str]:
    with pytest.raises(DefinitionError) as caught:
        parse_definition(definition)
    return caught.value.problems


@pytest.fixture
def api(db) -> APIClient:
    client = APIClient()
    client.force_authenticate(make_user("loader"))
    return client


# ---------------------------------------------------------------- completion URLs

BAD_URLS = [
    ("another placeholder", PROLIFIC + "&study={study}", '"{study}": the only placeholder is {code}'),
    ("a positional placeholder", "https://x.example/{code}/{0}", '"{0}": the only placeholder is {code}'),
    ("a lone opening brace", PROLIFIC + "&x={", '"{": the only placeholder is {code}'),
    ("a lone closing brace", PROLIFIC + "&x=}", '"}": the only placeholder is {code}'),
    ("an escaped brace", "https://x.example/?cc={code}&x={{y}}", "the only placeholder is {code}"),
    ("a placeholder with a format", "https://x.example/?cc={code:>9}", '"{code:>9}": the only placeholder is {code}'),
    ("no code", "https://x.example/done", "must be an http(s) URL containing {code}"),
    ("not http", "ftp://x.example/{code}", "must be an http(s) URL containing {code}"),
    ("no host", "https://?cc={code}", "no host name"),
    ("a space", "https://x.example/done now?cc={code}", "is not allowed in a URL"),
    ("a quote", 'https://x.example/"?cc={code}', "is not allowed in a URL"),
    ("a port that is no number", "https://x.example:port/?cc={code}", "not a well-formed URL"),
    ("a broken IPv6 host", "https://[::1/?cc={code}", "not a well-formed URL"),
]


@pytest.mark.parametrize("url,expected", [b[1:] for b in BAD_URLS], ids=[b[0] for b in BAD_URLS])
def test_a_completion_url_with_other_braces_or_malformed_is_refused_with_its_path(tide_definition, url, expected):
    problems = _problems(_recruitment(tide_definition, completion_url=url))
    assert len(problems) == 1 and problems[0].startswith("recruitment.completion_url: Value error, ")
    assert expected in problems[0]


@pytest.mark.parametrize("url", [PROLIFIC, "http://localhost:8000/back?code={code}", "https://x.example/{code}/done",
                                 "https://x.example/?cc={code}&study=tide%20one", ""])
def test_well_formed_completion_urls_are_accepted(url):
    assert completion_url_problem(url) is None


@pytest.mark.parametrize("field,value,said", [
    ("completion_url", PROLIFIC + "&study={study}", '"{study}": the only placeholder is {code}'),
    ("id_pattern", r"^(a+)+$", "nested quantifiers"),
])
def test_the_api_and_the_command_refuse_them_with_their_path_and_write_nothing(api, tide_definition, tmp_path,
                                                                              field, value, said):
    broken = _recruitment(tide_definition, **{field: value})
    response = api.post("/api/studies/load/", {"definition": broken}, format="json")
    assert response.status_code == 400 and response["Content-Type"].startswith("application/json")
    [problem] = response.json()["definition"]
    assert problem.startswith(f"recruitment.{field}: ") and said in problem
    file = tmp_path / "study.json"
    file.write_text(json.dumps(broken))
    with pytest.raises(CommandError) as caught:
        call_command("load_study", str(file))
    assert f"nothing was written\n  {problem}" in str(caught.value)
    assert not Study.objects.exists()


def _finish(client, study, steps) -> None:
    """Answer every page and the demographics, without following to the done page."""
    steps.start(client, study, PID)
    while True:
        _, spec = steps.page(client, study)
        if spec.kind not in {"block", "check"}:
            break
        client.post(f"/s/{study.slug}/page/", steps.answers(spec))
    response = client.post(f"/s/{study.slug}/about-you/", {})
    assert response.status_code == 303 and response["Location"] == f"/s/{study.slug}/done/"


def test_a_url_stored_before_the_check_still_shows_the_code_and_can_be_fixed_by_a_reload(
        client, tide, tide_definition, steps):
    stale = PROLIFIC + "&study={study}"
    tide.completion_url = stale
    tide.definition = _recruitment(tide.definition, completion_url=stale)
    tide.save()
    _finish(client, tide, steps)
    page = client.get("/s/tide/done/")
    assert page.status_code == 200 and "C1TIDE7Q" in page.content.decode()
    # Participants exist: reloading with a good URL (a setting, not content) is allowed.
    study_load(definition=parse_definition(_recruitment(tide_definition, completion_url=PROLIFIC + "&s=1")))
    tide.refresh_from_db()
    assert tide.completion_url == PROLIFIC + "&s=1"


# ---------------------------------------------------------------- id patterns

UNSAFE = [
    ("nested quantifiers", r"^(a+)+$", "a quantifier around something that can itself match in several ways"),
    ("a quantified alternation", r"^(a|aa)*$", "a quantifier around something that can itself match in several ways"),
    ("a backreference", r"^(a)\1$", "backreferences are not allowed"),
    ("a lookahead", r"^(?=a)[a-z]{24}$", "lookarounds are not allowed"),
    ("too many optional parts", "^" + "a?" * 15 + "$", "too many ways to match"),
    ("three open-ended runs", r"^.*.*.*x$", "too many ways to match"),
    ("not a regular expression", r"^[0-9", "not a valid regular expression"),
]


@pytest.mark.parametrize("pattern,expected", [u[1:] for u in UNSAFE], ids=[u[0] for u in UNSAFE])
def test_an_id_pattern_that_could_hang_a_worker_is_refused_at_load_with_its_path(tide_definition, pattern, expected):
    problems = _problems(_recruitment(tide_definition, id_pattern=pattern))
    assert len(problems) == 1 and problems[0].startswith("recruitment.id_pattern: Value error, ")
    assert expected in problems[0]


@pytest.mark.parametrize("pattern", [r"^[0-9a-f]{24}$", r"^W[0-9]{3}$", r"^A[A-Z0-9]{12,14}$", r"^[A-Za-z0-9_-]{1,64}$",
                                     r"^[a-z]+_[0-9]+$", r"^(PROLIFIC|MTURK)-[0-9]{1,20}$", r"(?i)^[a-z]{3}-\d+$"])
def test_ordinary_id_patterns_are_accepted(pattern):
    assert id_pattern_problem(pattern) is None


# The slowest accepted patterns found: as many ways through as allowed, each then walking a long run.
WORST_ACCEPTED = [
    "(?i)" + "a?" * 14 + "a{100}b",
    "(?:a?)" * 14 + "(?:a{10}){10}b",
    "(?:a|aa)" * 14 + "a{80}b",
    ".?" * 14 + ".{100}!",
    r"^a*a*a{100}b$",
    r"^[a-z]+_[0-9]+$",
]


@pytest.mark.parametrize("pattern", WORST_ACCEPTED)
def test_the_worst_accepted_pattern_on_the_longest_accepted_id_takes_well_under_a_tenth_of_a_second(pattern):
    assert id_pattern_problem(pattern) is None
    compiled = re.compile(pattern)
    longest = limits.EXTERNAL_ID
    slowest = 0.0
    for text in ("a" * longest, "a" * (longest - 1) + "c", "a" * (longest // 2) + "b" * (longest // 2)):
        began = time.perf_counter()
        compiled.fullmatch(text)
        slowest = max(slowest, time.perf_counter() - began)
    assert slowest < 0.05, f"{pattern}: {slowest:.3f} s"


def test_the_bound_refuses_one_step_past_the_limit():
    # 14 optional characters: 2**14 = 16384 ways; 15: 32768, over the limit.
    assert 2**14 <= MAX_MATCH_PATHS < 2**15
    assert id_pattern_problem("a?" * 14) is None and id_pattern_problem("a?" * 15) is not None


def test_a_too_long_id_is_refused_before_any_matching(client, tide):
    response = client.get(f"/s/tide/?PROLIFIC_PID={'a' * (limits.EXTERNAL_ID + 1)}")
    assert response.status_code == 400 and not Participant.objects.exists()
    assert external_id_valid(r"^a+$", "a" * limits.EXTERNAL_ID)
    assert not external_id_valid(r"^a+$", "a" * (limits.EXTERNAL_ID + 1))


def test_an_unsafe_pattern_stored_before_the_check_refuses_ids_at_once(client, tide, caplog):
    tide.id_pattern = r"^(a+)+$"
    tide.save()
    _compiled_if_safe.cache_clear()  # the log says it once per process and pattern
    began = time.perf_counter()
    with caplog.at_level(logging.ERROR, logger="surveys.recruitment"):
        response = client.get("/s/tide/?PROLIFIC_PID=" + "a" * 40 + "!")
    assert time.perf_counter() - began < 1
    assert response.status_code == 400 and not Participant.objects.exists()
    assert "unsafe" in caplog.text


def _admin_data(study: Study, **changes) -> dict:
    data = {key: value for key, value in model_to_dict(study).items() if value is not None}
    data["owners"] = [user.pk for user in study.owners.all()]
    return {**data, **changes}


def test_the_admin_applies_the_same_checks(client, tide):
    admin = get_user_model().objects.create_superuser("admin", "admin@example.org", "pw-123456789")
    client.force_login(admin)
    assert client.get(f"/admin/surveys/study/{tide.pk}/change/").status_code == 200
    form = StudyAdminForm(_admin_data(tide, id_pattern=r"^(a+)+$", completion_url=PROLIFIC + "&x={"), instance=tide)
    assert not form.is_valid()
    assert "nested quantifiers" in form.errors["id_pattern"][0]
    assert "the only placeholder is {code}" in form.errors["completion_url"][0]
    form = StudyAdminForm(_admin_data(tide, id_pattern=r"^W[0-9]{3}$", completion_url=""), instance=tide)
    assert form.is_valid(), form.errors


# ---------------------------------------------------------------- back to the panel

REFRESH = '<meta http-equiv="refresh" content="0; url=https://app.prolific.com/submissions/complete?cc=C1TIDE7Q">'


def test_a_finisher_is_sent_back_to_the_panel_at_once_with_the_button_as_fallback(client, tide, steps):
    _finish(client, tide, steps)
    response = client.get("/s/tide/done/")
    assert response.status_code == 200
    html = response.content.decode()
    head = html.split("</head>")[0]
    assert REFRESH in head
    assert 'href="https://app.prolific.com/submissions/complete?cc=C1TIDE7Q"' in html  # the button
    assert "C1TIDE7Q" in html.split("<main")[1]
    # The CSP governs scripts, styles and form targets; a meta refresh is none of them.
    policy = response["Content-Security-Policy"]
    assert "navigate-to" not in policy and "script-src 'self'" in policy
    assert "no-cache" in response["Cache-Control"]


def test_seen_again_the_page_stays_so_the_code_can_be_read(client, tide, steps):
    _finish(client, tide, steps)
    client.get("/s/tide/done/")
    again = client.get("/s/tide/done/")
    html = again.content.decode()
    assert again.status_code == 200 and 'http-equiv="refresh"' not in html
    assert "C1TIDE7Q" in html and "cc=C1TIDE7Q" in html


def test_a_study_without_a_completion_url_shows_the_code_and_sends_nobody_anywhere(client, tide_definition, steps, db):
    study = study_load(definition=parse_definition(_recruitment(tide_definition, completion_url=""))).study
    _finish(client, study, steps)
    html = client.get("/s/tide/done/").content.decode()
    assert "C1TIDE7Q" in html
    assert 'http-equiv="refresh"' not in html and "Return to Prolific" not in html


def test_a_researcher_preview_is_not_sent_to_the_panel(client, tide, steps):
    staff = get_user_model().objects.create_user("staff", password="pw-123456789", is_staff=True)
    client.force_login(staff)
    from tests.test_preview_launch import click_through

    _, html = click_through(client, "tide", seed=1)
    assert "C1TIDE7Q" in html and "Return to Prolific" in html  # shown as participants see it,
    assert 'http-equiv="refresh"' not in html  # but never followed by itself


def test_re_entering_through_the_link_after_finishing_sends_back_once_more(client, tide, steps):
    _finish(client, tide, steps)
    client.get("/s/tide/done/")
    other = Client()
    assert REFRESH in other.get(steps.link(tide, PID), follow=True).content.decode()
