"""The surveys app's models (``surveys.core_models``)."""

from .core_models import *  # noqa: F403
