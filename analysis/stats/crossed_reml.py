"""statsmodels' REML fit of a linear model with crossed random intercepts, computed in the random effects' space.

``mixed_model`` fits ``MixedLM`` with one group holding every row and one
variance component per grouping (participant, item): statsmodels then works
with n x n operators (sparse, but rebuilt by slice assignment at every
likelihood evaluation) and its final Hessian loops over them. The same
quantities follow from the cross products of ``[X y]`` and the indicator
columns ``Z`` alone, by Woodbury's identity with ``C = Z'Z + diag(1/d)``
(a matrix of one row per participant and item: a few hundred, whatever the
number of ratings). :func:`crossed_reml_fit` computes statsmodels' profile
REML log-likelihood that way, minimises it with the very call statsmodels'
``fit(reml=True, method="powell")`` makes (``scipy.optimize.fmin_powell`` from
the same start with the same tolerances), and returns what that fit
returns: GLS fixed effects, the scale, the variance components and the
fixed effects' SEs from statsmodels' analytic Hessian, formula for formula.

It computes only the plain case: it returns None wherever statsmodels
would warn or take another branch (a zero variance ratio at an evaluated
point, a component under 0.01 at the optimum, a Hessian that is not negative
definite, no convergence, a variance ratio the data do not identify), and
the caller then fits with statsmodels itself, so every caveat stays
statsmodels' own. Points below statsmodels' 1e-10 singularity tolerance are
evaluated by statsmodels (``loglike_below_tolerance``).

Where the two Powell runs split on rounding in their last line searches, they
stop a hair apart within Powell's tolerance (``xtol`` 1e-4 on the roots of the
ratios): in tests, up to about 1e-6 relative in the variance components and
less elsewhere; otherwise they agree to about 1e-10.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import linalg, optimize, sparse

#: statsmodels' ``get_fe_params`` takes a variance ratio below this as singular (a pseudo-inverse path).
_SINGULAR = 1e-10
#: statsmodels warns "The MLE may be on the boundary" when a variance component is below this.
_BOUNDARY = 0.01
#: Smallest curvature of the log-likelihood in the log variance ratios taken as identified (fitted models: > 0.1).
_FLAT = 1e-3
#: ``fit(method="powell")``: statsmodels' ``_fit_powell`` defaults and ``LikelihoodModel.fit``'s maxiter.
_POWELL = {"xtol": 1e-4, "ftol": 1e-4, "maxiter": 100, "maxfun": None}


class _Unsupported(Exception):
    """A point where statsmodels would leave the plain path (singular, non-finite): its own fit decides."""


class StatsmodelsWarned(Exception):
    """Raised by a ``loglike_below_tolerance`` whose statsmodels evaluation warned: its fit then takes over."""


class _BelowTolerance(_Unsupported):
    """A variance ratio below statsmodels' singularity tolerance, where only statsmodels computes its value."""


@dataclass(frozen=True)
class CrossedFit:
    """What ``mixed_model`` reads of a statsmodels ``MixedLMResults``, under the same names."""

    fe_params: np.ndarray
    bse_fe: np.ndarray
    vcomp: np.ndarray  # one per grouping, in the order given
    scale: float
    fcalls: int
    curvature: float  # smallest eigenvalue of -H in log variance ratios


