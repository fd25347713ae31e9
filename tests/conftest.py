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
