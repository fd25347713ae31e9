"""Spearman rho and Kendall tau-b of every bootstrap resample at once (numpy, no loop over resamples).

The percentile CIs of ``metrics.metric_human_agreement`` need each statistic on
thousands of resamples of the same n responses. One ``scipy.stats.kendalltau``
call per resample costs ~0.3 ms whatever n, and a metrics run spent most of its
time in that loop. Here a resample is what it is: the original points with
multiplicities. Every rank and pair count of a resample is a sum over the
distinct original (x, y) points weighted by how often each was drawn, computed
for a chunk of resample rows in a few numpy operations; ``bench/bench_bootstrap.py``
times both.

:func:`rank_correlations_resampled` returns what scipy returns on
``x[index], y[index]`` for each resample row ``index`` (``spearmanr(...).statistic``,
``kendalltau(...).statistic``, i.e. tau-b), NaN where scipy gives NaN (a
resample constant in x or y). Kendall uses scipy's integer counts and formula
in scipy's order, so it agrees to the last bit; Spearman sums in another order
(agrees to ~1e-16). The tests compare both with scipy at 1e-12 on data with
many ties. Values are ranked as given: round near-ties first
(``metrics.round_for_ranking``).
"""

from __future__ import annotations

import contextlib
from typing import Any

import numpy as np

# Rows per chunk times n: bounds each (rows, n) work array to 2**21 cells (16 MB of int64/float64).
CHUNK_CELLS = 2**21
# Up to this many distinct (x, y) points, Kendall's S comes from one matrix product per chunk
# (O(J^2) per resample, in BLAS); above it, from the bits of the y rank (O(J log J) per resample,
# more numpy passes). Measured crossover on 2 cores: about 1,000-1,500 points.
KENDALL_MATMUL_MAX_POINTS = 1000


