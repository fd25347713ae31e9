"""Regression models of the ratings: ``rating ~ condition * system`` as a mixed and as an ordinal model.

``mixed_model`` fits a linear mixed model with crossed random intercepts for
participant and item (statsmodels ``MixedLM``'s REML fit, computed in the
random effects' space by ``crossed_reml`` wherever that gives statsmodels'
own numbers, by statsmodels otherwise); ``ordinal_model`` fits an
ordered logit with participant-clustered standard errors (``OrderedModel``).
Both exclude the reference responses and subsample large frames by
participant.
"""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from analysis.stats.primitives import (
    CONFIDENCE, _join_notes, _missing_columns_note, _note_frame, _single_dimension, each_dimension,
    _subsample_participants,
)

#: What ``analysis.stats`` re-exports of this family.
__all__ = [
    "MODEL_COLUMNS", "mixed_model", "ordinal_model",
]


# ---------------------------------------------------------------------------
# Mixed-effects and ordinal models
# ---------------------------------------------------------------------------

MODEL_COLUMNS = [
    "dimension", "term", "coef", "se", "z", "p", "ci_low", "ci_high", "n_obs", "n_participants", "n_items", "holm_family", "note",
]
_MODEL_P = "none: Wald tests of one model's coefficients"

# ``condition`` is a categorical whose first level is the baseline, so patsy takes it as the reference level.
_FORMULA = "rating ~ C(condition) * C(system)"
_FORMULA_ONE_SYSTEM = "rating ~ C(condition)"


@dataclass(frozen=True)
class ModelInput:
    """What both models are asked: the two conditions compared, the subsample of large frames, the one
    dimension fitted, and the names of the ratings frame's columns."""

    baseline: str
    treatment: str
    max_rows: int | None = 20_000
    seed: int = 0
    dimension: str | None = None
    participant: str = "participant_id"
    response: str = "response_id"
    model: str = "model"
    condition: str = "condition"
    rating: str = "rating"
    dimension_column: str = "dimension"


def _model_input(ratings: pd.DataFrame, spec: ModelInput) -> tuple[pd.DataFrame | None, str]:
    """The frame a model is fitted on and its note; None and the note saying why when there is no model."""
    problem = _missing_columns_note(ratings, [spec.participant, spec.response, spec.model, spec.condition, spec.rating])
    if problem:
        return None, problem
    frame, note = _model_frame(ratings, spec)
    problem = _design_problem(frame, spec.baseline, spec.treatment)
    if problem:
        return None, _join_notes(note, problem)
    return frame, note


def _model_frame(ratings: pd.DataFrame, spec: ModelInput) -> tuple[pd.DataFrame, str]:
    """Baseline and treatment ratings with canonical column names, subsampled by participant if large."""
    data, dimension_note = _single_dimension(ratings, spec.dimension, spec.dimension_column)
    data = data.dropna(subset=[spec.rating])
    # The reference is its own system and its own condition, so it cannot sit
    # in a condition x system design: it would be a perfectly confounded cell.
    data = data[data[spec.condition].isin([spec.baseline, spec.treatment])]
    frame = pd.DataFrame({
        "rating": data[spec.rating].to_numpy(dtype=float),
        "condition": pd.Categorical(data[spec.condition].to_numpy(), categories=[spec.baseline, spec.treatment]),
        "system": data[spec.model].to_numpy(),
        "participant_id": data[spec.participant].to_numpy(),
        "response_id": data[spec.response].to_numpy(),
    })
    frame, subsample_note = _subsample_participants(frame, spec.max_rows, spec.seed, "participant_id")
    return frame, _join_notes(dimension_note, "only the baseline and treatment conditions enter", subsample_note)


def _clean_term(term: str) -> str:
    """``C(condition)[T.fine-tuned]`` -> ``condition[fine-tuned]``."""
    return re.sub(r"C\((\w+)(?:, Treatment\([^)]*\))?\)\[T\.([^\]]*)\]", r"\1[\2]", term)


