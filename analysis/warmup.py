"""Import the heavy libraries when a worker starts, not inside the first analysis it runs.

pingouin alone costs about 0.6 s to import and was paid inside a run's timing (issue 31); statsmodels'
formula API and plotly are of the same order. ``config.celery`` calls ``warm_up`` when a worker (or each
process of a prefork worker) starts.
"""

from __future__ import annotations

import importlib

# The analyses' heavy dependencies, and the modules that import them at the top.
HEAVY_MODULES = (
    "pingouin",
    "statsmodels.formula.api",
    "statsmodels.miscmodels.ordinal_model",
    "plotly.graph_objects",
    "analysis.registry",
    "analysis.pipeline",
    "analysis.charts",
)


def warm_up() -> list[str]:
    """Import ``HEAVY_MODULES`` (a second call costs nothing); returns their names."""
    for name in HEAVY_MODULES:
        importlib.import_module(name)
    return list(HEAVY_MODULES)