class _CrossedReml:
    """The profile REML log-likelihood of ``y = X b + sum_j Z_j u_j + e`` and its Hessian, from cross products."""

    def __init__(self, endog: np.ndarray, exog: np.ndarray, codes: Sequence[np.ndarray]):
        n, self.p = exog.shape
        self.n = n
        sizes = [int(c.max()) + 1 for c in codes]
        offsets = np.cumsum([0, *sizes])
        self.blocks = [slice(int(a), int(b)) for a, b in zip(offsets[:-1], offsets[1:])]
        self.sizes = np.array(sizes)
        columns = np.concatenate([c + offset for c, offset in zip(codes, offsets[:-1])])
        rows = np.tile(np.arange(n), len(codes))
        z = sparse.csr_array((np.ones(len(columns)), (rows, columns)), shape=(n, int(offsets[-1])))
        w = np.column_stack([exog, endog])
        self.ztz = (z.T @ z).toarray()
        self.ztw = np.asarray(z.T @ w)
        self.wtw = w.T @ w
        self.endog, self.exog = endog, exog
        self.fac = n - self.p  # statsmodels' REML degrees of freedom

    def _expand(self, vcomp: np.ndarray) -> np.ndarray:
        """A ratio per random effect.

        Below statsmodels' tolerance its ``get_fe_params`` takes the precision of a tiny component as zero and
        solves by ``pinv``: the fixed effects' design lies in the items' span (and the intercept in the
        participants'), so that matrix is zero up to rounding and the solution is rounding noise, which no
        other computation reproduces. Only statsmodels can follow its own path there.
        """
        ratios = np.repeat(vcomp, self.sizes)
        if not np.all(np.isfinite(ratios)):
            raise _Unsupported
        if ratios.min() < _SINGULAR:
            raise _BelowTolerance
        return ratios

    def _factor(self, precisions: np.ndarray) -> np.ndarray:
        """Cholesky factor of ``C = Z'Z + diag(precisions)``."""
        try:
            return linalg.cholesky(self.ztz + np.diag(precisions), lower=True)
        except linalg.LinAlgError as exc:
            raise _Unsupported from exc

    def _moments(self, chol: np.ndarray) -> np.ndarray:
        """``[X y]' V^-1 [X y]`` (V = I + Z diag(d) Z', the scale-free covariance) by Woodbury's identity."""
        reduced = linalg.solve_triangular(chol, self.ztw, lower=True)
        return self.wtw - reduced.T @ reduced

    def _fixed_effects(self, moments: np.ndarray) -> np.ndarray:
        """statsmodels' ``get_fe_params``: the GLS estimates (``moments`` at ratios above its tolerance)."""
        return np.linalg.solve(moments[:self.p, :self.p], moments[:self.p, self.p])

    def gls(self, vcomp: np.ndarray) -> np.ndarray:
        """The fixed effects statsmodels' fit reports at the variance ratios ``vcomp``."""
        ratios = self._expand(vcomp)
        return self._fixed_effects(self._moments(self._factor(1.0 / ratios)))

    def loglike(self, packed: np.ndarray) -> float:
        """statsmodels' ``MixedLM.loglike`` with REML, the scale and the fixed effects profiled out.

        ``packed`` holds the square roots of the variance ratios (statsmodels' ``use_sqrt``).
        """
        vcomp = np.asarray(packed, dtype=float) ** 2
        ratios = self._expand(vcomp)
        chol = self._factor(1.0 / ratios)
        moments = self._moments(chol)
        fe = self._fixed_effects(moments)
        qf = self._quadratic_form(chol, fe)
        xvx = moments[:self.p, :self.p]
        logdet_v = np.sum(np.log(ratios)) + 2.0 * np.sum(np.log(np.diag(chol)))
        _, logdet_xvx = np.linalg.slogdet(xvx)
        fac = self.fac
        value = (-logdet_v / 2.0 - fac * np.log(qf) / 2.0 - logdet_xvx / 2.0 - fac * np.log(2 * np.pi) / 2.0
                 + fac * np.log(fac) / 2.0 - fac / 2.0)
        if not np.isfinite(value) or qf <= 0:
            raise _Unsupported
        return float(value)

    def _quadratic_form(self, chol: np.ndarray, fe: np.ndarray) -> float:
        """``r' V^-1 r`` with ``r = y - X fe``, from the residual itself as statsmodels does."""
        resid = self.endog - self.exog @ fe
        zr = self.ztw[:, self.p] - self.ztw[:, :self.p] @ fe
        reduced = linalg.solve_triangular(chol, zr, lower=True)
        return float(resid @ resid - reduced @ reduced)

    def hessian(self, vcomp: np.ndarray, fe: np.ndarray) -> np.ndarray:
        """statsmodels' ``MixedLM.hessian`` (REML) at ``fe`` and the variance ratios ``vcomp`` (not their roots).

        ``Z' V^-1 a = D^-1 C^-1 Z' a`` and ``Z' V^-1 Z = D^-1 - D^-1 C^-1 D^-1`` turn each of its
        n x n products into one of the random effects' space; the blocks and their signs are statsmodels'.
        """
        ratios = self._expand(vcomp)
        chol = self._factor(1.0 / ratios)
        c_inv = linalg.cho_solve((chol, True), np.eye(len(ratios)))
        inv_d = 1.0 / ratios
        zpx = inv_d[:, None] * (c_inv @ self.ztw[:, :self.p])
        zpr = inv_d * (c_inv @ (self.ztw[:, self.p] - self.ztw[:, :self.p] @ fe))
        zpz = np.diag(inv_d) - inv_d[:, None] * c_inv * inv_d[None, :]
        xvx = self._moments(chol)[:self.p, :self.p]
        qf = self._quadratic_form(chol, fe)
        fac, k = self.fac, len(self.blocks)
        b = np.array([zpr[s] @ zpr[s] for s in self.blocks])
        d = np.zeros((k, k))
        hess_re = np.zeros((k, k))
        hess_fere = np.zeros((k, self.p))
        a = [zpx[s].T @ zpx[s] for s in self.blocks]
        xvx_inv_a = [np.linalg.solve(xvx, m) for m in a]
        for j, sj in enumerate(self.blocks):
            hess_fere[j] = zpx[sj].T @ zpr[sj]
            for m, sm in enumerate(self.blocks):
                cross = zpz[sm, sj]
                d[j, m] = 2.0 * zpr[sm] @ cross @ zpr[sj]
                u = zpx[sm].T @ cross @ zpx[sj]
                reml = np.sum(xvx_inv_a[j].T * xvx_inv_a[m]) - np.trace(np.linalg.solve(xvx, u + u.T))
                hess_re[j, m] = np.sum(cross * cross) / 2.0 + 0.5 * reml
        hess_re = hess_re - 0.5 * fac * (d / qf - np.outer(b, b) / qf**2)
        hess = np.zeros((self.p + k, self.p + k))
        hess[:self.p, :self.p] = -fac * xvx / qf
        hess[:self.p, self.p:] = (-fac * hess_fere / qf).T
        hess[self.p:, :self.p] = -fac * hess_fere / qf
        hess[self.p:, self.p:] = hess_re
        return hess


