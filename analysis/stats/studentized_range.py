"""scipy's studentized range distribution, its integrals taken without ``nquad``'s bookkeeping.

Games-Howell's p-values are ``studentized_range.sf`` (in ``pingouin.pairwise_gameshowell``): for each pair,
scipy integrates a C integrand twice with QUADPACK's QAGI through ``integrate.nquad``, which at each of the
outer integral's ~400 points goes through four Python layers (ranges, options, ``quad``'s checks) before the
inner QAGI. That bookkeeping was about a fifth of the p-values' time at TIDE size (issue 31).

``studentized_range`` here is scipy's own distribution object with one method replaced: ``_cdf`` makes the
same QUADPACK calls, in the same order, with the same integrand, arguments and tolerances, straight to
scipy's QAGI; everything else (argument checks, the support, ``sf = 1 - cdf``, clipping) is scipy's. The
numbers are the same to the last bit: ``tests/test_stats.py`` compares them with scipy's over random and edge
inputs, and fails if the scipy internals used here (pinned in requirements.txt) move.

``use_in_pingouin`` makes pingouin's pairwise tests use it.
"""

from __future__ import annotations

import ctypes

import numpy as np
from scipy import LowLevelCallable
from scipy.integrate import _quadpack
from scipy.stats import _stats
from scipy.stats._continuous_distns import studentized_range_gen

# scipy's, in studentized_range_gen._cdf (nquad's opts) and quad's default subinterval limit.
_EPSABS, _EPSREL, _LIMIT = 1e-11, 1e-12, 50
# QAGI's ways of reading an infinite range (scipy.integrate._quad): (bound, inf) and (-inf, inf).
_UP_FROM_BOUND, _WHOLE_LINE = 1, 2
# Below this many degrees of freedom scipy integrates twice; at or above it, once (the asymptotic form).
_DOUBLE_INTEGRAL_BELOW_DF = 100000


def _qagi(integrand, bound: float, infinite: int, args: tuple = ()) -> float:
    return _quadpack._qagie(integrand, bound, infinite, args, 0, _EPSABS, _EPSREL, _LIMIT)[0]


def _single_cdf(q: float, k: float, df: float) -> float:
    """scipy's ``_single_cdf`` (studentized_range_gen._cdf), with nquad's two levels written out."""
    if df < _DOUBLE_INTEGRAL_BELOW_DF:
        data = np.array([q, k, df, _stats._studentized_range_cdf_logconst(k, df)], float)
        integrand = LowLevelCallable.from_cython(_stats, "_studentized_range_cdf",
                                                 data.ctypes.data_as(ctypes.c_void_p))

        def inner(outer_variable: float) -> float:  # nquad's innermost range is the first: (-inf, inf)
            return _qagi(integrand, 0, _WHOLE_LINE, (outer_variable,))

        return _qagi(inner, 0, _UP_FROM_BOUND)
    data = np.array([q, k], float)
    integrand = LowLevelCallable.from_cython(_stats, "_studentized_range_cdf_asymptotic",
                                             data.ctypes.data_as(ctypes.c_void_p))
    return _qagi(integrand, 0, _WHOLE_LINE)


class _StudentizedRange(studentized_range_gen):
    def _cdf(self, x, k, df):  # noqa: ANN001, ANN202 - scipy's signature
        ufunc = np.frompyfunc(_single_cdf, 3, 1)
        # clip as scipy does
        return np.clip(np.asarray(ufunc(x, k, df), dtype=np.float64)[()], 0, 1)


studentized_range = _StudentizedRange(name="studentized_range", a=0, b=np.inf)


def use_in_pingouin() -> None:
    """Give pingouin's pairwise tests (Games-Howell, Tukey) this distribution: the same p-values, sooner."""
    import pingouin.pairwise

    pingouin.pairwise.studentized_range = studentized_range
