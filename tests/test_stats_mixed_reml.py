"""The mixed model's REML fit in the random effects' space against statsmodels' ``MixedLM`` fitted the old way.

``mixed_model`` used to fit statsmodels directly (``smf.mixedlm(..., use_sparse=True).fit(reml=True,
method="powell")``). It now computes the same fit from cross products (``analysis.stats.crossed_reml``)
and falls back to statsmodels wherever statsmodels would warn. Each reference here is statsmodels called
directly with those old settings, never our own output.

"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from analysis import stats as S
from analysis.stats.crossed_reml import crossed_reml_fit
from tests.support import stats_data as data

_VC = {"participant": "0 + C(participant_id)", "item": "0 + C(response_id)"}
_FORMULA = "rating ~ C(condition) * C(system)"


def tide_like(n_participants: int, seed: int, drop: float = 0.15) -> pd.DataFrame:
    """A TIDE-shaped study with a share of its ratings missing (early exits, skipped items): GLS is not OLS."""
    ratings, _ = data.make_study(n_participants, seed=seed)
    keep = np.random.default_rng(seed + 50).random(len(ratings)) >= drop
    return ratings[keep].reset_index(drop=True)


def model_frame(ratings: pd.DataFrame) -> pd.DataFrame:
    """The rows and columns ``mixed_model`` fits: baseline and treatment ratings, the system as ``system``."""
    rows = ratings[ratings["condition"].isin([data.PAIR["baseline"], data.PAIR["treatment"]])]
    return pd.DataFrame({
        "rating": rows["rating"].to_numpy(dtype=float),
        "condition": pd.Categorical(rows["condition"], categories=[data.PAIR["baseline"], data.PAIR["treatment"]]),
        "system": rows["model"].to_numpy(), "participant_id": rows["participant_id"].to_numpy(),
        "response_id": rows["response_id"].to_numpy(), "group": 1,
    })


def statsmodels_spec(frame: pd.DataFrame, formula: str = _FORMULA):
    import statsmodels.formula.api as smf

    return smf.mixedlm(formula, frame, groups="group", re_formula="0", use_sparse=True, vc_formula=_VC)


def statsmodels_reml(frame: pd.DataFrame, formula: str = _FORMULA):
    """A statsmodels model set up for REML as its ``fit`` sets it up, for calling ``loglike`` directly."""
    spec = statsmodels_spec(frame, formula)
    spec.reml, spec.cov_pen, spec.fe_pen, spec._cov_sing = True, None, None, 0
    return spec


def statsmodels_fit(frame: pd.DataFrame, formula: str = _FORMULA):
    """The old way: statsmodels' REML with Powell, and the warnings it gave."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = statsmodels_spec(frame, formula).fit(reml=True, method="powell")
    return result, [str(w.message) for w in caught if "statsmodels" in (w.filename or "")]


def codes(frame: pd.DataFrame) -> list[np.ndarray]:
    """The groupings in statsmodels' (sorted) order of variance components: item, participant."""
    return [pd.factorize(frame["response_id"], sort=True)[0], pd.factorize(frame["participant_id"], sort=True)[0]]


def ours(frame: pd.DataFrame, formula: str = _FORMULA, below_tolerance: list | None = None):
    """``crossed_reml_fit`` on the frame, statsmodels' own ``loglike`` computing the points below its tolerance
    (each such point is appended to ``below_tolerance``)."""
    import statsmodels.formula.api as smf

    reml = statsmodels_reml(frame, formula)

    def statsmodels_loglike(packed: np.ndarray) -> float:
        if below_tolerance is not None:
            below_tolerance.append(packed)
        return reml.loglike(packed)

    design = smf.ols(formula, frame)
    return crossed_reml_fit(endog=design.endog, exog=design.exog, codes=codes(frame),
                            loglike_below_tolerance=statsmodels_loglike)


@pytest.fixture(scope="module")
def tide_fit():
    frame = model_frame(tide_like(60, seed=3))
    reference, messages = statsmodels_fit(frame)
    return frame, reference, messages


def assert_same_fit(coef, se, vcomp, scale, reference) -> None:
    """Equal to statsmodels' old fit to its optimizer's tolerance.

    Our Powell run is statsmodels' own call on the same function, equal to rounding. Where its last line
    searches split on that rounding, the two stop a hair apart within Powell's xtol: seen up to 1e-6
    relative in the variances and 4e-7 in the SEs, the coefficients within 1e-7 of their SE. Anything
    beyond these bounds would be a different optimum, not rounding.
    """
    np.testing.assert_array_less(np.abs(np.asarray(coef) - reference.fe_params.to_numpy()),
                                 1e-6 * reference.bse_fe.to_numpy())
    np.testing.assert_allclose(se, reference.bse_fe.to_numpy(), rtol=1e-5)
    np.testing.assert_allclose(vcomp, np.asarray(reference.vcomp), rtol=1e-5)
    assert scale == pytest.approx(reference.scale, rel=1e-7)


def test_it_reproduces_statsmodels_old_fit_on_a_tide_like_study(tide_fit):
    frame, reference, messages = tide_fit
    assert reference.converged and messages == []  # the plain case: nothing for statsmodels to warn about
    below_tolerance = []
    fit = ours(frame, below_tolerance=below_tolerance)
    assert fit is not None
    assert below_tolerance  # the study's small item variance: Powell probes a root near zero on its way
    assert_same_fit(fit.fe_params, fit.bse_fe, fit.vcomp, fit.scale, reference)
    # The same optimum: statsmodels' likelihood is the same at both (to far below Powell's ftol of 1e-4).
    spec = statsmodels_reml(frame)
    at_ours = spec.loglike(np.sqrt(fit.vcomp / fit.scale))
    assert at_ours == pytest.approx(spec.loglike(np.sqrt(np.asarray(reference.vcomp) / reference.scale)), rel=1e-11)


