"""Rows built once for several tests: inside a transaction that the tests' own (nested) ones run in.

pytest-django wraps each non-transactional test in an atomic block. Opened inside an
outer atomic that a module-scoped fixture holds, that block is a savepoint: the test's
writes are rolled back as before, and the outer rows stay until the fixture ends and
rolls them back. Only for tests that do not commit (no ``live_server``, no
``transaction=True``). See "one filled study per module" in tests/conftest.py.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from django.db import transaction


@contextlib.contextmanager
def in_process_tasks() -> Iterator[None]:
    """Tasks run eagerly meanwhile (as ``_tasks_in_process_unless_worker_test`` makes them for a test)."""
    from django.conf import settings

    from config.celery import app

    previous = (app.conf.task_always_eager, settings.CELERY_TASK_ALWAYS_EAGER)
    app.conf.task_always_eager = settings.CELERY_TASK_ALWAYS_EAGER = True
    try:
        yield
    finally:
        app.conf.task_always_eager, settings.CELERY_TASK_ALWAYS_EAGER = previous


@contextlib.contextmanager
def rows_kept_until_exit(django_db_blocker) -> Iterator[None]:
    """Database rows written in the block (and after it, until it exits) are rolled back when it exits."""
    with django_db_blocker.unblock(), transaction.atomic():
        yield
        transaction.set_rollback(True)
