"""The analyses of the two other seed designs, checked against a second computation.

The counselor design (a small panel rates every item on several dimensions,
baseline vs treatment): ``dimension_wilcoxon`` against ``scipy.stats.wilcoxon``
on pairs built here by plain loops, z, r and the rank-biserial by their
formulas, Holm by hand; Krippendorff's alpha per dimension against its
pairwise definition. The most/least design: ``best_worst_shares`` against
the Wilson formula and the chi-square statistic by hand; the bootstrap
interval of ``best_worst_scores`` against ``scipy.stats.bootstrap``.
Degenerate data gets a table with a note, never an exception.
"""

from __future__ import annotations

import itertools
import math
from collections import defaultdict

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from analysis import charts, frames, registry
from analysis import stats as S
from tests.support.researcher import fill_with_bots, finished_run, narrow_analyses
from tests.support.stats_data import hand_holm
from tests.test_stats import brute_force_alpha

TOL = 1e-9
DIMENSIONS = ("resonance", "coherence", "advice")
# Any names: nothing in the code knows them.
BASELINE, TREATMENT = "control", "tuned"
LABELS = ["participant_id", "block_id", "scenario", "response_id", "model", "condition", "dimension"]


def panel(*, raters: int = 3, blocks: int = 12, dimensions=DIMENSIONS, seed: int = 0,
          gains=(0.8, 0.0, -0.5)) -> pd.DataFrame:
    """Every rater rates both responses of every block on every dimension (1-5); the treatment gains per dimension."""
    rng = np.random.default_rng(seed)
    rows = []
    for rater, block in itertools.product(range(raters), range(blocks)):
        leniency = rng.normal(0, 0.4)
        for position, condition in enumerate(rng.permutation([BASELINE, TREATMENT]), start=1):
            for dimension, gain in zip(dimensions, gains):
                latent = 3 + leniency + (gain if condition == TREATMENT else 0) + rng.normal(0, 0.9)
                rows.append({"participant_id": f"r{rater}", "block_id": f"B{block}", "scenario": f"C{block}",
                             "response_id": f"B{block}-{condition}", "model": "Llama", "condition": condition,
                             "dimension": dimension, "position": position,
                             "rating": float(np.clip(np.round(latent), 1, 5))})
    return pd.DataFrame(rows)


def as_ratings_frame(ratings: pd.DataFrame) -> pd.DataFrame:
    """The labels as categoricals, as ``analysis.frames.ratings_frame`` gives them."""
    return ratings.assign(**{c: pd.Categorical(ratings[c].astype(object)) for c in LABELS if c in ratings})


