"""Every shared fixture of the test suite, in one place.

Studies: ``tide``, ``counselor`` and ``most_least`` loaded from fixtures/, and
``tide_definition`` (the raw JSON). Participant flow: ``steps``. Researcher
side: ``owner`` owns ``study`` (TIDE), ``other`` owns ``other_study``
(most-least), ``staff`` is staff; ``filled`` adds twelve scripted participants
to ``study`` and ``done_run`` a finished (quick) analysis run of it;
``owner_client`` and ``owner_token`` sign ``owner`` in. The helpers these are
built from live in ``tests/support/``.

``filled`` and ``done_run`` are built once per test module, not once per test
(twelve scripted participants take seconds): see "one filled study per module".
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.core.cache import cache
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from tests.support.live_server import counting_requests
from tests.support.paths import FIXTURES
from tests.support.researcher import QUICK_ANALYSES, fill_with_bots, finished_run, make_user, narrow_analyses
from tests.support.shared import in_process_tasks, rows_kept_until_exit
from tests.support.studies import load_fixture, load_reasons_per_block
from tests.support.survey_steps import SurveySteps

# --- studies ---------------------------------------------------------------------------


@pytest.fixture
def tide(request, db):
    shared = _shared(request)
    if shared:
        from surveys.models import Study

        return Study.objects.get(pk=shared.study_pk)
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
    return load_reasons_per_block()


@pytest.fixture
def tide_definition() -> dict:
    return json.loads((FIXTURES / "tide.json").read_text())


# --- participant flow (surveys.views) ---------------------------------------------------


@pytest.fixture
def steps() -> SurveySteps:
    return SurveySteps()


# --- researchers, their studies and runs -------------------------------------------------


@pytest.fixture
def owner(request, db):
    shared = _shared(request)
    if shared:
        from django.contrib.auth import get_user_model

        return get_user_model().objects.get(pk=shared.owner_pk)
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
def filled(_filled_for_module, study):
    """``study`` with twelve scripted participants (shared by the module's tests, see below)."""
    if not _filled_for_module:
        fill_with_bots(study, 12)
    return study


QUICK_STATS = (*QUICK_ANALYSES, "sensitivity_win_table")


@pytest.fixture
def quick_stats(monkeypatch):
    narrow_analyses(monkeypatch, QUICK_STATS)


@pytest.fixture
def done_run(_done_run_for_module, filled, quick_stats):
    """A finished quick run of ``filled`` (shared by the module's tests, see below)."""
    if _done_run_for_module:
        from analysis.models import AnalysisRun

        return AnalysisRun.objects.get(pk=_done_run_for_module)
    return finished_run(filled)


# --- one filled study per module ------------------------------------------------------------
#
# Twelve participants saved through the services take seconds (many more on a busy
# machine), and about forty tests only read them. The module's first test that uses
# ``filled`` builds them inside a transaction that stays open until the module's last
# test; each test runs in a savepoint of it (pytest-django's own per-test atomic,
# nested), so what a test writes is rolled back as before, and the shared rows are
# rolled back at the end of the module. ``tide``, ``owner``, ``study`` and ``filled``
# are then the shared rows, fetched again for each test (no Python object leaks from
# one test to the next). The same holds for ``done_run``.
#
# Only tests with pytest-django's rolled-back transaction can share: a transactional
# test (``live_server``, ``transaction=True``) commits and is flushed, so it builds
# its own as before. ``pytest_collection_modifyitems`` below puts a module's sharing
# tests after its other tests (the done-run ones last), so no test that did not ask
# for the participants or the run ever sees them. A test module's own module-scoped
# rows (tests/support/shared.py) get the same treatment if the fixture's name starts
# with ``_shared_rows``.


class _Shared:
    def __init__(self, study_pk: int, owner_pk: int):
        self.study_pk, self.owner_pk = study_pk, owner_pk


def _transactional(item: pytest.Item) -> bool:
    marker = item.get_closest_marker("django_db")
    fixtures = getattr(item, "fixturenames", ())
    return bool(marker and (marker.kwargs.get("transaction") or marker.kwargs.get("reset_sequences"))) or (
        "transactional_db" in fixtures or "live_server" in fixtures)


def _sharing_rank(item: pytest.Item) -> int:
    """0: builds nothing shared; 1: shares the filled study or a module's ``_shared_rows*``; 2: the run too."""
    fixtures = getattr(item, "fixturenames", ())
    shares = "_filled_for_module" in fixtures or any(name.startswith("_shared_rows") for name in fixtures)
    if not shares or _transactional(item):
        return 0
    return 2 if "_done_run_for_module" in fixtures else 1


def _shared(request) -> _Shared | None:
    if "_filled_for_module" not in request.fixturenames:
        return None
    return request.getfixturevalue("_filled_for_module")


@pytest.hookimpl(trylast=True)  # after pytest-django has put the transactional tests last
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Within each run of consecutive tests of one module, the sharing tests go last (stable)."""
    def module(item: pytest.Item) -> str:
        return item.nodeid.split("::")[0]

    start = 0
    for end in range(1, len(items) + 1):
        if end == len(items) or module(items[end]) != module(items[start]):
            items[start:end] = sorted(items[start:end], key=_sharing_rank)
            start = end


@pytest.fixture(scope="module")
def _filled_for_module(request, django_db_setup, django_db_blocker):
    # Set up by the first test of a run of the module's tests that use ``filled``; for a
    # transactional test (their run comes after the others) nothing is shared.
    if _sharing_rank(request._pyfuncitem) == 0:
        yield None
        return
    with rows_kept_until_exit(django_db_blocker):
        with in_process_tasks():
            owner = make_user("owner")
            study = load_fixture("tide.json")
            study.owners.add(owner)
            fill_with_bots(study, 12)
        yield _Shared(study.pk, owner.pk)


@pytest.fixture(scope="module")
def _done_run_for_module(request, _filled_for_module, django_db_blocker):
    if not _filled_for_module:
        yield None
        return
    from surveys.models import Study

    with django_db_blocker.unblock(), pytest.MonkeyPatch.context() as patch:
        narrow_analyses(patch, QUICK_STATS)
        with in_process_tasks():
            run = finished_run(Study.objects.get(pk=_filled_for_module.study_pk))
    yield run.pk


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


@pytest.fixture(autouse=True, scope="session")
def _private_folders():
    """The export slots (analysis.exporting.slots) and the frames a run leaves for its parts
    (analysis.running.fanout) are this run's own and its servers' and workers' (through the environment), not
    those of a development server or of another run on the same machine: .ci/run runs two suites at once,
    whose runs have the same ids."""
    import os
    import tempfile

    from django.conf import settings

    for name, prefix in (("EXPORT_SLOTS_DIR", "hev-export-slots-"), ("ANALYSIS_FRAME_CACHE_DIR", "hev-run-frames-")):
        os.environ.setdefault(name, tempfile.mkdtemp(prefix=prefix))
        setattr(settings, name, Path(os.environ[name]))


@pytest.fixture(autouse=True)
def _export_slots_given_back():
    """A test's streamed export it never read to the end gives its slot back when the test ends, as gunicorn's
    post_request does after a request (config/gunicorn.conf.py)."""
    yield
    from analysis.exporting.slots import slots_release_held

    slots_release_held()


@pytest.fixture(autouse=True, scope="session")
def _fast_password_hashing():
    """Passwords are hashed with MD5 in tests, as Django's testing docs advise.

    The default PBKDF2 takes a good part of a second per hash (several on a busy
    machine) and every ``make_user`` and every sign-in pays it: hundreds of times in
    the suite. No test checks the hash's strength; production keeps Django's default.
    """
    from django.test import override_settings

    fast = override_settings(PASSWORD_HASHERS=["django.contrib.auth.hashers.MD5PasswordHasher"])
    fast.enable()  # sends setting_changed, which clears Django's cache of the hashers
    yield
    fast.disable()


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