def crossed_reml_fit(
    *, endog: np.ndarray, exog: np.ndarray, codes: Sequence[np.ndarray],
    loglike_below_tolerance: Callable[[np.ndarray], float] | None = None,
) -> CrossedFit | None:
    """statsmodels' ``MixedLM(..., vc per grouping).fit(reml=True, method="powell")``, or None where it would warn.

    ``codes`` are each grouping's integer labels (0..k-1) per row, in the order
    of statsmodels' variance components (their names sorted). Returns None
    where statsmodels' fit would take another branch or warn; fit with
    statsmodels then.

    Powell's line searches often probe a root near zero on their way (where
    a component is small). Below statsmodels' tolerance only statsmodels'
    own ``loglike`` gives its value (see ``_CrossedReml._expand``):
    ``loglike_below_tolerance`` computes it there, or raises (anything) to give
    up; without it the fit gives up at such a point.
    """
    model = _CrossedReml(np.asarray(endog, dtype=float), np.asarray(exog, dtype=float), codes)
    n = model.n

    def objective(packed: np.ndarray) -> float:
        try:
            value = model.loglike(packed)
        except _BelowTolerance:
            if loglike_below_tolerance is None:
                raise
            try:
                value = loglike_below_tolerance(np.array(packed, dtype=float))
            except Exception as exc:  # noqa: BLE001 - a singular factor, a warning: statsmodels' own fit meets it itself
                raise _Unsupported from exc
        return -value / n  # LikelihoodModel.fit's objective

    try:
        xopt, _fopt, _direc, _niter, fcalls, warnflag = optimize.fmin_powell(
            objective, np.ones(len(codes)), full_output=True, disp=False, retall=False, **_POWELL)
        if warnflag:
            return None
        ratios = np.atleast_1d(xopt) ** 2
        fe = model.gls(ratios)
        scale = model._quadratic_form(model._factor(1.0 / model._expand(ratios)), fe) / model.fac
        vcomp = scale * ratios
        if np.min(np.abs(vcomp)) < _BOUNDARY:
            return None
        hess = model.hessian(ratios, fe)
    except _Unsupported:
        return None
    if not np.all(np.isfinite(hess)) or np.any(np.diag(hess) >= 0):
        return None
    try:
        covariance = np.linalg.inv(-hess)
    except np.linalg.LinAlgError:
        return None
    if not np.all(np.diag(covariance) > 0):
        return None
    # The likelihood's curvature in the log variance ratios (dimensionless): about 0 where a ratio is not
    # identified (say, each item alone in a fixed effect's cell). Powell's path over such a flat valley
    # follows the last bits of the function values, so only statsmodels' own evaluations give its answer.
    curvature = float(np.linalg.eigvalsh(-hess[model.p:, model.p:] * np.outer(ratios, ratios)).min())
    if curvature < _FLAT:
        return None
    return CrossedFit(fe_params=fe, bse_fe=np.sqrt(np.diag(covariance)[:model.p]), vcomp=vcomp, scale=float(scale),
                      fcalls=int(fcalls), curvature=curvature)
