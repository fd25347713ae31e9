"""Degenerate but valid study data gets a note; a bug raises.

A real study can have no rows yet, one participant, constant ratings, ranking
or best-worst switched off, no gold scores, one condition only ... Each
analysis checks for these itself and says so in ``note``. Nothing turns an
exception into a table any more, so a wrong argument or a frame of the wrong
type raises where the caller sees it, instead of becoming a "could not run"
row that an analysis run would store as a result.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np
import pandas as pd
import pytest

from analysis import stats as S
from tests.support import stats_data as data

#: Every registered table's columns, as the analysis gives them when its input lacks every column it reads
#: (its "missing columns" note row, a code path of its own): a degenerate input still gets that whole shape.
COLUMNS = {
    name: list(data.run_registered(name, pd.DataFrame({"x": [1]}), pd.DataFrame({"y": [1]})).columns)
    for name in data.registered_analyses()
}
LABELS = ["participant_id", "block_id", "scenario", "response_id", "model", "condition", "dimension"]


@pytest.fixture(scope="module")
def people() -> pd.DataFrame:
    return data.make_participants(8, seed=3)


@pytest.fixture(scope="module")
def full(people) -> pd.DataFrame:
    return data.make_ratings(people, seed=4)


def ratings_frame_dtypes(ratings: pd.DataFrame) -> pd.DataFrame:
    """The labels as categoricals, as ``analysis.frames.ratings_frame`` gives them."""
    return ratings.assign(**{column: pd.Categorical(ratings[column].astype(object)) for column in LABELS})


#: name -> (ratings, participants) from the full study: data problems a real study can have.
DEGENERATE: dict[str, Callable[[pd.DataFrame, pd.DataFrame], tuple[pd.DataFrame, pd.DataFrame]]] = {
    "no ratings yet (ratings_frame dtypes)": lambda r, p: (ratings_frame_dtypes(r.iloc[:0]), p.iloc[:0]),
    "one participant": lambda r, p: (r[r["participant_id"] == p["participant_id"].iloc[0]], p),
    "one rating": lambda r, p: (r.iloc[:1], p),
    "constant ratings": lambda r, p: (r.assign(rating=3.0), p),
    "ranking only: no ratings": lambda r, p: (r.assign(rating=np.nan), p),
    "ranking off": lambda r, p: (r.assign(rank=np.nan), p),
    "no rank column": lambda r, p: (r.drop(columns=["rank"]), p),
    "no best or worst column": lambda r, p: (r.drop(columns=["best", "worst"]), p),
    "only zero-shot": lambda r, p: (r[r["condition"] == "zero-shot"], p),
    "only the reference": lambda r, p: (r[r["condition"] == "reference"], p),
    "nobody gave a region": lambda r, p: (r, p.assign(region="")),
    "no position": lambda r, p: (r.assign(position=np.nan), p),
}


def run(name: str, ratings: pd.DataFrame, participants: pd.DataFrame) -> pd.DataFrame:
    options = {"bradley_terry": {"n_boot": 2}, "mixed_model": {"max_rows": 600},
               "ordinal_model": {"max_rows": 600}}.get(name, {})
    return data.run_registered(name, ratings, participants, **options)


# ---------------------------------------------------------------------------
# Degenerate but valid data: a table with a note, never an exception
# ---------------------------------------------------------------------------


# The models ignore ranks, best-worst, regions and positions: those cases are ordinary (slow) fits for them.
MODEL_INPUTS_INTACT = {
    "no rank column", "no best or worst column", "ranking off", "nobody gave a region", "no position",
}
DEGENERATE_RUNS = [
    (name, case) for name in data.registered_analyses() for case in DEGENERATE
    if not (name in {"mixed_model", "ordinal_model"} and case in MODEL_INPUTS_INTACT)
]


@pytest.mark.parametrize("categorical", [False, True], ids=["object labels", "categorical labels"])
@pytest.mark.parametrize(("name", "case"), DEGENERATE_RUNS)
def test_it_returns_the_whole_table_on_degenerate_data(name, case, categorical, full, people):
    ratings, participants = DEGENERATE[case](full, people)
    table = run(name, ratings_frame_dtypes(ratings) if categorical else ratings, participants)
    assert list(table.columns) == COLUMNS[name]
    assert len(table) >= 1
    assert table["note"].map(lambda note: isinstance(note, str)).all()


#: (case, analysis, note that every row of the table carries).
EXPECTED_NOTES = [
    ("no ratings yet (ratings_frame dtypes)", "win_table", "no data"),
    ("no ratings yet (ratings_frame dtypes)", "bradley_terry", "no data"),
    ("one participant", "ttests", "fewer than 2 observations in a group"),
    ("one participant", "friedman", "needs at least 3 responses and 2 complete rankings"),
    ("one participant", "agreement", "no unit has two or more ratings"),
    ("one participant", "rater_loo", "no item rated by two or more raters"),
    ("one participant", "mixed_model", "fewer than 2 participants"),
    ("one participant", "ordinal_model", "fewer than 2 participants"),
    ("one participant", "position_bias", "needs at least 3 positions and 2 participants who saw all of them"),
    ("one participant", "anova", "fewer than 2 regions"),
    ("one rating", "wilcoxon", "model lacks a zero-shot or fine-tuned condition"),
    ("one rating", "bradley_terry", "every ranking holds one item"),
    ("constant ratings", "anova", "no variance within regions"),
    ("constant ratings", "welch_anova", "fewer than 2 usable regions"),
    ("constant ratings", "games_howell", "fewer than 2 usable regions"),
    ("constant ratings", "kruskal", "all values identical"),
    ("constant ratings", "wilcoxon", "no participant with both conditions differs"),
    ("constant ratings", "agreement", "all pairable ratings identical: alpha undefined"),
    ("constant ratings", "rater_loo", "constant ratings: correlation undefined"),
    ("constant ratings", "mixed_model", "all ratings identical"),
    ("constant ratings", "ordinal_model", "all ratings identical"),
    ("constant ratings", "position_bias", "no evidence of bias"),
    ("ranking only: no ratings", "win_table", "no zero-shot or fine-tuned ratings"),
    ("ranking only: no ratings", "win_summary", "no zero-shot or fine-tuned ratings"),
    ("ranking only: no ratings", "ttests", "no models or groupings"),
    ("ranking only: no ratings", "region_means", "no ratings from participants with a region"),
    ("ranking only: no ratings", "descriptives", "no ratings"),
    ("ranking only: no ratings", "wilcoxon", "no zero-shot or fine-tuned ratings"),
    ("ranking only: no ratings", "agreement", "no ratings"),
    ("ranking only: no ratings", "mixed_model", "no zero-shot or fine-tuned ratings"),
    ("ranking only: no ratings", "position_bias", "no rating with a position"),
    ("ranking off", "rank_summary", "no ranks (ranking off?)"),
    ("ranking off", "friedman", "no ranks (ranking off?)"),
    ("ranking off", "bradley_terry", "no complete rankings (ranking off?)"),
    ("no rank column", "rank_summary", "missing columns: rank"),
    ("no rank column", "friedman", "missing columns: rank"),
    ("no rank column", "bradley_terry", "missing columns: rank"),
    ("no best or worst column", "best_worst", "missing columns: best, worst"),
    ("only zero-shot", "win_table", "no ratings for fine-tuned, the references"),
    ("only zero-shot", "win_summary", "no decided comparisons"),
    ("only zero-shot", "wilcoxon", "model lacks a zero-shot or fine-tuned condition"),
    ("only zero-shot", "mixed_model", "only one condition"),
    ("only zero-shot", "ordinal_model", "only one condition"),
    ("only the reference", "bradley_terry", "every ranking holds one item: nothing was ranked above anything"),
    ("only the reference", "win_table", "no zero-shot or fine-tuned ratings"),
    ("nobody gave a region", "anova", "no ratings from participants with a region"),
    ("nobody gave a region", "games_howell", "no ratings from participants with a region"),
    ("nobody gave a region", "region_means", "no ratings from participants with a region"),
    ("no position", "position_bias", "no rating with a position"),
]


@pytest.mark.parametrize(("case", "name", "note"), EXPECTED_NOTES)
def test_it_says_why_a_degenerate_table_is_empty(case, name, note, full, people):
    table = run(name, *DEGENERATE[case](full, people))
    assert table["note"].str.contains(note, regex=False).all(), table["note"].unique()


def test_it_still_tests_the_models_with_both_conditions_when_one_model_lacks_one(full):
    # A model without fine-tuned ratings once raised KeyError('p') and lost the whole table.
    lacking = "Qwen2.5-3B"
    ratings = full[~((full["model"] == lacking) & (full["condition"] == "fine-tuned"))]
    table = S.paired_zs_ft(ratings, **data.PAIR).set_index("model")
    assert table.loc[lacking, "note"] == "model lacks a zero-shot or fine-tuned condition"
    assert np.isnan(table.loc[lacking, "p"]) and np.isnan(table.loc[lacking, "p_holm"])
    tested = table.drop(index=lacking)
    assert len(tested) == 7 and tested["p"].notna().all()
    # A model's only note is the one that says its few pairs cannot reach p < .05 (issue 26).
    small = tested["n_nonzero"] < 6
    assert (tested.loc[~small, "note"] == "").all()
    assert (tested.loc[small, "note"] == tested.loc[small, "n_nonzero"].map(
        "{} non-zero pairs: the test cannot reach p < 0.05".format)).all()
    assert (tested.loc[small, "p"] >= 0.0625).all()  # 2 / 2**5: the smallest two-sided exact p at n = 5
    assert tested["holm_family"].eq("dimension=empathy (across 8 models)").all()


def test_the_mixed_model_names_the_system_that_lacks_a_condition(full):
    lacking = "Llama-3.2-1B"
    ratings = full[~((full["model"] == lacking) & (full["condition"] == "zero-shot"))]
    table = S.mixed_model(**data.PAIR, ratings=ratings, max_rows=600)
    assert len(table) == 1
    assert table["note"].iloc[0].endswith(f"a system lacks a condition: {lacking}")


def test_the_ordinal_model_reports_ratings_that_a_term_separates_perfectly(full):
    # Half the systems always get 1, the others always 2: the system terms run off to infinity.
    systems = full[full["condition"] != "reference"]
    low = sorted(systems["model"].unique())[:4]
    table = S.ordinal_model(**data.PAIR, ratings=systems.assign(rating=np.where(systems["model"].isin(low), 1.0, 2.0)), max_rows=600)
    assert len(table) == 1
    assert "singular information matrix" in table["note"].iloc[0]


@pytest.mark.parametrize("gold_case", ["empty", "unmatched", "no score column", "constant"])
def test_it_notes_gold_scores_it_cannot_use(gold_case, full):
    gold = data.make_gold()
    gold, note = {
        "empty": (gold.iloc[:0], "no data"),
        "unmatched": (gold.assign(response_id="X" + gold["response_id"]), "no rated response has a gold score"),
        "no score column": (gold[["response_id"]], "missing columns: gold_score"),
        "constant": (gold.assign(gold_score=3.0), ""),
    }[gold_case]
    table = S.rater_judge_agreement(full, gold)
    assert list(table.columns) == S.JUDGE_COLUMNS
    if gold_case == "constant":
        assert table["r"].isna().all()
        assert set(table["note"]) == {"constant values: correlation undefined", "no rater with a defined correlation"}
    else:
        assert len(table) == 1 and table["note"].iloc[0] == note


def test_win_summary_passes_on_the_win_tables_note(full):
    win = S.win_table(full.assign(rating=np.nan), **data.WIN)
    assert S.win_summary(win, **data.PAIR)["note"].tolist() == ["no zero-shot or fine-tuned ratings"]


# ---------------------------------------------------------------------------
# Bugs: they raise
# ---------------------------------------------------------------------------


def test_no_analysis_is_wrapped_in_an_exception_catcher():
    for analysis in [*(a.function for a in data.registered_analyses().values()), S.win_table, S.win_summary, S.rater_judge_agreement, S.sensitivity]:
        assert not hasattr(analysis, "__wrapped__"), analysis


@pytest.mark.parametrize("name", [n for n, a in data.registered_analyses().items() if "ratings" in a.inputs])
def test_it_raises_when_the_ratings_are_not_a_frame(name, full, people):
    with pytest.raises(AttributeError, match="'dict' object has no attribute 'columns'"):
        run(name, full.to_dict("list"), people)


def test_a_subgroup_on_a_question_the_frame_lacks_gets_a_note(full, people):
    from analysis.design import Group, Subgroup

    tall = Subgroup("height", "height", Group("tall", at_least=180), Group("short", below=180))
    table = S.group_ttests(full, people, subgroups=[*data.subgroups_named("age"), tall])
    height = table[table["grouping"] == "height"]
    assert len(height) == 1 and height["note"].iloc[0] == "missing column: height"
    assert table[table["grouping"] == "age"]["p"].notna().any()


def test_it_raises_on_an_unknown_measurement_level(full):
    with pytest.raises(ValueError, match="unknown measurement level 'ranked'"):
        S.krippendorff_alpha(full, "ranked")


@pytest.mark.parametrize("analysis", [functools.partial(S.win_table, **data.WIN), S.position_bias])
def test_it_raises_on_ratings_read_as_text(analysis, full):
    with pytest.raises(TypeError):
        analysis(full.assign(rating=full["rating"].astype(str)))


def test_it_raises_on_ratings_read_as_text_with_participants(full, people):
    with pytest.raises(TypeError):
        S.regional_anova(full.assign(rating=full["rating"].astype(str)), people)


@pytest.mark.parametrize(("analysis", "options"), [
    (S.bradley_terry, {"n_boot": "200"}),
    (S.mixed_model, {"max_rows": "20000", **data.PAIR}),
    (S.ordinal_model, {"max_rows": "20000", **data.PAIR}),
])
def test_it_raises_on_an_option_of_the_wrong_type(analysis, options, full):
    with pytest.raises(TypeError, match="not supported between instances"):
        analysis(full, **options)


def test_it_raises_on_participants_listed_twice(full, people):
    with pytest.raises(pd.errors.InvalidIndexError):
        S.regional_anova(full, pd.concat([people, people]))


def test_sensitivity_raises_on_an_analysis_that_is_not_callable(full):
    with pytest.raises(TypeError, match="not callable"):
        S.sensitivity("descriptives", full, full)


def test_a_boundary_fit_of_the_mixed_model_says_so():
    table = S.mixed_model(**data.PAIR, ratings=data.no_item_effect(seed=1))
    item_variance = table.loc[table["term"] == "var(item)", "coef"].iloc[0]
    residual = table.loc[table["term"] == "var(residual)", "coef"].iloc[0]
    assert item_variance < 1e-6 * residual  # the situation: statsmodels says nothing about it
    assert "boundary (singular) fit: var(item) estimated at zero" in table["note"].iloc[0]


def test_a_mixed_model_fit_off_the_boundary_has_no_boundary_note():
    table = S.mixed_model(**data.PAIR, ratings=data.no_item_effect(seed=2))
    assert table.loc[table["term"] == "var(item)", "coef"].iloc[0] > 1e-3
    assert "boundary" not in table["note"].iloc[0]


def test_the_ordinal_model_is_converged_where_it_says_so():
    from statsmodels.miscmodels.ordinal_model import OrderedModel
    from statsmodels.tools.numdiff import approx_fprime

    from analysis.stats import regression

    table = S.ordinal_model(**data.PAIR, ratings=data.no_item_effect(seed=4))
    assert "not converged" not in table["note"].iloc[0]
    # The same model, built here, has a gradient of about zero at the reported estimates.
    frame = data.no_item_effect(seed=4).rename(columns={"model": "system"})
    # As the model sees it: the baseline is the condition's first level (the reference level).
    frame["condition"] = pd.Categorical(frame["condition"], categories=[data.PAIR["baseline"], data.PAIR["treatment"]])
    levels = np.sort(frame["rating"].unique())
    labels = [f"{level:g}" for level in levels]
    outcome = pd.Categorical(frame["rating"].map(dict(zip(levels, labels))), categories=labels, ordered=True)
    spec = OrderedModel.from_formula(regression._FORMULA, frame.assign(rating=outcome), distr="logit")
    cuts = table["term"].str.startswith(("cut", "log-increment"))
    params = np.concatenate([table.loc[~cuts, "coef"].to_numpy(), table.loc[cuts, "coef"].to_numpy()])
    gradient = approx_fprime(params, spec.loglike, centered=True)
    assert np.max(np.abs(gradient)) < regression.ORDINAL_GRADIENT_TOLERANCE * 10


def test_the_shapes_compared_are_the_tables_exported_shapes():
    # The reference shapes above come from the registry; a few, checked against the stats' own column lists.
    assert COLUMNS["win_table"] == list(S.WIN_COLUMNS) and COLUMNS["friedman"] == list(S.FRIEDMAN_COLUMNS)
    assert COLUMNS["mixed_model"] == COLUMNS["ordinal_model"] == list(S.MODEL_COLUMNS)
    assert all("note" in columns for columns in COLUMNS.values())