def _coefficient_table(params: pd.Series, se: pd.Series, frame: pd.DataFrame, note: str) -> pd.DataFrame:
    z = params / se
    critical = stats.norm.ppf((1 + CONFIDENCE) / 2)
    return pd.DataFrame({
        "term": [_clean_term(term) for term in params.index],
        "coef": params.to_numpy(), "se": se.to_numpy(), "z": z.to_numpy(),
        "p": 2 * stats.norm.sf(np.abs(z.to_numpy())),
        "ci_low": (params - critical * se).to_numpy(), "ci_high": (params + critical * se).to_numpy(),
        "n_obs": len(frame), "n_participants": frame["participant_id"].nunique(),
        "n_items": frame["response_id"].nunique(), "holm_family": _MODEL_P, "note": note,
    }).reindex(columns=MODEL_COLUMNS)


def _design_problem(frame: pd.DataFrame, baseline: str, treatment: str) -> str:
    if frame.empty:
        return f"no {baseline} or {treatment} ratings"
    if frame["condition"].nunique() < 2:
        return "only one condition"
    if frame["participant_id"].nunique() < 2:
        return "fewer than 2 participants"
    if np.ptp(frame["rating"].to_numpy()) == 0:
        return "all ratings identical"
    return ""


def _systems_lacking_a_condition(frame: pd.DataFrame) -> list[str]:
    conditions = frame.groupby("system", sort=True)["condition"].nunique()
    return [str(system) for system in conditions.index[conditions < 2]]


def _fit_warnings(caught: list[warnings.WarningMessage]) -> list[str]:
    """The distinct messages statsmodels warned with during a fit (boundary, Hessian, convergence ...)."""
    ignored = (DeprecationWarning, FutureWarning, PendingDeprecationWarning)
    messages = [str(w.message).strip() for w in caught
                if "statsmodels" in (w.filename or "") and not issubclass(w.category, ignored)]
    return list(dict.fromkeys(message for message in messages if message))


def _fit_mixed(model_spec: Any) -> tuple[Any, str]:
    """REML fit. statsmodels' default BFGS (and often L-BFGS) stalls on crossed
    variance components; derivative-free Powell converges reliably and fast here.

    Every warning of the fit reaches the note: a boundary fit (a variance
    component at zero, a Hessian that is not positive definite) is as much a
    caveat as a convergence problem.
    """
    for method in ("powell", "lbfgs"):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = model_spec.fit(reml=True, method=method)
        messages = _fit_warnings(caught)
        if result.converged and not messages:
            return result, ""
    if not result.converged:
        messages = ["optimizer reported convergence problems", *messages]
    return result, "fit warnings: " + "; ".join(messages)


#: The variance components of ``mixed_model``: statsmodels' ``vc_formula`` and the frame column of each.
_COMPONENTS = {"participant": "participant_id", "item": "response_id"}


@dataclass(frozen=True)
class _MixedFit:
    """The estimates ``mixed_model`` reports, from statsmodels or from the same fit in the random effects' space."""

    fe_params: pd.Series
    bse_fe: pd.Series
    names: list[str]  # the variance components, in statsmodels' (sorted) order
    vcomp: np.ndarray
    scale: float
    note: str


def _statsmodels_spec(frame: pd.DataFrame, formula: str) -> Any:
    """statsmodels' ``MixedLM``: one group holding every row, a variance component per grouping."""
    import statsmodels.formula.api as smf

    # The variance-component designs (a column per participant, per item) are mostly zeros, and sparse
    # algebra does the same REML computation several times faster than dense.
    return smf.mixedlm(formula, frame.assign(group=1), groups="group", re_formula="0", use_sparse=True,
                       vc_formula={name: f"0 + C({column})" for name, column in _COMPONENTS.items()})


