"""The services some tests need (Redis, PostgreSQL, their binaries): skip without them, unless CI requires them."""

from __future__ import annotations

import os

import pytest


def require_service(available: bool, reason: str) -> None:
    """Skip the test when ``available`` is false; with REQUIRE_SERVICES=1 (CI) fail it instead."""
    if available:
        return
    if os.environ.get("REQUIRE_SERVICES") == "1":
        pytest.fail(f"REQUIRE_SERVICES=1 but {reason}")
    pytest.skip(reason)
