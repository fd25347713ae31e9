"""The Celery app. Settings come from Django's settings (CELERY_* names)."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

app = Celery("hev")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