def _fit_statsmodels(frame: pd.DataFrame, formula: str) -> _MixedFit:
    """The fit with statsmodels' ``MixedLM`` itself."""
    model_spec = _statsmodels_spec(frame, formula)
    result, fit_note = _fit_mixed(model_spec)
    return _MixedFit(result.fe_params, result.bse_fe, list(model_spec.exog_vc.names), np.asarray(result.vcomp),
                     float(result.scale), fit_note)


def _statsmodels_loglike(frame: pd.DataFrame, formula: str) -> Callable[[np.ndarray], float]:
    """statsmodels' REML log-likelihood at packed roots of the variance ratios, its model built at the first call.

    Its fit sets these attributes before it evaluates; a warning here (say, of a zero ratio) would have
    reached the old fit's note, so the fit is left to statsmodels.
    """
    from analysis.stats.crossed_reml import StatsmodelsWarned

    spec = None

    def loglike(packed: np.ndarray) -> float:
        nonlocal spec
        if spec is None:
            spec = _statsmodels_spec(frame, formula)
            spec.reml, spec.cov_pen, spec.fe_pen, spec._cov_sing = True, None, None, 0
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            value = spec.loglike(packed)
        if _fit_warnings(caught):
            raise StatsmodelsWarned
        return float(value)

    return loglike


def _fit_crossed(frame: pd.DataFrame, formula: str) -> _MixedFit | None:
    """The same REML fit computed in the space of the random effects (``crossed_reml``), or None where it
    would not be statsmodels' own: then :func:`_fit_statsmodels` fits, warnings and all.

    statsmodels spends seconds at a study's size rebuilding n x n sparse operators at each of its ~50
    likelihood evaluations; from the cross products the whole fit takes tens of milliseconds.
    """
    import statsmodels.formula.api as smf

    from analysis.stats.crossed_reml import crossed_reml_fit

    names = sorted(_COMPONENTS)
    if frame[["system", *_COMPONENTS.values()]].isna().to_numpy().any():
        return None  # statsmodels' formula handling of missing labels decides
    # The fixed-effects design as statsmodels' formula machinery builds it for MixedLM (same columns, same names).
    design = smf.ols(formula, frame)
    codes = [pd.factorize(frame[_COMPONENTS[name]], sort=True)[0] for name in names]
    fit = crossed_reml_fit(endog=design.endog, exog=design.exog, codes=codes,
                           loglike_below_tolerance=_statsmodels_loglike(frame, formula))
    if fit is None:
        return None
    index = pd.Index(design.exog_names)
    return _MixedFit(pd.Series(fit.fe_params, index=index), pd.Series(fit.bse_fe, index=index), names, fit.vcomp,
                     fit.scale, "")


#: A variance component below this share of the residual variance is on the boundary (zero).
BOUNDARY_SHARE = 1e-6


def _boundary_note(names: list[str], components: Any, residual: float) -> str:
    """A boundary (singular) fit, as lme4 calls it: a variance component estimated at zero.

    Its Hessian is then not positive definite and the SEs of the fixed effects
    are unreliable; optimizers often report convergence all the same.
    """
    at_zero = [name for name, value in zip(names, np.asarray(components, dtype=float))
               if not value > BOUNDARY_SHARE * float(residual)]
    if not at_zero:
        return ""
    return ("boundary (singular) fit: var(" + "), var(".join(at_zero) + ") estimated at zero; "
            "fixed-effect SEs are unreliable")


