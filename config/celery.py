"""The Celery app. Settings come from Django's settings (CELERY_* names)."""

import logging
import os

from celery import Celery, bootsteps

logger = logging.getLogger(__name__)

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

app = Celery("hev")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


class RequeueStaleRuns(bootsteps.StartStopStep):
    """Each time the worker's consumer (re)connects to the broker, send the runs
    still queued: their first message may have been lost to a broker outage
    (analysis.runs.run_enqueue), or their worker was killed."""

    requires = {"celery.worker.consumer.tasks:Tasks"}

    def start(self, consumer) -> None:
        from analysis.runs import runs_requeue

        try:
            sent = runs_requeue(include_running=True)
        except Exception:  # noqa: BLE001 - a database hiccup must not stop the worker
            logger.exception("could not re-send queued runs")
            return
        if any(sent.values()):
            logger.info("re-sent runs %s", sent)


app.steps["consumer"].add(RequeueStaleRuns)
