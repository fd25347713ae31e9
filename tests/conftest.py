"""Shared fixtures: the three studies loaded from fixtures/, and study files
written to a temporary folder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from surveys.definition import parse_definition, read_definition_file
from surveys.loader import study_load

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"


def load_fixture(name: str):
    return study_load(definition=parse_definition(read_definition_file(FIXTURES / name))).study


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
def tide_definition() -> dict:
    return json.loads((FIXTURES / "tide.json").read_text())


# --- participant flow (surveys.views) ---------------------------------------------------


class SurveySteps:
    """Short-hands for walking a participant through the real views with a test Client."""

    def link(self, study, external_id: str = "a" * 24) -> str:
        return f"/s/{study.slug}/?{study.id_param}={external_id}&STUDY_ID=st1&SESSION_ID=se1"

    def start(self, client, study, external_id: str = "a" * 24):
        """Enter, consent and read the instructions; returns the participant."""
        from surveys.models import Participant

        client.get(self.link(study, external_id))
        client.post(f"/s/{study.slug}/consent/", {"decision": "accept"})
        client.post(f"/s/{study.slug}/instructions/")
        return Participant.objects.get(study=study, external_id=external_id)

    def page(self, client, study):
        """(response, PageSpec) of the participant's current page."""
        from bots.pages import page_spec_from_html

        response = client.get(f"/s/{study.slug}/page/", follow=True)
        return response, page_spec_from_html(response.content.decode())

    def answers(self, spec, rating: int = 4) -> dict:
        """Complete, valid answers for a block or check page (rank = display order)."""
        from bots.personas import _expected_value

        if spec.kind == "check":
            return {"visit": spec.visit_id, "attention": _expected_value(spec.statement, spec.check_points)}
        data = {"visit": spec.visit_id}
        for i, pid in enumerate(spec.placements, start=1):
            for key in spec.dimensions:
                data[f"rate-{pid}-{key}"] = rating
            if spec.ranking:
                data[f"rank-{pid}"] = i
        if spec.best_worst:
            data["most"], data["least"] = spec.placements[0], spec.placements[-1]
        return data

    def submit_current(self, client, study, **overrides):
        response, spec = self.page(client, study)
        data = {**self.answers(spec), **overrides}
        return client.post(f"/s/{study.slug}/page/", data), spec

    def finish(self, client, study, demographics: dict | None = None):
        """Answer every remaining page and the demographics; returns the last response."""
        while True:
            response, spec = self.page(client, study)
            if spec.kind not in {"block", "check"}:
                break
            client.post(f"/s/{study.slug}/page/", self.answers(spec))
        return client.post(f"/s/{study.slug}/about-you/", demographics or {}, follow=True)


@pytest.fixture
def steps() -> SurveySteps:
    return SurveySteps()


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