def _ordinal_estimates(cells_spec: Any) -> tuple[np.ndarray, float, list[warnings.WarningMessage]]:
    """The ordinal model's estimates, its largest log-likelihood gradient there and the fit's warnings.

    BFGS stops on a scaled criterion that a large frame meets early; Newton steps finish the job, one at a
    time until the gradient is ~0 (usually one): later steps only move the estimates within the noise of
    the numerical Hessian.
    """
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = cells_spec.fit(method="bfgs", disp=False, maxiter=2000)
    gradient = _largest_gradient(cells_spec, result.params)
    for _ in range(ORDINAL_NEWTON_STEPS):
        if gradient <= ORDINAL_GRADIENT_TOLERANCE:
            break
        with warnings.catch_warnings(record=True) as polishing:
            warnings.simplefilter("always")
            polished = cells_spec.fit(start_params=np.asarray(result.params), method="newton", disp=False, maxiter=1)
        polished_gradient = _largest_gradient(cells_spec, polished.params)
        if polished_gradient >= gradient:
            break
        result, gradient, caught = polished, polished_gradient, polishing
    return np.asarray(result.params), gradient, list(caught)


def _logit_ordered_model() -> type:
    """statsmodels' ``OrderedModel`` for ``distr="logit"``, its cdf and pdf computed by ``scipy.special`` directly.

    They are the functions ``scipy.stats.logistic`` evaluates (``expit`` and
    ``exp(-|x| - 2 log1p(exp(-|x|)))``), so every number is the same; skipping
    the generic distribution's argument handling makes the fit about four times faster.
    A model may also stand for its rows' distinct values with counts (``counts``),
    and a model of every row take its Hessian from such a model (``cells``).
    """
    from scipy import special
    from statsmodels.miscmodels.ordinal_model import OrderedModel

    class LogitOrderedModel(OrderedModel):
        # Set on a model of distinct rows: how many times each row occurs (its log-likelihood counts that often).
        counts = None
        # Set on a model of every row: the model of its distinct rows, whose log-likelihood is the same
        # function, so the same Hessian at a fraction of the cost.
        cells = None

        def loglikeobs(self, params):
            values = super().loglikeobs(params)
            return values if self.counts is None else values * self.counts

        def hessian(self, params):
            return super().hessian(params) if self.cells is None else self.cells.hessian(params)

        def cdf(self, x):
            return special.expit(x)

        def pdf(self, x):
            y = -np.abs(x)
            return np.exp(y - 2.0 * special.log1p(np.exp(y)))

    return LogitOrderedModel


#: Largest |gradient| of the ordinal model's log-likelihood accepted as converged.
ORDINAL_GRADIENT_TOLERANCE = 1e-3
#: Smallest eigenvalue of the ordinal model's information per rating below which the likelihood is flat in some
#: direction: a term separates the ratings and its estimate runs off to infinity (fitted models sit above 1e-4).
ORDINAL_MIN_INFORMATION = 1e-8


def _flat_information(model_spec: Any, params: np.ndarray, n_obs: int) -> bool:
    information = -np.asarray(model_spec.hessian(params)) / n_obs
    return not np.all(np.isfinite(information)) or np.linalg.eigvalsh(information).min() < ORDINAL_MIN_INFORMATION


#: At most this many Newton steps polish the ordinal model's BFGS estimates.
ORDINAL_NEWTON_STEPS = 50


def _largest_gradient(model_spec: Any, params: pd.Series) -> float:
    return float(np.max(np.abs(model_spec.score(np.asarray(params)))))


