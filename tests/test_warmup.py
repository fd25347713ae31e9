"""Heavy libraries are imported when a worker starts (analysis.warmup), never inside a run."""

import subprocess
import sys

from django.conf import settings

from analysis.warmup import HEAVY_MODULES


def test_it_imports_the_heavy_libraries_when_the_worker_starts():
    # A fresh interpreter, where nothing is imported yet: the worker's start signal imports them all.
    code = (
        "import sys, config.celery as c\n"
        "from celery.signals import worker_init\n"
        f"missing = [m for m in {HEAVY_MODULES!r} if m in sys.modules]\n"
        "assert not missing, missing\n"
        "worker_init.send(sender=None)\n"
        f"print(sorted(m for m in {HEAVY_MODULES!r} if m not in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=settings.BASE_DIR, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "[]"