def rank_correlations_resampled(
    *, x: np.ndarray, y: np.ndarray, resamples: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Spearman rho and Kendall tau-b on every resample row of indices into ``x`` and ``y``.

    Parameters
    ----------
    x, y : numpy.ndarray
        The n paired values (no NaN).
    resamples : numpy.ndarray
        Integer indices into x and y, shape (n_boot, size).

    Returns
    -------
    (numpy.ndarray, numpy.ndarray)
        Spearman and Kendall statistics, one per resample row.
    """
    points = _JointPoints(np.asarray(x, float), np.asarray(y, float))
    resamples = np.asarray(resamples, dtype=np.int64)
    size = resamples.shape[1] if resamples.ndim == 2 else 0
    spearman, kendall = np.empty(len(resamples)), np.empty(len(resamples))
    for rows in _row_chunks(len(resamples), max(size, points.n_joint)):
        joint_sizes = _group_sizes(points.joint_group[resamples[rows]], points.n_joint)
        x_sizes, y_sizes = points.x_sizes(joint_sizes), points.y_sizes(joint_sizes)
        spearman[rows] = _spearman(points, size, x_sizes, y_sizes, joint_sizes)
        kendall[rows] = _kendall(points, size, x_sizes, y_sizes, joint_sizes)
    return spearman, kendall


# --------------------------------------------------------------------------- helpers


def _row_chunks(n_rows: int, width: int) -> list[slice]:
    step = max(1, CHUNK_CELLS // max(width, 1))
    return [slice(start, start + step) for start in range(0, n_rows, step)]


def _group_sizes(groups: np.ndarray, n_groups: int) -> np.ndarray:
    """How many drawn points fall in each group, per row: int64 (rows, n_groups)."""
    offsets = np.arange(len(groups), dtype=np.int64)[:, None] * n_groups
    return np.bincount((groups + offsets).ravel(), minlength=len(groups) * n_groups).reshape(len(groups), n_groups)


def _run_starts(sorted_values: np.ndarray) -> np.ndarray:
    """Positions where a new value starts in a sorted array."""
    return np.flatnonzero(np.r_[True, sorted_values[1:] != sorted_values[:-1]])


def _tied_pairs(sizes: np.ndarray) -> np.ndarray:
    return (sizes * (sizes - 1) // 2).sum(axis=1)


class _JointPoints:
    """The distinct (x, y) points of the data, their dense x and y ranks, and how to get Kendall's S.

    Copies of one (x, y) point are interchangeable in every rank statistic,
    so the work runs over the J distinct points (J <= n, smaller with ties)
    weighted by how often each was drawn. Everything here depends on the data
    only, so it is built once for all resamples.
    """

    def __init__(self, x: np.ndarray, y: np.ndarray) -> None:
        x_group = np.unique(x, return_inverse=True)[1].astype(np.int64).ravel()
        y_group = np.unique(y, return_inverse=True)[1].astype(np.int64).ravel()
        n_y = int(y_group.max()) + 1 if len(y_group) else 1
        # Sorted by (x rank, y rank), so the distinct points of one x value are adjacent.
        joint, self.joint_group = np.unique(x_group * n_y + y_group, return_inverse=True)
        self.joint_group = self.joint_group.astype(np.int64).ravel()
        self.n_joint = len(joint)
        self.joint_x, self.joint_y = joint // n_y, joint % n_y
        self.x_starts = _run_starts(self.joint_x)
        self.y_order = np.argsort(self.joint_y, kind="stable")
        self.y_starts = _run_starts(self.joint_y[self.y_order])
        small = self.n_joint <= KENDALL_MATMUL_MAX_POINTS
        self.kendall_s = _MatmulS(self.joint_x, self.joint_y) if small else _BitLevelS(self.joint_x, self.joint_y)

    def x_sizes(self, joint_sizes: np.ndarray) -> np.ndarray:
        """Drawn points per distinct x value, in increasing order: (rows, distinct x values)."""
        return np.add.reduceat(joint_sizes, self.x_starts, axis=1)

    def y_sizes(self, joint_sizes: np.ndarray) -> np.ndarray:
        """Drawn points per distinct y value, in increasing order: (rows, distinct y values)."""
        return np.add.reduceat(np.take(joint_sizes, self.y_order, axis=1), self.y_starts, axis=1)


def _centred_ranks(sizes: np.ndarray, size: int) -> np.ndarray:
    """Tie-averaged rank of each distinct value in each row, minus the mean rank (size + 1) / 2."""
    below = np.cumsum(sizes, axis=1) - sizes
    return below + (sizes + 1) / 2 - (size + 1) / 2


def _spearman(points: _JointPoints, size: int, x_sizes: np.ndarray, y_sizes: np.ndarray,
              joint_sizes: np.ndarray) -> np.ndarray:
    """Pearson r of the tie-averaged ranks, each distinct value weighted by its copies in the row."""
    dx, dy = _centred_ranks(x_sizes, size), _centred_ranks(y_sizes, size)
    sxx = (x_sizes * dx * dx).sum(axis=1)
    syy = (y_sizes * dy * dy).sum(axis=1)
    sxy = (joint_sizes * np.take(dx, points.joint_x, axis=1) * np.take(dy, points.joint_y, axis=1)).sum(axis=1)
    denominator = np.sqrt(sxx * syy)
    with np.errstate(invalid="ignore", divide="ignore"):
        rho = sxy / denominator
    return np.where(denominator > 0, np.clip(rho, -1.0, 1.0), np.nan)


def _kendall(points: _JointPoints, size: int, x_sizes: np.ndarray, y_sizes: np.ndarray,
             joint_sizes: np.ndarray) -> np.ndarray:
    """tau-b = S / sqrt(pairs untied in x) / sqrt(pairs untied in y), in scipy's order of operations."""
    total = size * (size - 1) // 2
    x_ties, y_ties = _tied_pairs(x_sizes), _tied_pairs(y_sizes)
    kendall_s = points.kendall_s(joint_sizes, total - x_ties - y_ties + _tied_pairs(joint_sizes))
    with np.errstate(invalid="ignore", divide="ignore"):
        tau = kendall_s / np.sqrt(total - x_ties) / np.sqrt(total - y_ties)
    # scipy answers NaN when the row is constant in x or in y.
    return np.where((x_ties == total) | (y_ties == total), np.nan, np.clip(tau, -1.0, 1.0))


class _MatmulS:
    """Kendall's S of each row as s^T A s / 2, A[k, l] = sign(x_k - x_l) * sign(y_k - y_l), s the counts.

    Entries of A are -1, 0, 1, so every partial sum of s @ A is an integer no
    larger than the resample size: exact in float32 (integers below 2**24) in
    any summation order, which halves the cost of the product; the last sum
    runs in int64.
    """

    def __init__(self, x_rank: np.ndarray, y_rank: np.ndarray) -> None:
        self.signs = np.sign(x_rank[:, None] - x_rank[None, :]) * np.sign(y_rank[:, None] - y_rank[None, :])
        self.signs32 = self.signs.astype(np.float32)

    def __call__(self, counts: np.ndarray, untied: np.ndarray) -> np.ndarray:
        with _one_blas_thread():
            if len(counts) and int(counts[0].sum()) < 2**24:
                paired = counts.astype(np.float32) @ self.signs32
            else:
                paired = counts.astype(np.float64) @ self.signs
        return (np.rint(paired).astype(np.int64) * counts).sum(axis=1) // 2


_BLAS_CONTROLLER: Any = None


def _one_blas_thread() -> contextlib.AbstractContextManager[Any]:
    """Limit BLAS to one thread for these small products, where threadpoolctl is installed.

    threadpoolctl comes with scikit-learn, so with the metrics stack. A second
    BLAS thread gains little on products this small and, on a busy machine (a
    Celery worker next to others), its start and wait cost more than the
    product: measured 2x slower overall at load average 7 on 2 cores.
    """
    global _BLAS_CONTROLLER
    try:
        from threadpoolctl import ThreadpoolController
    except ImportError:
        return contextlib.nullcontext()
    if _BLAS_CONTROLLER is None:  # inspects the loaded libraries once per process (~0.1 s)
        _BLAS_CONTROLLER = ThreadpoolController()
    return _BLAS_CONTROLLER.limit(limits=1, user_api="blas")


class _BitLevelS:
    """Kendall's S of each row: pairs untied in x and y minus twice the discordant ones.

    Discordant pairs (x_k < x_l, y_k > y_l) are counted on the bits of the y
    rank. Such a pair has a highest bit where the y ranks differ: there k has
    a 1, l a 0, and the higher bits (the prefix) agree. So, per bit, with the
    points ordered by (prefix, x rank), each 0-bit point l is discordant with
    the 1-bit points k of its prefix group that come before its own x-tie
    block: an exclusive cumulative sum of counts read at two positions that
    depend only on the data, computed here once. O(n log n) per row.
    """

    def __init__(self, x_rank: np.ndarray, y_rank: np.ndarray) -> None:
        self.levels = []
        for bit in range(max(1, int(y_rank.max()).bit_length())):
            prefix = y_rank >> (bit + 1)
            order = np.lexsort((x_rank, prefix))
            p, xr = prefix[order], x_rank[order]
            new_group = np.r_[True, p[1:] != p[:-1]]
            new_block = new_group | np.r_[True, xr[1:] != xr[:-1]]
            position = np.arange(len(order))
            group_start = np.maximum.accumulate(np.where(new_group, position, 0))
            block_start = np.maximum.accumulate(np.where(new_block, position, 0))
            is_one = ((y_rank[order] >> bit) & 1).astype(bool)
            self.levels.append((order, is_one, group_start, block_start))

    def __call__(self, counts: np.ndarray, untied: np.ndarray) -> np.ndarray:
        discordant = np.zeros(len(counts), dtype=np.int64)
        before = np.zeros((len(counts), counts.shape[1] + 1), dtype=np.int64)
        for order, is_one, group_start, block_start in self.levels:
            ordered = np.take(counts, order, axis=1)
            np.cumsum(np.where(is_one, ordered, 0), axis=1, out=before[:, 1:])
            earlier_ones = np.take(before, block_start, axis=1) - np.take(before, group_start, axis=1)
            discordant += (np.where(is_one, 0, ordered) * earlier_ones).sum(axis=1)
        return untied - 2 * discordant