def _mixed_model_of_dimension(ratings: pd.DataFrame, spec: ModelInput) -> pd.DataFrame:
    """Linear mixed model ``rating ~ condition * system`` with crossed random intercepts.

    Fitted by REML as statsmodels ``MixedLM`` fits it (see ``_fit_crossed``): one constant group and
    variance components ``participant`` (``0 + C(participant_id)``) and
    ``item`` (``0 + C(response_id)``), which is how statsmodels expresses
    crossed random effects. The intercept is the baseline condition of the
    alphabetically first system; only baseline and treatment ratings enter. Rows
    ``var(participant)``, ``var(item)`` and ``var(residual)`` give the
    variance components (no SE). Large frames are subsampled by participant
    (``spec.max_rows``, ``spec.seed``); ``note`` says so.

    Examples
    --------
    >>> rng = np.random.default_rng(1)
    >>> ratings = pd.DataFrame({"participant_id": np.repeat([f"p{i}" for i in range(8)], 4),
    ...     "response_id": ["r1", "r2", "r3", "r4"] * 8, "model": ["A", "A", "B", "B"] * 8,
    ...     "condition": ["base", "tuned"] * 16, "rating": rng.integers(1, 6, 32).astype(float)})
    >>> _mixed_model_of_dimension(ratings, ModelInput(baseline="base", treatment="tuned"))["term"].tolist()
    ['Intercept', 'condition[tuned]', 'system[B]', 'condition[tuned]:system[B]', 'var(item)', 'var(participant)', 'var(residual)']
    """
    frame, note = _model_input(ratings, spec)
    if frame is None:
        return _note_frame(MODEL_COLUMNS, note)
    lacking = _systems_lacking_a_condition(frame)
    if lacking:
        # An empty condition x system cell leaves a fixed effect without data: MixedLM's solve fails on it.
        return _note_frame(MODEL_COLUMNS, _join_notes(note, "a system lacks a condition: " + ", ".join(lacking)))
    formula = _FORMULA if frame["system"].nunique() > 1 else _FORMULA_ONE_SYSTEM
    fit = _fit_crossed(frame, formula) or _fit_statsmodels(frame, formula)
    note = _join_notes(note, fit.note, _boundary_note(fit.names, fit.vcomp, fit.scale))
    table = _coefficient_table(fit.fe_params, fit.bse_fe, frame, note)
    variances = pd.DataFrame({
        "term": [f"var({name})" for name in fit.names] + ["var(residual)"],
        "coef": [*np.asarray(fit.vcomp, dtype=float), float(fit.scale)],
    }).assign(n_obs=len(frame), n_participants=frame["participant_id"].nunique(),
              n_items=frame["response_id"].nunique(), holm_family=_MODEL_P, note=note)
    return pd.concat([table, variances], ignore_index=True).reindex(columns=MODEL_COLUMNS)


