"""The Celery app. Settings come from Django's settings (CELERY_* names)."""

import logging
import os

from celery import Celery, bootsteps
from celery.signals import worker_init, worker_process_init

logger = logging.getLogger(__name__)

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

app = Celery("hev")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


class RequeueStaleRuns(bootsteps.StartStopStep):
    """Each time the worker's consumer (re)connects to the broker, send the runs
    still queued and the parts no worker has begun: their message may have been
    lost to a broker outage (a restarted Redis starts empty). Runs whose lease
    is live are left alone (a message for them would wait unacknowledged in
    this worker; see analysis.running.runs)."""

    requires = {"celery.worker.consumer.tasks:Tasks"}

    def start(self, consumer) -> None:
        from analysis.running.runs import runs_and_parts_requeue

        try:
            sent = runs_and_parts_requeue(older_than_seconds=0)
        except Exception:  # noqa: BLE001 - a database hiccup must not stop the worker
            logger.exception("could not re-send queued runs")
            return
        if any(sent.values()):
            logger.info("re-sent runs %s", sent)


app.steps["consumer"].add(RequeueStaleRuns)


@worker_init.connect
@worker_process_init.connect
def _warm_up(**kwargs) -> None:
    """Heavy libraries are imported as the worker starts (a solo worker: worker_init; each prefork
    process: worker_process_init), so that no run pays for them (analysis.warmup)."""
    import django

    django.setup()
    from analysis.warmup import warm_up

    warm_up()
