"""config/gunicorn.conf.py as gunicorn reads it: the hooks it sets on gunicorn's own Config."""

from __future__ import annotations

import gc
import runpy

import pytest
from gunicorn.config import Config

from tests.support.paths import ROOT

CONFIG_FILE = ROOT / "config" / "gunicorn.conf.py"


def _gunicorn_config() -> Config:
    """The settings the file gives, set the way gunicorn's application loads a config file."""
    config = Config()
    for name, value in runpy.run_path(str(CONFIG_FILE)).items():
        if name in config.settings:
            config.set(name, value)
    return config


@pytest.fixture
def nothing_frozen():
    gc.unfreeze()
    yield
    gc.unfreeze()


def test_what_the_master_loaded_is_frozen_before_each_fork(nothing_frozen, monkeypatch):
    monkeypatch.delenv("GUNICORN_GC_FREEZE", raising=False)
    loaded = [object() for _ in range(1000)]  # tracked by the collector, as the master's modules are
    assert gc.get_freeze_count() == 0
    _gunicorn_config().pre_fork(None, None)
    assert gc.get_freeze_count() >= len(loaded)


def test_the_freeze_can_be_switched_off(nothing_frozen, monkeypatch):
    monkeypatch.setenv("GUNICORN_GC_FREEZE", "false")
    _gunicorn_config().pre_fork(None, None)
    assert gc.get_freeze_count() == 0
