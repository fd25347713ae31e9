"""Every shared fixture of the test suite, in one place.

Studies: ``tide``, ``counselor`` and ``most_least`` loaded from fixtures/, and
``tide_definition`` (the raw JSON). Participant flow: ``steps``. Researcher
side: ``owner`` owns ``study`` (TIDE), ``other`` owns ``other_study``
(most-least), ``staff`` is staff; ``filled`` adds twelve scripted participants
to ``study`` and ``done_run`` a finished (quick) analysis run of it;
``owner_client`` and ``owner_token`` sign ``owner`` in. The helpers these are
built from live in ``tests/support/``.
"""

from __future__ import annotations

import json

import pytest
from django.core.cache import cache
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from tests.support.live_server import counting_requests
from tests.support.paths import FIXTURES
from tests.support.researcher import QUICK_ANALYSES, fill_with_bots, finished_run, make_user, narrow_analyses
from tests.support.studies import load_fixture
from tests.support.survey_steps import SurveySteps

# --- studies ---------------------------------------------------------------------------


@pytest.fixture
def tide(db):
    return load_fixture("tide.json")


@pytest.fixture
def counselor(db):
    return load_fixture("counselor.json")


@pytest.fixture
def most_least(db):
    return load_fixture("most_least.json")


@pytest.fixture
def pairwise(db):
    """Two responses per block, which is better (left, right, tie, both bad), and an optional reason."""
    return load_fixture("pairwise.json")


@pytest.fixture
def reasons_per_block(db):
    """The most-least study asking its "why" question on every block (a per-block free-text question)."""
    from surveys.definition import parse_definition, read_definition_file
    from surveys.loader import study_load

    definition = read_definition_file(FIXTURES / "most_least.json")
    definition.update(slug="reasons-per-block", free_text=[{**definition["free_text"][0], "per_block": True}])
    return study_load(definition=parse_definition(definition)).study


@pytest.fixture
def tide_definition() -> dict:
    return json.loads((FIXTURES / "tide.json").read_text())


# --- participant flow (surveys.views) ---------------------------------------------------


@pytest.fixture
def steps() -> SurveySteps:
    return SurveySteps()


# --- researchers, their studies and runs -------------------------------------------------


@pytest.fixture
def owner(db):
    return make_user("owner")


@pytest.fixture
def other(db):
    return make_user("other")


@pytest.fixture
def staff(db):
    return make_user("staff", is_staff=True)


@pytest.fixture
def study(tide, owner):
    """TIDE, owned by ``owner``."""
    tide.owners.add(owner)
    return tide


@pytest.fixture
def other_study(most_least, other):
    """most-least, owned by ``other``."""
    most_least.owners.add(other)
    return most_least


@pytest.fixture
def filled(study):
    fill_with_bots(study, 12)
    return study


@pytest.fixture
def quick_stats(monkeypatch):
    narrow_analyses(monkeypatch, (*QUICK_ANALYSES, "sensitivity_win_table"))


@pytest.fixture
def done_run(filled, quick_stats):
    return finished_run(filled)


@pytest.fixture
def owner_client(client, owner):
    """pytest-django's ``client``, signed in as ``owner``."""
    client.force_login(owner)
    return client


@pytest.fixture
def owner_token(owner) -> str:
    return Token.objects.create(user=owner).key


@pytest.fixture
def owner_api(owner, owner_token) -> APIClient:
    """An API client that authenticates as ``owner`` with the token."""
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {owner_token}")
    return client


@pytest.fixture
def fresh_cache(db):
    """No rate-limit counter (sign-in, open-link starts, API throttles: keyed by ids that repeat between tests) and an empty cache.

    The counters live in the database (``web.RateCounter``) or, with a Redis cache,
    in Redis, which ``cache.clear()`` empties.
    """
    from web.models import RateCounter

    RateCounter.objects.all().delete()
    cache.clear()


# --- the whole suite ---------------------------------------------------------------------


@pytest.fixture(autouse=True, scope="session")
def _small_model_subsamples():
    """Analysis runs in tests fit the slow models on a small documented subsample.

    The models' numbers are checked in tests/test_stats.py; here the pipeline is
    what is under test. Set for this process and for the workers and servers
    the tests start.
    """
    import os

    from django.conf import settings

    os.environ.setdefault("ANALYSIS_MODEL_MAX_ROWS", "3000")
    os.environ.setdefault("ANALYSIS_BOOTSTRAP_SAMPLES", "30")
    settings.ANALYSIS_MODEL_MAX_ROWS = int(os.environ["ANALYSIS_MODEL_MAX_ROWS"])
    settings.ANALYSIS_BOOTSTRAP_SAMPLES = int(os.environ["ANALYSIS_BOOTSTRAP_SAMPLES"])


@pytest.fixture(autouse=True)
def _live_server_idle_before_flush(request):
    """A test with the live server ends once the server has answered every request it got:
    the database flush that follows must not meet a request still in its transaction."""
    if "live_server" not in request.fixturenames:
        return
    request.getfixturevalue("transactional_db")  # set up first, so torn down (flushed) after this
    requests = counting_requests(request.getfixturevalue("live_server"))
    request.addfinalizer(requests.wait_until_idle)


@pytest.fixture(autouse=True)
def _tasks_in_process_unless_worker_test(request):
    """Tests run tasks in-process, even when CI names a Redis broker for the whole suite.

    Only tests marked ``worker`` talk to the real broker and a real ``celery worker``.
    """
    if request.node.get_closest_marker("worker"):
        yield
        return
    from django.conf import settings

    from config.celery import app

    previous = (app.conf.task_always_eager, settings.CELERY_TASK_ALWAYS_EAGER)
    app.conf.task_always_eager = settings.CELERY_TASK_ALWAYS_EAGER = True
    yield
    app.conf.task_always_eager, settings.CELERY_TASK_ALWAYS_EAGER = previous


# --- Prolific (the fake server of tests/support/fake_prolific.py) -----------------------


@pytest.fixture
def prolific(settings):
    """A fake Prolific API on 127.0.0.1 that the app's settings point to (token and workspace set)."""
    from tests.support.fake_prolific import TOKEN, FakeProlific

    fake = FakeProlific().start()
    settings.PROLIFIC_API_URL = fake.url
    settings.PROLIFIC_API_TOKEN = TOKEN
    settings.PROLIFIC_API_TIMEOUT = 1
    settings.PROLIFIC_WORKSPACE_ID = "workspace-1"
    yield fake
    fake.stop()
