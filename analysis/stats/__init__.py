"""Statistics for human-evaluation studies: tidy frames in, tidy frames out.

Every public function takes the retained ``ratings`` frame (one row per
rating; see ``docs/statistics.md``) and, where needed, the ``participants``
frame or a ``gold`` frame, and returns a *new* tidy DataFrame: one labelled row
per test or per cell. Nothing here does I/O, touches Django, or mutates its
inputs.

The functions live in one module per family (``primitives``, ``comparisons``,
``paired_dimensions``, ``demographics``, ``regional``, ``rankings``,
``best_worst``, ``pairwise``, ``reliability``, ``regression``, ``headline``); this package re-exports
them, so ``from analysis import stats`` and ``stats.win_table(...)`` work as they always did.

Conventions shared by all tables:

* a ``note`` column is always present; it is ``""`` when the analysis ran and
  otherwise says why a value is missing (too few participants, constant
  column, empty frame, missing columns, subsampling ...). Expected data
  problems never raise: each function checks for them and returns a row
  whose ``note`` explains the problem. Anything else is a bug and raises
  (``KeyError``, ``TypeError`` ...): nothing turns an exception into a table,
  so a broken analysis fails its run instead of hiding in a note.
* tables with several p-values carry ``p_holm`` (the values of statsmodels
  ``multipletests`` with ``method="holm"``, *not* its Holm-Sidak default) and a ``holm_family``
  column naming the family the correction ran over.
* tables carry ``n`` (or ``n_a``/``n_b``) so the reader can see what each
  number rests on.
"""

from __future__ import annotations

from analysis.stats import (
    best_worst, comparisons, demographics, headline, paired_dimensions, pairwise, primitives, rankings, regional,
    regression, reliability,
)
# Each family names what it exports in its own ``__all__``; this package re-exports exactly those names.
from analysis.stats.comparisons import *  # noqa: F403
from analysis.stats.demographics import *  # noqa: F403
from analysis.stats.primitives import *  # noqa: F403
from analysis.stats.rankings import *  # noqa: F403
from analysis.stats.regional import *  # noqa: F403
from analysis.stats.regression import *  # noqa: F403
from analysis.stats.reliability import *  # noqa: F403
from analysis.stats.best_worst import *  # noqa: F403
from analysis.stats.paired_dimensions import *  # noqa: F403
from analysis.stats.headline import *  # noqa: F403
from analysis.stats.pairwise import *  # noqa: F403

__all__ = [
    *comparisons.__all__,
    *demographics.__all__,
    *primitives.__all__,
    *rankings.__all__,
    *regional.__all__,
    *regression.__all__,
    *reliability.__all__,
    *best_worst.__all__,
    *paired_dimensions.__all__,
    *headline.__all__,
    *pairwise.__all__,
]