def test_mixed_model_reports_the_reference_fit(tide_fit):
    frame, reference, _ = tide_fit
    table = S.mixed_model(tide_like(60, seed=3), **data.PAIR).set_index("term")
    fixed = table.iloc[:len(reference.fe_params)]
    assert list(fixed.index) == [S.regression._clean_term(term) for term in reference.fe_params.index]
    assert_same_fit(fixed["coef"], fixed["se"], table.loc[["var(item)", "var(participant)"], "coef"],
                    table.loc["var(residual)", "coef"], reference)
    assert (table["n_obs"] == len(frame)).all() and table["note"].iloc[0] == (
        "only the baseline and treatment conditions enter")


@pytest.mark.parametrize("packed", [[1.0, 1.0], [0.4, 1.7], [2.5, 0.05], [2e-5, 0.8], [0.9, 3e-5]])
def test_its_likelihood_is_statsmodels_profile_reml_likelihood(tide_fit, packed):
    import statsmodels.formula.api as smf

    from analysis.stats.crossed_reml import _CrossedReml

    frame, _, _ = tide_fit
    design = smf.ols(_FORMULA, frame)
    model = _CrossedReml(design.endog, design.exog, codes(frame))
    expected = statsmodels_reml(frame).loglike(np.array(packed))
    assert model.loglike(np.array(packed)) == pytest.approx(expected, rel=1e-12)


def test_below_statsmodels_singularity_tolerance_it_gives_up(tide_fit):
    """There statsmodels solves a matrix that is zero up to rounding by ``pinv``: its value is rounding noise."""
    import statsmodels.formula.api as smf

    from analysis.stats.crossed_reml import _CrossedReml, _Unsupported

    frame, _, _ = tide_fit
    design = smf.ols(_FORMULA, frame)
    model = _CrossedReml(design.endog, design.exog, codes(frame))
    for packed in ([1e-6, 0.8], [0.9, 0.0]):
        with pytest.raises(_Unsupported):
            model.loglike(np.array(packed))


def test_its_hessian_is_statsmodels_analytic_hessian(tide_fit):
    import statsmodels.formula.api as smf

    from analysis.stats.crossed_reml import _CrossedReml

    frame, reference, _ = tide_fit
    design = smf.ols(_FORMULA, frame)
    model = _CrossedReml(design.endog, design.exog, codes(frame))
    params = reference.params_object  # fixed effects and unscaled variance ratios at the optimum
    expected, singular = statsmodels_reml(frame).hessian(params)
    assert not singular
    np.testing.assert_allclose(model.hessian(np.asarray(params.vcomp), params.fe_params), expected,
                               rtol=1e-9, atol=1e-9 * np.abs(expected).max())


def test_one_system_uses_the_condition_only_formula():
    ratings = tide_like(30, seed=5)
    ratings = ratings[ratings["model"] == ratings["model"].iloc[0]]
    frame = model_frame(ratings)
    reference, messages = statsmodels_fit(frame, "rating ~ C(condition)")
    assert messages == []
    table = S.mixed_model(ratings, **data.PAIR).set_index("term")
    assert list(table.index[:2]) == ["Intercept", "condition[fine-tuned]"]
    assert_same_fit(table["coef"].iloc[:2], table["se"].iloc[:2], table.loc[["var(item)", "var(participant)"], "coef"],
                    table.loc["var(residual)", "coef"], reference)


def test_a_fit_on_the_boundary_is_left_to_statsmodels():
    """statsmodels warns of a component under 0.01 (if to its caller's file) and its Hessian is unreliable there."""
    frame = model_frame(data.no_item_effect(seed=1))
    reference, _ = statsmodels_fit(frame)
    assert reference.vcomp[0] < 0.01
    assert ours(frame) is None
    table = S.mixed_model(data.no_item_effect(seed=1), **data.PAIR).set_index("term")
    assert table.loc["var(item)", "coef"] == reference.vcomp[0]  # statsmodels' own answer, to the bit
    np.testing.assert_array_equal(table["se"].iloc[:4].to_numpy(), reference.bse_fe.to_numpy())
    assert "boundary (singular) fit" in table["note"].iloc[0]


def test_an_unidentified_item_variance_is_left_to_statsmodels():
    """One item per condition x system cell: the fixed effects absorb the items, the likelihood is flat in
    var(item), and where Powell stops on it depends on the last bits of each evaluation."""
    rng = np.random.default_rng(4)
    rows = [{"participant_id": f"p{p}", "response_id": f"{system}-{condition}", "model": system, "condition": condition,
             "rating": float(np.clip(np.round(3 + rng.normal(0, 1)), 1, 5))}
            for p in range(40) for system in "AB" for condition in (data.PAIR["baseline"], data.PAIR["treatment"])]
    ratings = pd.DataFrame(rows)
    assert ours(model_frame(ratings)) is None
    reference, _ = statsmodels_fit(model_frame(ratings))
    table = S.mixed_model(ratings, **data.PAIR).set_index("term")
    assert table.loc["var(item)", "coef"] == reference.vcomp[0]  # statsmodels' own answer, to the bit
    np.testing.assert_array_equal(table["se"].iloc[:4].to_numpy(), reference.bse_fe.to_numpy())