def _ordinal_model_of_dimension(ratings: pd.DataFrame, spec: ModelInput) -> pd.DataFrame:
    """Ordered logit ``rating ~ condition * system`` with participant-clustered standard errors.

    statsmodels ``OrderedModel`` (``distr="logit"``), sandwich SEs clustered
    on participant (``cov_type="cluster"``). Positive coefficients mean higher
    ratings. Items are not modelled as random (OrderedModel has no random
    effects); the clustering absorbs within-participant correlation only.
    Cut-point rows follow statsmodels' parameterisation: ``cut 1/2`` is the
    first threshold and each later ``log-increment a/b`` is the log of the
    gap to the previous threshold. Only baseline and treatment ratings enter.

    Examples
    --------
    >>> rng = np.random.default_rng(1)
    >>> ratings = pd.DataFrame({"participant_id": np.repeat([f"p{i}" for i in range(10)], 4),
    ...     "response_id": ["r1", "r2", "r3", "r4"] * 10, "model": ["A", "A", "B", "B"] * 10,
    ...     "condition": ["base", "tuned"] * 20, "rating": rng.integers(1, 4, 40).astype(float)})
    >>> _ordinal_model_of_dimension(ratings, ModelInput(baseline="base", treatment="tuned"))["term"].tolist()
    ['condition[tuned]', 'system[B]', 'condition[tuned]:system[B]', 'cut 1/2', 'log-increment 2/3']
    """
    frame, note = _model_input(ratings, spec)
    if frame is None:
        return _note_frame(MODEL_COLUMNS, note)
    levels = np.sort(frame["rating"].unique())
    labels = [f"{level:g}" for level in levels]
    outcome = pd.Categorical(frame["rating"].map(dict(zip(levels, labels))), categories=labels, ordered=True)
    formula = _FORMULA if frame["system"].nunique() > 1 else _FORMULA_ONE_SYSTEM
    data = frame.assign(rating=outcome)
    model_spec = _logit_ordered_model().from_formula(formula, data, distr="logit")
    clusters = pd.factorize(frame["participant_id"])[0]
    # A row's likelihood depends only on its condition, system and rating: the estimates are fitted on those
    # distinct cells, each counted as often as it occurs (tens of rows for thousands). The clustered SEs need
    # each participant's rows, so they come from the whole frame, at the estimates.
    cells = data.groupby(["condition", "system", "rating"], observed=True, sort=False).size().rename("count")
    cells_spec = _logit_ordered_model().from_formula(formula, cells.reset_index(), distr="logit")
    cells_spec.counts = cells.to_numpy(dtype=float)
    model_spec.cells = cells_spec
    try:
        params, gradient, caught = _ordinal_estimates(cells_spec)
        if _flat_information(cells_spec, params, len(frame)):
            raise np.linalg.LinAlgError("the information matrix is singular")
        with warnings.catch_warnings(record=True) as final:
            warnings.simplefilter("always")
            result = model_spec.fit(start_params=params, method="newton", maxiter=0, disp=False,
                                    cov_type="cluster", cov_kwds={"groups": clusters})
    except np.linalg.LinAlgError:
        # Complete separation (a term predicts the ratings perfectly) leaves the Hessian singular.
        problem = "singular information matrix (a term separates the ratings perfectly?): no estimates"
        return _note_frame(MODEL_COLUMNS, _join_notes(note, problem))
    caught = [*caught, *final]
    messages = _fit_warnings(caught)
    if gradient > ORDINAL_GRADIENT_TOLERANCE:
        messages = [f"not converged: largest log-likelihood gradient {gradient:.3g}", *messages]
    else:
        # Convergence is judged by the gradient itself; an optimizer's own stopping complaint is moot.
        messages = [m for m in messages if "converge" not in m.lower()]
    if messages:
        note = _join_notes(note, "fit warnings: " + "; ".join(messages))
    n_cuts = len(levels) - 1
    names = list(result.params.index)
    thresholds = [f"cut {labels[0]}/{labels[1]}"] + [
        f"log-increment {labels[i]}/{labels[i + 1]}" for i in range(1, n_cuts)
    ]
    names[-n_cuts:] = thresholds
    params = pd.Series(result.params.to_numpy(), index=names)
    se = pd.Series(np.asarray(result.bse), index=names)
    table = _coefficient_table(params, se, frame, _join_notes(note, "SE clustered by participant"))
    return table


def _each_dimension_of(fit_one: Callable[[pd.DataFrame, ModelInput], pd.DataFrame]) -> Callable[..., pd.DataFrame]:
    """A model fitted once per rating dimension (``dimension`` column; ``dimension=`` narrows it to one).
    The keyword arguments are the fields of ``ModelInput``."""

    def fit(ratings: pd.DataFrame, *, baseline: str, treatment: str, dimension: str | None = None,
            dimension_column: str = "dimension", **options: Any) -> pd.DataFrame:
        return each_dimension(
            lambda one: fit_one(ratings, ModelInput(baseline=baseline, treatment=treatment, dimension=one,
                                                    dimension_column=dimension_column, **options)),
            ratings, dimension, dimension_column, MODEL_COLUMNS)

    fit.__doc__ = f"{fit_one.__doc__.splitlines()[0]} Fitted per rating dimension (see ``{fit_one.__name__}``)."
    return fit


#: ``_mixed_model_of_dimension`` per rating dimension, with a ``dimension`` column.
mixed_model = _each_dimension_of(_mixed_model_of_dimension)
mixed_model.__name__ = mixed_model.__qualname__ = "mixed_model"
#: ``_ordinal_model_of_dimension`` per rating dimension, with a ``dimension`` column.
ordinal_model = _each_dimension_of(_ordinal_model_of_dimension)
ordinal_model.__name__ = ordinal_model.__qualname__ = "ordinal_model"
