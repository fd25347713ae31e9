"""The derived columns of ratings and participants, each defined here and nowhere else.

The database keeps what happened: each participant's visits in ``sequence``
order (blocks and instructed attention checks, drawn at enrolment or, for
imported participants, the shown blocks in the order they were started), the
server times a page was shown and submitted, the answer to each check, and an
imported participant's one attention outcome. The columns below are read off
those rows by ``analysis.frames`` through these functions; the analyses, the
exports (``analysis.exporting.exports``) and the API (``analysis.ratings_api``) take them from the
frames and never compute them again, so they cannot disagree.

``block_order``
    The block's place among the participant's blocks: 1, 2, ... over the
    participant's block visits in ``sequence`` order. Attention checks are
    pages of the sequence but are not counted: the block after a check
    follows on from the block before it. An assigned block not yet shown keeps
    its place (its order was drawn at enrolment).
``seconds_on_block``
    Seconds from the block's first showing (``shown_at``) to its submission
    (``submitted_at``); NaN (blank in CSV, null in the API) when either is
    missing: a block shown but never submitted, or not shown yet.
``rank_changed``
    Per block visit: True when the participant's final ranking differs from
    the order shown (some response of the visit has ``rank != position``),
    False when it equals it, NA (blank in CSV, null in the API) when the
    visit has no ranks (ranking off, or the block not answered). Rankings
    start unranked (the page fills in nothing), so False is a deliberate
    "keep this order", not an untouched default.
``attention_passed``
    Live participants: True when every instructed check they answered
    passed, False when any failed, NA (blank) when they answered none.
    Imported participants carry one outcome (``imported_attention_passed``),
    read as one check: passed -> 0 failures, failed -> 1, empty -> no check
    (NA). ``attention_checks`` and ``attention_failures`` count the same way.

Pure functions on numpy arrays, plus the visit filters (Django ``Q``
objects on ``BlockVisit``) that say which visits count.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from django.db.models import Q

# Visits that are blocks (the others are attention checks).
BLOCK_VISIT = Q(block__isnull=False)
# An instructed check the participant answered, and one they failed.
ANSWERED_CHECK = Q(attention_check__isnull=False, attention_passed__isnull=False)
FAILED_CHECK = Q(attention_passed=False)


def block_order(participant: np.ndarray, sequence: np.ndarray) -> np.ndarray:
    """``block_order`` of each block visit, given as parallel arrays of participant ids and sequences.

    Pass block visits only (``BLOCK_VISIT``): checks are not counted.

    >>> block_order(np.array([7, 7, 3, 7]), np.array([5, 1, 2, 3]))
    array([3, 1, 1, 2])
    """
    participant = np.asarray(participant, dtype=np.int64)
    n = len(participant)
    order = np.lexsort((np.asarray(sequence, dtype=np.int64), participant))
    grouped = participant[order]
    starts = np.flatnonzero(np.r_[True, grouped[1:] != grouped[:-1]]) if n else np.zeros(0, dtype=np.int64)
    first_of_group = np.repeat(starts, np.diff(np.r_[starts, n]))
    out = np.empty(n, dtype=np.int64)
    out[order] = np.arange(n) - first_of_group + 1
    return out


def seconds_on_block(microseconds: np.ndarray, timed: np.ndarray) -> np.ndarray:
    """``seconds_on_block`` from ``submitted_at - shown_at`` in whole microseconds.

    ``timed`` says both times exist; elsewhere the result is NaN. Microseconds
    / 1e6 is the float ``timedelta.total_seconds()`` gives.

    >>> seconds_on_block(np.array([45_500_000, 0]), np.array([True, False]))
    array([45.5,  nan])
    """
    return np.where(np.asarray(timed, dtype=bool), np.asarray(microseconds, dtype=np.int64) / 1e6, np.nan)


def rank_changed(visit: np.ndarray, position: np.ndarray, rank: np.ndarray, n_visits: int) -> pd.arrays.BooleanArray:
    """``rank_changed`` of each of ``n_visits`` visits, from the placements as parallel arrays.

    ``visit`` is the placement's visit as a row number (0 .. n_visits - 1;
    negative: not one of these visits, ignored), ``rank`` is 0 where the
    placement has no rank.

    >>> rank_changed(np.array([0, 0, 1, 1, 2, -1]), np.array([1, 2, 1, 2, 1, 1]),
    ...              np.array([1, 2, 2, 1, 0, 5]), 4).tolist()
    [False, True, <NA>, <NA>]
    """
    visit, position, rank = (np.asarray(a, dtype=np.int64) for a in (visit, position, rank))
    counted = (visit >= 0) & (rank > 0)
    ranked = np.bincount(visit[counted], minlength=n_visits)[:n_visits] > 0
    moved = np.bincount(visit[counted & (rank != position)], minlength=n_visits)[:n_visits] > 0
    return pd.arrays.BooleanArray(moved, mask=~ranked)


def attention_counts(
    *, imported: np.ndarray, imported_passed: pd.Series, answered: np.ndarray, failed: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(``attention_checks``, ``attention_failures``) per participant.

    ``answered`` and ``failed`` count the live participant's visits matching
    ``ANSWERED_CHECK`` and ``FAILED_CHECK``; an imported participant's outcome
    (True, False or None/NA) counts as one check instead.

    >>> attention_counts(imported=np.array([False, True, True]), imported_passed=pd.Series([None, False, None]),
    ...                  answered=np.array([2, 0, 0]), failed=np.array([1, 0, 0]))
    (array([2, 1, 0]), array([1, 1, 0]))
    """
    imported = np.asarray(imported, dtype=bool)
    outcome = pd.Series(imported_passed, dtype=object)
    checks = np.where(imported, outcome.notna().to_numpy(), answered).astype(np.int64)
    failures = np.where(imported, outcome.eq(False).to_numpy(), failed).astype(np.int64)
    return checks, failures


def attention_passed(checks: np.ndarray, failures: np.ndarray) -> pd.arrays.BooleanArray:
    """``attention_passed``: NA without any check, else no failure.

    >>> attention_passed(np.array([0, 2, 1]), np.array([0, 0, 1])).tolist()
    [<NA>, True, False]
    """
    checks, failures = np.asarray(checks), np.asarray(failures)
    return pd.arrays.BooleanArray(failures == 0, mask=checks == 0)
