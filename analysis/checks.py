"""System checks of the analysis app (``manage.py check --deploy``)."""

from __future__ import annotations

from django.conf import settings
from django.core.checks import Tags, Warning, register


@register(Tags.compatibility, deploy=True)
def runs_need_a_worker(app_configs, **kwargs) -> list[Warning]:
    """Without a broker every run is computed inside the web request that starts it.

    Under gunicorn a run longer than the worker timeout is then killed half way and
    stays "running" until its lease expires, with no worker to retry it.
    """
    if getattr(settings, "CELERY_BROKER_URL", ""):
        return []
    return [Warning(
        "CELERY_BROKER_URL is not set: analysis and metrics runs would be computed inside web requests.",
        hint="Set CELERY_BROKER_URL (redis://host:6379/0, or filesystem:// on one machine) and run a "
             "celery worker with beat (bin/serve-production does).",
        id="analysis.W001",
    )]
