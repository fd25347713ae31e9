"""A real kombu broker in memory that holds the tasks a test sends, until the test delivers them.

With it a test sees an analysis run between its stages (the paper's tables
landed, the part tasks waiting) and then delivers each part as a worker would.
"""

from __future__ import annotations

import pytest

from config.celery import app


@pytest.fixture
def held_broker(settings, monkeypatch):
    """Tasks are sent for real, to kombu's in-memory broker, where they wait until the test delivers them."""
    # Celery prefers the environment's broker to its configuration (CI names a Redis one).
    monkeypatch.delenv("CELERY_BROKER_URL", raising=False)
    previous = (app.conf.task_always_eager, app.conf.broker_url, app._pool, app.amqp._producer_pool)
    settings.CELERY_TASK_ALWAYS_EAGER = app.conf.task_always_eager = False
    app.conf.broker_url = "memory://"
    app._pool = app.amqp._producer_pool = None
    held_messages()  # start empty
    yield held_messages
    held_messages()
    app.conf.task_always_eager, app.conf.broker_url, app._pool, app.amqp._producer_pool = previous


def held_messages() -> list[tuple[str, list]]:
    """(task name, positional arguments) of every message waiting on the broker, taken off it."""
    taken = []
    with app.connection_for_read() as connection:
        queue = connection.SimpleQueue(app.conf.task_default_queue)
        while True:
            try:
                message = queue.get(block=False)
            except queue.Empty:
                break
            taken.append((message.headers["task"], message.payload[0]))
            message.ack()
        queue.close()
    return taken