def loop_pairs(ratings: pd.DataFrame, dimension: str, level: str) -> tuple[list[float], list[float]]:
    """(baseline, treatment) sides of the pairs, built with dicts and loops instead of pandas grouping."""
    cells: dict[tuple, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for row in ratings.itertuples():
        if row.dimension == dimension and row.condition in (BASELINE, TREATMENT) and not math.isnan(row.rating):
            cells[(row.participant_id, row.block_id)][row.condition].append(row.rating)
    pairs = {key: (np.mean(sides[BASELINE]), np.mean(sides[TREATMENT]))
             for key, sides in sorted(cells.items()) if sides[BASELINE] and sides[TREATMENT]}
    if level == "rater_item":
        return [b for b, _ in pairs.values()], [t for _, t in pairs.values()]
    per_unit: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for (rater, block), pair in pairs.items():
        per_unit[rater if level == "rater_mean" else block].append(pair)
    means = [(np.mean([b for b, _ in sides]), np.mean([t for _, t in sides])) for _, sides in sorted(per_unit.items())]
    return [b for b, _ in means], [t for _, t in means]


def signed_rank_by_hand(baseline: list[float], treatment: list[float]) -> dict[str, float]:
    """W+, W-, the tie-corrected z of W+ (no continuity correction) and the rank-biserial, from their formulas."""
    differences = [t - b for b, t in zip(baseline, treatment) if t != b]
    n = len(differences)
    ranks = stats.rankdata([abs(d) for d in differences])
    w_plus = sum(r for r, d in zip(ranks, differences) if d > 0)
    w_minus = sum(r for r, d in zip(ranks, differences) if d < 0)
    ties = sum(t ** 3 - t for t in np.unique(np.abs(differences), return_counts=True)[1])
    variance = n * (n + 1) * (2 * n + 1) / 24 - ties / 48
    z = (w_plus - n * (n + 1) / 4) / math.sqrt(variance)
    return {"n": n, "W": min(w_plus, w_minus), "z": z, "r": z / math.sqrt(n),
            "rank_biserial": (w_plus - w_minus) / (w_plus + w_minus)}


def wilcoxon(ratings: pd.DataFrame) -> pd.DataFrame:
    return S.dimension_wilcoxon(ratings, baseline=BASELINE, treatment=TREATMENT)


# ---------------------------------------------------------------------------
# Baseline vs treatment per dimension
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("level", S.PAIRING_LEVELS)
def test_it_matches_scipy_on_pairs_built_by_hand(level):
    ratings = panel(raters=4, blocks=15)
    table = wilcoxon(ratings).set_index(["level", "dimension"])
    for dimension in DIMENSIONS:
        row = table.loc[(level, dimension)]
        baseline, treatment = loop_pairs(ratings, dimension, level)
        expected = stats.wilcoxon(treatment, baseline)
        by_hand = signed_rank_by_hand(baseline, treatment)
        assert row["n_pairs"] == len(baseline) == {"rater_item": 60, "rater_mean": 4, "item": 15}[level]
        assert row["n_nonzero"] == by_hand["n"]
        assert row["W"] == pytest.approx(expected.statistic, abs=TOL) == pytest.approx(by_hand["W"], abs=TOL)
        assert row["p"] == pytest.approx(expected.pvalue, abs=TOL)
        assert row["z"] == pytest.approx(by_hand["z"], abs=TOL)
        assert row["r"] == pytest.approx(by_hand["r"], abs=TOL)
        assert row["rank_biserial"] == pytest.approx(by_hand["rank_biserial"], abs=TOL)
        assert row["median_baseline"] == pytest.approx(np.median(baseline), abs=TOL)
        assert row["median_treatment"] == pytest.approx(np.median(treatment), abs=TOL)
        assert row["median_difference"] == pytest.approx(np.median(np.subtract(treatment, baseline)), abs=TOL)
        assert row["mean_treatment"] == pytest.approx(np.mean(treatment), abs=TOL)
        assert row["sd_baseline"] == pytest.approx(np.std(baseline, ddof=1), abs=TOL)
        assert row["n_raters"] == 4
        assert (row["baseline"], row["treatment"]) == (BASELINE, TREATMENT)


def test_holm_runs_across_the_dimensions_within_each_level():
    table = wilcoxon(panel(raters=4, blocks=15))
    # 4 raters x 15 items: the item and crossed levels are valid and lead the table.
    assert table["level"].tolist() == ["item"] * 3 + ["crossed"] * 3 + ["rater_item"] * 3 + ["rater_mean"] * 3
    assert table["valid_for_design"].tolist() == [True] * 6 + [False] * 6
    for level, rows in table.groupby("level"):
        assert rows["p_holm"].tolist() == pytest.approx(hand_holm(rows["p"].tolist()), abs=TOL)
        assert (rows["holm_family"] == f"level={level} (across 3 dimensions)").all()


def test_it_finds_the_planted_gain_with_its_sign():
    table = wilcoxon(panel(raters=5, blocks=30, seed=2)).set_index(["level", "dimension"])
    gained, lost = table.loc[("rater_item", "resonance")], table.loc[("rater_item", "advice")]
    assert gained["p_holm"] < 0.001 and gained["z"] > 0 and gained["r"] > 0 and gained["rank_biserial"] > 0
    assert gained["median_difference"] >= 0
    assert lost["z"] < 0 and lost["rank_biserial"] < 0


def test_the_categorical_frame_gives_the_same_table():
    ratings = panel()
    pd.testing.assert_frame_equal(wilcoxon(as_ratings_frame(ratings)), wilcoxon(ratings), check_dtype=False)


def test_a_small_panel_is_told_that_its_rater_means_cannot_reach_significance():
    table = wilcoxon(panel(raters=3)).set_index(["level", "dimension"])
    note = table.loc[("rater_mean", "resonance"), "note"]
    n = table.loc[("rater_mean", "resonance"), "n_nonzero"]
    assert note == f"{n} non-zero pairs: the test cannot reach p < 0.05"
    # Two-sided exact p of n pairs all one way: 2 / 2**n, never below 0.05 with n < 6.
    assert stats.wilcoxon([1, 2, 3, 4, 5]).pvalue == pytest.approx(2 / 2 ** 5) and 2 / 2 ** 5 > 0.05


def test_one_dimension_and_no_dimension_column_give_one_row_per_level():
    ratings = panel(dimensions=("overall",), gains=(0.5,))
    for frame in (ratings, ratings.drop(columns=["dimension"])):
        table = wilcoxon(frame)
        assert table["level"].tolist() == ["item", "crossed", "rater_item", "rater_mean"]
        assert table["p_holm"].tolist() == pytest.approx(table["p"].tolist(), abs=TOL)
        assert (table["holm_family"].str.endswith("(across 1 dimensions)")).all()
    assert wilcoxon(ratings.drop(columns=["dimension"]))["dimension"].tolist() == ["", "", "", ""]


def test_a_rater_missing_a_condition_is_left_out_with_a_note():
    ratings = panel(raters=4)
    # r0 never saw the treatment; r1 lacks it in two blocks.
    lacking = (ratings["condition"] == TREATMENT) & (
        (ratings["participant_id"] == "r0") | ((ratings["participant_id"] == "r1") & ratings["block_id"].isin(["B0", "B1"])))
    table = wilcoxon(ratings[~lacking]).set_index(["level", "dimension"])
    for level, n_pairs in (("rater_item", 2 * 12 + 10), ("rater_mean", 3), ("item", 12)):
        row = table.loc[(level, "coherence")]
        assert row["n_pairs"] == n_pairs and row["n_raters"] == 3
        assert row["note"].startswith("14 rater x block cells lack control or tuned (left out); "
                                      "1 of 4 raters rated no block in both conditions")
        baseline, treatment = loop_pairs(ratings[~lacking], "coherence", level)
        assert row["p"] == pytest.approx(stats.wilcoxon(treatment, baseline).pvalue, abs=TOL)


def test_all_differences_zero_is_a_note_not_an_error():
    ratings = panel().assign(rating=3.0)
    table = wilcoxon(ratings)
    assert len(table) == 12
    assert table["note"].str.startswith("every difference is zero: no test").all()
    assert table[["W", "z", "t", "p", "p_holm", "r"]].isna().all().all()
    assert (table["median_difference"] == 0).all() and (table["n_nonzero"] == 0).all()


def test_one_dimension_still_tests_when_another_has_no_difference():
    ratings = panel(raters=4, blocks=15)
    table = wilcoxon(ratings.assign(rating=ratings["rating"].where(ratings["dimension"] != "advice", 3.0)))
    table = table.set_index(["level", "dimension"])
    assert np.isnan(table.loc[("rater_item", "advice"), "p"])
    tested = table.loc["rater_item"].drop(index="advice")
    assert tested["p"].notna().all()
    assert tested["p_holm"].tolist() == pytest.approx(hand_holm(tested["p"].tolist()), abs=TOL)


@pytest.mark.parametrize(("case", "note"), [
    ("no ratings yet", "no data"),
    ("only the baseline", "no rater rated a block in both conditions"),
    ("other conditions only", "no ratings of control or tuned"),
    ("no rating column", "missing columns: rating"),
    ("ratings off (best-worst study)", "no ratings of control or tuned"),
])
def test_degenerate_panels_get_a_note(case, note):
    ratings = panel()
    frame = {
        "no ratings yet": as_ratings_frame(ratings.iloc[:0]),
        "only the baseline": ratings[ratings["condition"] == BASELINE],
        "other conditions only": ratings.assign(condition="human"),
        "no rating column": ratings.drop(columns=["rating"]),
        "ratings off (best-worst study)": ratings.assign(rating=np.nan),
    }[case]
    table = wilcoxon(frame)
    assert list(table.columns) == S.DIMENSION_WILCOXON_COLUMNS
    assert table["note"].str.contains(note, regex=False).all(), table["note"].tolist()
    assert (table["baseline"] == BASELINE).all() and (table["treatment"] == TREATMENT).all()


def test_a_comparison_of_a_condition_with_itself_is_refused():
    with pytest.raises(ValueError, match="baseline and treatment are the same condition"):
        S.dimension_wilcoxon(panel(), baseline=BASELINE, treatment=BASELINE)


def test_its_condition_names_come_from_the_caller_only():
    with pytest.raises(TypeError, match="baseline"):
        S.dimension_wilcoxon(panel())


# ---------------------------------------------------------------------------
# Krippendorff's alpha per dimension, a small panel rating everything
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("measurement", ["ordinal", "interval"])
def test_alpha_per_dimension_of_a_panel_that_rates_everything(measurement):
    ratings = panel(raters=3, blocks=20)
    table = S.krippendorff_alpha(as_ratings_frame(ratings), measurement).query("scenario == 'all'")
    assert sorted(table["dimension"]) == sorted(DIMENSIONS)
    for row in table.itertuples():
        cells = ratings[ratings["dimension"] == row.dimension]
        units = cells.groupby("response_id")["rating"].apply(list).to_dict()
        assert row.alpha == pytest.approx(brute_force_alpha(units, measurement), abs=TOL)
        assert (row.n_units, row.n_raters, row.n_values, row.note) == (40, 3, 120, "")


def test_alpha_notes_a_dimension_everyone_rated_the_same_and_computes_the_others():
    ratings = panel(raters=3, blocks=20)
    ratings = ratings.assign(rating=ratings["rating"].where(ratings["dimension"] != "advice", 4.0))
    table = S.krippendorff_alpha(ratings).query("scenario == 'all'").set_index("dimension")
    assert table.loc["advice", "note"] == "all pairable ratings identical: alpha undefined"
    assert table.drop(index="advice")["alpha"].notna().all()


# ---------------------------------------------------------------------------
# Most/least shares
# ---------------------------------------------------------------------------

SOURCES = [("Human", "human"), ("A", "llm"), ("B", "llm"), ("C", "llm"), ("D", "llm")]


def choice_sets(picks: list[tuple[int, int]], sources=SOURCES, *, people: int = 4) -> pd.DataFrame:
    """One choice set per (most, least) pair of source indexes, dealt round-robin to ``people`` participants."""
    rows = []
    for index, (most, least) in enumerate(picks):
        for position, (model, condition) in enumerate(sources):
            rows.append({"participant_id": f"p{index % people}", "block_id": f"M{index // people}",
                         "model": model, "condition": condition, "position": position + 1,
                         "best": position == most, "worst": position == least})
    return pd.DataFrame(rows)


def wilson_by_hand(count: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    z = stats.norm.ppf(1 - (1 - confidence) / 2)
    share = count / n
    centre = (share + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(share * (1 - share) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return centre - half, centre + half


def chi_square_by_hand(counts: list[int]) -> tuple[float, float]:
    expected = sum(counts) / len(counts)
    statistic = sum((c - expected) ** 2 / expected for c in counts)
    return statistic, stats.chi2.sf(statistic, len(counts) - 1)


# 40 sets: the human picked most 20 times, D least 22 times.
PICKS = [(0, 4)] * 18 + [(0, 3)] * 2 + [(1, 4)] * 4 + [(2, 1)] * 6 + [(3, 0)] * 6 + [(4, 2)] * 4


def test_shares_and_wilson_intervals_match_the_formula():
    table = S.best_worst_shares(choice_sets(PICKS)).set_index(["model", "choice"])
    most = {"Human": 20, "A": 4, "B": 6, "C": 6, "D": 4}
    least = {"Human": 6, "A": 6, "B": 4, "C": 2, "D": 22}
    for choice, counts in (("most", most), ("least", least)):
        for model, count in counts.items():
            row = table.loc[(model, choice)]
            assert (row["count"], row["n_sets"], row["n_participants"]) == (count, 40, 4)
            assert row["share"] == pytest.approx(count / 40, abs=TOL)
            low, high = wilson_by_hand(count, 40)
            assert (row["ci_low"], row["ci_high"]) == (pytest.approx(low, abs=TOL), pytest.approx(high, abs=TOL))
            assert row["chance_share"] == pytest.approx(1 / 5, abs=TOL)


def test_the_equal_shares_test_is_the_chi_square_by_hand_with_holm_over_most_and_least():
    table = S.best_worst_shares(choice_sets(PICKS))
    p_values = {}
    for choice, counts in (("most", [20, 4, 6, 6, 4]), ("least", [6, 6, 4, 2, 22])):
        rows = table[table["choice"] == choice]
        statistic, p = chi_square_by_hand(counts)
        assert rows["chi2"].tolist() == pytest.approx([statistic] * 5, abs=TOL)
        assert rows["p"].tolist() == pytest.approx([p] * 5, rel=1e-9)
        assert (rows["df"] == 4).all() and (rows["note"] == "").all()
        p_values[choice] = p
    holm = dict(zip(p_values, hand_holm(list(p_values.values()))))
    for choice, adjusted in holm.items():
        assert table.loc[table["choice"] == choice, "p_holm"].tolist() == pytest.approx([adjusted] * 5, rel=1e-9)
    assert (table["holm_family"] == "the equal-shares tests (most, least)").all()


def test_the_denominator_is_the_sets_that_showed_the_source():
    # Source D is shown in the first 10 sets only; C and D are never picked.
    shown_all = choice_sets([(0, 1), (1, 0)] * 5, SOURCES)
    shown_four = choice_sets([(0, 1), (1, 0)] * 5, SOURCES[:4]).assign(block_id=lambda f: f["block_id"] + "x")
    table = S.best_worst_shares(pd.concat([shown_all, shown_four])).set_index(["model", "choice"])
    assert table.loc[("D", "most"), "n_sets"] == 10 and table.loc[("Human", "most"), "n_sets"] == 20
    assert table.loc[("Human", "most"), "share"] == pytest.approx(10 / 20)
    # Chance: 1/5 in the ten five-source sets, 1/4 in the ten four-source ones.
    assert table.loc[("Human", "most"), "chance_share"] == pytest.approx((10 / 5 + 10 / 4) / 20)
    assert table.loc[("D", "least"), "chance_share"] == pytest.approx(1 / 5)
    assert table["chi2"].isna().all()
    assert (table["note"] == "sources shown in different numbers of sets: equal counts are not the null, "
                             "no test").all()
    assert (table["holm_family"] == "none: no equal-shares test ran").all()


def test_a_single_source_gets_shares_and_a_note():
    ratings = choice_sets([(0, 0)] * 6, SOURCES[:1])
    table = S.best_worst_shares(ratings)
    assert table["share"].tolist() == [1.0, 1.0]
    assert table["ci_high"].tolist() == [1.0, 1.0]
    assert table["ci_low"].tolist() == pytest.approx([wilson_by_hand(6, 6)[0]] * 2, abs=TOL)
    assert (table["note"] == "one source: no test of equal shares").all()


def test_small_counts_are_flagged_and_zero_counts_keep_the_interval_in_bounds():
    table = S.best_worst_shares(choice_sets([(0, 4), (1, 4), (0, 3)])).set_index(["model", "choice"])
    never = table.loc[("B", "most")]
    assert never["count"] == 0 and never["ci_low"] == 0.0
    assert never["ci_high"] == pytest.approx(wilson_by_hand(0, 3)[1], abs=TOL)
    assert never["note"] == "expected count per source below 5: the chi-square p is approximate"


def test_a_study_without_picks_gets_notes():
    nobody = choice_sets(PICKS).assign(best=False, worst=False)
    table = S.best_worst_shares(nobody)
    assert (table["count"] == 0).all() and table["p"].isna().all()
    assert table.loc[table["choice"] == "most", "note"].str.endswith("no source was picked most: no test").all()
    missing = S.best_worst_shares(nobody.drop(columns=["best", "worst"]))
    assert missing["note"].tolist() == ["missing columns: best, worst"]
    empty = S.best_worst_shares(as_ratings_frame(nobody.iloc[:0]))
    assert list(empty.columns) == S.BEST_WORST_SHARES_COLUMNS and empty["note"].tolist() == ["no data"]


def test_categorical_labels_give_the_same_shares():
    plain = S.best_worst_shares(choice_sets(PICKS))
    categorical = S.best_worst_shares(as_ratings_frame(choice_sets(PICKS)))
    pd.testing.assert_frame_equal(categorical, plain, check_dtype=False, check_categorical=False)


# ---------------------------------------------------------------------------
# Best-worst scores with bootstrap intervals
# ---------------------------------------------------------------------------


def uneven_study(seed: int = 5, people: int = 40) -> pd.DataFrame:
    """Participants who each see a random number of sets (so the ratio differs from a mean of means)."""
    rng = np.random.default_rng(seed)
    weights = np.array([4.0, 2, 1.5, 1, 0.5])
    picks = []
    owners = []
    for person in range(people):
        for _ in range(int(rng.integers(2, 9))):
            order = rng.choice(5, 5, replace=False, p=weights / weights.sum())
            picks.append((int(order[0]), int(order[-1])))
            owners.append(person)
    ratings = choice_sets(picks, people=len(picks))  # one participant per set: p<set index>, block M0
    owner_of = {f"p{i}": f"person{owner}" for i, owner in enumerate(owners)}
    return ratings.assign(block_id=ratings["participant_id"], participant_id=ratings["participant_id"].map(owner_of))


def test_the_bootstrap_interval_agrees_with_scipys_percentile_bootstrap():
    ratings = uneven_study()
    table = S.best_worst_scores(ratings, n_boot=4000, seed=1).set_index("model")
    people = sorted(ratings["participant_id"].unique())
    for model in table.index:
        mine = ratings[ratings["model"] == model].groupby("participant_id")
        net = (mine["best"].sum() - mine["worst"].sum()).reindex(people).to_numpy(dtype=float)
        shown = mine.size().reindex(people).to_numpy(dtype=float)

        def score(index: np.ndarray) -> float:
            index = index.astype(int)
            return net[index].sum() / shown[index].sum()

        expected = stats.bootstrap((np.arange(len(people)),), score, vectorized=False, n_resamples=4000,
                                   method="percentile", rng=np.random.default_rng(7))
        row = table.loc[model]
        assert row["normalized"] == pytest.approx(score(np.arange(len(people))), abs=TOL)
        assert row["normalized_ci_low"] == pytest.approx(expected.confidence_interval.low, abs=0.03)
        assert row["normalized_ci_high"] == pytest.approx(expected.confidence_interval.high, abs=0.03)
        assert row["normalized_ci_low"] <= row["normalized"] <= row["normalized_ci_high"]
        assert row["n_boot"] == 4000


def test_the_bootstrap_is_seeded_and_can_be_switched_off():
    ratings = uneven_study()
    first, again = S.best_worst_scores(ratings, seed=3), S.best_worst_scores(ratings, seed=3)
    pd.testing.assert_frame_equal(first, again)
    other = S.best_worst_scores(ratings, seed=4)
    assert not np.allclose(first["normalized_ci_low"], other["normalized_ci_low"])
    off = S.best_worst_scores(ratings, n_boot=0)
    assert off[["normalized_ci_low", "normalized_ci_high"]].isna().all().all()
    assert off["normalized"].tolist() == first["normalized"].tolist()


def test_one_participant_gets_scores_without_an_interval():
    ratings = choice_sets(PICKS[:5], people=1)
    table = S.best_worst_scores(ratings)
    assert table[["normalized_ci_low", "normalized_ci_high"]].isna().all().all()
    assert (table["note"] == "fewer than 2 participants: no bootstrap interval").all()


def test_identical_participants_give_a_zero_width_interval():
    ratings = choice_sets([(0, 4)] * 6 + [(1, 3)] * 6, people=6)  # everyone: one (0, 4) set and one (1, 3) set
    table = S.best_worst_scores(ratings, n_boot=50).set_index("model")
    assert (table["normalized_ci_low"] == table["normalized"]).all()
    assert (table["normalized_ci_high"] == table["normalized"]).all()
    assert table.loc["Human", "normalized"] == pytest.approx(0.5)


# ---------------------------------------------------------------------------
# Registry, figure and the real frames
# ---------------------------------------------------------------------------


def test_the_registry_runs_them_for_the_designs_they_need(settings):
    comparison = {a.name for a in registry.statistics_analyses(design={"ratings", "comparison"})}
    choices = {a.name for a in registry.statistics_analyses(design={"best_worst"})}
    assert "dimension_wilcoxon" in comparison and "dimension_wilcoxon" not in choices
    assert {"best_worst", "best_worst_shares"} <= choices and "best_worst_shares" not in comparison
    assert registry.ANALYSES["dimension_wilcoxon"].design_options == ("baseline", "treatment", "complete_blocks")
    settings.ANALYSIS_BOOTSTRAP_SAMPLES = 33
    assert registry.options_from_settings(registry.ANALYSES["best_worst"]) == {"n_boot": 33}
    assert registry.figure_source("best_worst_shares").name == "best_worst_shares"


def test_the_shares_figure_is_drawn_from_the_registered_table():
    table = S.best_worst_shares(choice_sets(PICKS))
    figures = charts.results_figures({"best_worst_shares": table}, registry.figure_sources())
    assert set(figures) == {"best_worst_shares"}
    bars = [trace for trace in figures["best_worst_shares"]["data"] if trace["type"] == "bar"]
    assert [trace["name"] for trace in bars] == ["picked most", "picked least"]


@pytest.mark.django_db
def test_the_counselor_panels_frame_gives_a_row_per_dimension_and_level(counselor):
    fill_with_bots(counselor, 4, mix={"honest": 1.0})
    ratings = frames.ratings_frame(counselor.id)
    conditions = sorted(ratings["condition"].unique())
    table = S.dimension_wilcoxon(ratings, baseline="base", treatment="fine-tuned")
    dimensions = sorted(ratings["dimension"].unique())
    assert conditions == ["base", "fine-tuned"] and len(dimensions) == 3
    assert sorted(zip(table["level"], table["dimension"])) == sorted(itertools.product(S.TABLE_LEVELS, dimensions))
    blocks = ratings.groupby("participant_id", observed=True)["block_id"].nunique().sum()
    assert (table.loc[table["level"] == "rater_item", "n_pairs"] == blocks).all()
    assert (table.loc[table["level"] == "rater_mean", "n_pairs"] == 4).all()
    assert (table.loc[table["level"] == "item", "n_pairs"] == ratings["block_id"].nunique()).all()


@pytest.mark.django_db
def test_the_most_least_frame_gives_five_sources_shown_equally_often(most_least):
    fill_with_bots(most_least, 6, mix={"honest": 1.0})
    ratings = frames.ratings_frame(most_least.id)
    table = S.best_worst_shares(ratings)
    sets = ratings.groupby(["participant_id", "block_id"], observed=True).ngroups
    assert table["model"].nunique() == 5 and (table["n_sets"] == sets).all()
    for choice in ("most", "least"):
        rows = table[table["choice"] == choice]
        assert rows["count"].sum() == sets
        assert rows["chi2"].iloc[0] == pytest.approx(chi_square_by_hand(rows["count"].tolist())[0], abs=TOL)


@pytest.mark.django_db
def test_the_results_page_of_a_most_least_run_shows_the_shares_and_their_figure(client, most_least, owner,
                                                                                 monkeypatch):
    most_least.owners.add(owner)
    client.force_login(owner)
    fill_with_bots(most_least, 6, mix={"honest": 1.0})
    narrow_analyses(monkeypatch, ("best_worst", "best_worst_shares"))
    run = finished_run(most_least)
    response = client.get(f"/studies/{most_least.slug}/runs/{run.pk}/")
    page = response.content.decode()
    assert response.status_code == 200 and 'id="t-best_worst_shares"' in page and 'id="t-best_worst"' in page
    assert 'data-figure="best_worst_shares"' in page
    csv = client.get(f"/studies/{most_least.slug}/runs/{run.pk}/figures/best_worst_shares.csv")
    body = b"".join(csv.streaming_content).decode("utf-8-sig")
    assert csv.status_code == 200 and body.startswith("model,condition,choice,n_sets")
