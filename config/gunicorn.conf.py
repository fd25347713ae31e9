"""gunicorn settings for the production stack (bin/serve-production)."""

import gc
import multiprocessing
import os

bind = os.environ.get("GUNICORN_BIND", "127.0.0.1:8000")
workers = int(os.environ.get("GUNICORN_WORKERS", multiprocessing.cpu_count() * 2 + 1))
threads = int(os.environ.get("GUNICORN_THREADS", 1))
timeout = int(os.environ.get("GUNICORN_TIMEOUT", 30))
graceful_timeout = 20
keepalive = 5
max_requests = 5000
# Load Django once in the master and fork: a worker (re)started under load, or
# after max_requests, answers at once instead of importing pandas and scipy
# within its timeout. (A code change needs a restart, not a HUP.)
preload_app = True
max_requests_jitter = 500
accesslog = os.environ.get("GUNICORN_ACCESS_LOG", "-")
# The access log passes through the same filter as Django's logs, so panel ids
# in an entry URL never reach the log. The filter sits on the loggers too: gunicorn
# adds a handler of its own for ``accesslog``, and a logger's filter runs before any handler.
logconfig_dict = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"mask_ids": {"()": "web.security.MaskParticipantIdsFilter"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "filters": ["mask_ids"]}},
    "loggers": {
        "gunicorn.error": {"handlers": ["console"], "filters": ["mask_ids"], "level": "INFO", "propagate": False},
        "gunicorn.access": {"handlers": ["console"], "filters": ["mask_ids"], "level": "INFO", "propagate": False},
    },
}


def when_ready(server):
    """Import every view (and with them pandas, scipy, plotly) before forking; no database connection is opened."""
    from django.urls import get_resolver

    get_resolver().url_patterns


def pre_fork(server, worker):
    """The objects loaded so far (Django, pandas, scipy, plotly: a few hundred thousand) are moved out of the
    collector's reach before each fork: a worker's collections walked them again and again (0.37-0.43 ms of
    a participant request's 7-9 ms of CPU; 0.26-0.33 ms frozen, docs/capacity.md), and touching them copied
    the master's pages into every worker."""
    from config.settings import env_bool  # loaded already: the app is preloaded

    if env_bool("GUNICORN_GC_FREEZE", True):
        gc.freeze()


def post_request(worker, req, environ, resp):
    """Once a response is sent, an export slot its request still holds is given back: the response's close
    gives it back already; this keeps a slot from outliving its request whatever happened to the response."""
    from analysis.exporting.slots import slots_release_held

    slots_release_held()
