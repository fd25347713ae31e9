"""Tests of analysis.stats against independent computations and planted effects.

Run without Django: ``python -m pytest -p no:django tests/test_stats.py``.
Every statistic is checked against scipy called directly or against a value
worked out by hand here, never against the function's own output.
"""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest
from scipy import optimize, stats

from analysis import stats as S
from tests.support import stats_data as data

TOL = 1e-9


@pytest.fixture(scope="module")
def synthetic_study() -> tuple[pd.DataFrame, pd.DataFrame]:
    """(ratings, participants) of a generated TIDE-like study with planted effects."""
    return data.make_study(120, seed=0)


@pytest.fixture(scope="module")
def ratings(synthetic_study) -> pd.DataFrame:
    return synthetic_study[0]


@pytest.fixture(scope="module")
def participants(synthetic_study) -> pd.DataFrame:
    return synthetic_study[1]


# ---------------------------------------------------------------------------
# Shared helpers
# ---------------------------------------------------------------------------


def test_it_applies_holm_not_holm_sidak():
    p = [0.01, 0.04, 0.03, 0.005]
    # By hand: .005*4=.02, .01*3=.03, .03*2=.06, .04*1=.04 -> raised to .06.
    assert S.holm(p) == pytest.approx([0.03, 0.06, 0.06, 0.02], abs=TOL)
    assert data.hand_holm(p) == pytest.approx([0.03, 0.06, 0.06, 0.02], abs=TOL)
    sidak_first = 1 - (1 - 0.005) ** 4
    assert S.holm(p)[3] != pytest.approx(sidak_first, abs=1e-6)


def test_it_computes_the_t_interval_like_scipy():
    values = np.array([2.0, 4, 4, 5, 1, 3.5])
    result = S.mean_ci(values)
    low, high = stats.t.interval(0.95, len(values) - 1, loc=values.mean(), scale=stats.sem(values))
    assert result["ci_low"] == pytest.approx(low, abs=TOL)
    assert result["ci_high"] == pytest.approx(high, abs=TOL)
    assert result["sd"] == pytest.approx(np.std(values, ddof=1), abs=TOL)


def test_it_builds_each_grouping_as_designed():
    people = pd.DataFrame({
        "participant_id": list("abcdef"),
        "age": ["61", "35", "", "Prefer not to answer", "70", "59"],
        "gender": ["Woman", "Man", "Non-binary", "Prefer not to answer", "Woman", ""],
        "race": ["White or Caucasian", "Asian", "Other/Unknown", "Black or African American", "", "White or Caucasian"],
        "education": ["Graduate or professional degree", "Bachelor's degree", "Prefer not to answer",
                      "Some college but no degree", "Graduate or professional degree", ""],
    })
    age, education, gender, race = data.SUBGROUPS
    assert S.participant_groups(people, age).to_dict() == {"a": "60+", "b": "under 60", "e": "60+", "f": "under 60"}
    assert S.participant_groups(people, gender).to_dict() == {"a": "Woman", "b": "Man", "e": "Woman"}
    assert S.participant_groups(people, race).to_dict() == {
        "a": "White or Caucasian", "b": "other", "d": "other", "f": "White or Caucasian",
    }
    assert S.participant_groups(people, education).to_dict() == {
        "a": "Graduate or professional degree", "b": "other", "d": "other", "e": "Graduate or professional degree",
    }


# ---------------------------------------------------------------------------
# Win table
# ---------------------------------------------------------------------------


def tiny_win_ratings() -> pd.DataFrame:
    """Two blocks of one scenario. Block Q1: A (zs 4, 4 / ft 2, 3), B (zs 3, 3 / ft 3, 3), ref 3.5, 3.5.
    Block Q2: C (zs 1, 1 / ft 5, 5), ref 5, 5 - which must not count for A or B."""
    rows = []
    for person, values in {"p1": [4, 2, 3, 3, 3.5, 1, 5, 5], "p2": [4, 3, 3, 3, 3.5, 1, 5, 5]}.items():
        layout = [("Q1", "A", "zero-shot"), ("Q1", "A", "fine-tuned"), ("Q1", "B", "zero-shot"),
                  ("Q1", "B", "fine-tuned"), ("Q1", "Ref", "reference"), ("Q2", "C", "zero-shot"),
                  ("Q2", "C", "fine-tuned"), ("Q2", "Ref", "reference")]
        for (block, model, condition), value in zip(layout, values):
            rows.append({"participant_id": person, "block_id": block, "scenario": "S1", "model": model,
                         "condition": condition, "rating": float(value)})
    return pd.DataFrame(rows)


def test_it_builds_the_win_table_from_a_hand_example():
    win = S.win_table(tiny_win_ratings(), **data.WIN).set_index("model")
    # A: zs 4, ft 2.5 -> zero-shot wins; reference 3.5 beats ft only -> 1 point.
    assert win.loc["A", ["zs_mean", "ft_mean", "reference_mean"]].tolist() == [4.0, 2.5, 3.5]
    assert win.loc["A", "winner"] == "zero-shot"
    assert win.loc["A", "reference_points"] == 1
    # B: 3 vs 3 -> tie; reference 3.5 beats both -> 2 points.
    assert win.loc["B", "winner"] == "tie"
    assert win.loc["B", "reference_points"] == 2
    # C: ft wins; the Q2 reference (5) ties ft and beats zs -> 1 point.
    assert win.loc["C", "winner"] == "fine-tuned"
    assert win.loc["C", "reference_mean"] == 5.0
    assert win.loc["C", "reference_points"] == 1
    assert (win["n"] == 2).all()


def test_it_summarises_wins_per_scenario():
    summary = S.win_summary(S.win_table(tiny_win_ratings(), **data.WIN), **data.PAIR).iloc[0]
    assert summary["n_models"] == 3
    assert summary["zs_win_share"] == pytest.approx(1 / 3, abs=TOL)
    assert summary["ft_win_share"] == pytest.approx(1 / 3, abs=TOL)
    assert summary["ties"] == 1
    assert summary["reference_points_share"] == pytest.approx(4 / 6, abs=TOL)
    assert summary["win_split"] == "33.3% / 33.3%"


def test_it_keeps_the_design_columns_first(ratings, participants):
    design = {
        "win_table": ["model", "scenario", "zs_mean", "ft_mean", "winner", "reference_mean", "reference_points"],
        "ttests": ["grouping", "model", "level", "group_a", "group_b", "n_a", "n_b", "mean_a", "mean_b",
                   "sd_a", "sd_b", "t", "dof", "p", "p_holm", "cohen_d"],
        "anova": ["scenario", "factor", "level", "F", "df_between", "df_within", "p", "eta_squared"],
    }
    tables = {"win_table": S.win_table(ratings, **data.WIN), "ttests": S.group_ttests(ratings, participants, subgroups=data.SUBGROUPS),
              "anova": S.regional_anova(ratings, participants)}
    for name, columns in design.items():
        assert list(tables[name].columns[: len(columns)]) == columns
        assert "note" in tables[name].columns


def test_it_finds_the_reference_ahead_in_the_generated_win_table(ratings):
    win = S.win_table(ratings, **data.WIN)
    assert len(win) == 8 * 6
    # The reference is planted 0.8 above every system.
    assert (win["reference_points"] >= 1).all()
    assert win["reference_points"].mean() > 1.5


# ---------------------------------------------------------------------------
# Welch t-tests
# ---------------------------------------------------------------------------


def older_and_younger(participants: pd.DataFrame) -> tuple[set[str], set[str]]:
    """The generator's own age truth, minus the answers that leave a participant out."""
    older, younger = set(), set()
    for person, age in zip(participants["participant_id"], participants["age"]):
        if age in {"", "Prefer not to answer", "sixty"}:
            continue
        (older if data._is_older(age) else younger).add(person)
    return older, younger


def test_it_matches_scipy_welch_and_hand_cohen_d(ratings, participants):
    table = S.group_ttests(ratings, participants, subgroups=data.SUBGROUPS)
    older, younger = older_and_younger(participants)
    system = ratings[ratings["model"] == data.AGE_SYSTEM]
    means = system.groupby("participant_id")["rating"].mean()
    a = means[means.index.isin(older)].to_numpy()
    b = means[means.index.isin(younger)].to_numpy()
    expected = stats.ttest_ind(a, b, equal_var=False)
    pooled = np.sqrt(((len(a) - 1) * np.var(a, ddof=1) + (len(b) - 1) * np.var(b, ddof=1)) / (len(a) + len(b) - 2))
    row = table.query("grouping == 'age' and level == 'participant' and model == @data.AGE_SYSTEM").iloc[0]
    assert (row["n_a"], row["n_b"]) == (len(a), len(b))
    assert row["t"] == pytest.approx(expected.statistic, abs=TOL)
    assert row["dof"] == pytest.approx(expected.df, abs=TOL)
    assert row["p"] == pytest.approx(expected.pvalue, abs=TOL)
    assert row["cohen_d"] == pytest.approx((a.mean() - b.mean()) / pooled, abs=TOL)
    assert row["cohen_d"] > 0  # signed: 60+ rate this system higher

    rating_row = table.query("grouping == 'age' and level == 'rating' and model == @data.AGE_SYSTEM").iloc[0]
    a_all = system.loc[system["participant_id"].isin(older), "rating"].to_numpy()
    b_all = system.loc[system["participant_id"].isin(younger), "rating"].to_numpy()
    expected_all = stats.ttest_ind(a_all, b_all, equal_var=False)
    assert rating_row["n_a"] == len(a_all)
    assert rating_row["t"] == pytest.approx(expected_all.statistic, abs=TOL)
    assert rating_row["p"] == pytest.approx(expected_all.pvalue, abs=1e-12)


def test_it_runs_welch_not_student_when_groups_are_equal_in_size():
    ratings = pd.DataFrame({"participant_id": list("abcdefgh"), "model": "M",
                            "rating": [1.0, 1.1, 0.9, 1.0, 2.0, 6.0, -3.0, 4.0]})
    people = pd.DataFrame({"participant_id": list("abcdefgh"), "gender": ["Woman"] * 4 + ["Man"] * 4})
    row = S.group_ttests(ratings, people, subgroups=data.subgroups_named("gender"), levels=["participant"]).iloc[0]
    welch = stats.ttest_ind([1.0, 1.1, 0.9, 1.0], [2.0, 6.0, -3.0, 4.0], equal_var=False)
    assert row["dof"] == pytest.approx(welch.df, abs=TOL)
    assert row["dof"] != pytest.approx(6.0, abs=1e-3)  # Student would give n_a + n_b - 2


def test_it_finds_the_planted_age_effect_and_not_the_null_ones(ratings, participants):
    table = S.group_ttests(ratings, participants, subgroups=data.SUBGROUPS)
    age = table.query("grouping == 'age' and level == 'participant'").set_index("model")
    assert age.loc[data.AGE_SYSTEM, "p_holm"] < 0.05
    nulls = age.drop(index=data.AGE_SYSTEM)
    assert (nulls["p_holm"] < 0.05).sum() <= 1
    # Participant leniency is shared by all models, so a chance imbalance in one
    # null grouping shows up in several models at once; expect at most one such grouping.
    others = table.query("grouping != 'age' and level == 'participant'")
    groupings_with_hits = others.loc[others["p_holm"] < 0.05, "grouping"].nunique()
    assert groupings_with_hits <= 1


def test_it_applies_holm_within_grouping_and_level(ratings, participants):
    table = S.group_ttests(ratings, participants, subgroups=data.SUBGROUPS)
    assert len(table) == 4 * 2 * 9  # 4 groupings x 2 levels x 9 models (the reference is a model)
    for _, family in table.groupby(["grouping", "level"]):
        assert family["p_holm"].tolist() == pytest.approx(data.hand_holm(family["p"].tolist()), abs=TOL)
        assert family["holm_family"].nunique() == 1


def test_it_reports_small_groups_instead_of_raising():
    ratings = pd.DataFrame({"participant_id": ["a", "b", "c"], "model": "M", "rating": [1.0, 2, 3]})
    people = pd.DataFrame({"participant_id": ["a", "b", "c"], "gender": ["Woman", "Woman", "Man"]})
    row = S.group_ttests(ratings, people, subgroups=data.subgroups_named("gender"), levels=["participant"]).iloc[0]
    assert np.isnan(row["t"])
    assert "fewer than 2" in row["note"]
    assert (row["n_a"], row["n_b"]) == (2, 1)


# ---------------------------------------------------------------------------
# Regional analyses
# ---------------------------------------------------------------------------


def regional_groups(ratings, participants, scenario, level):
    """Independent construction of the regional groups."""
    regions = dict(zip(participants["participant_id"], participants["region"]))
    cells = ratings[ratings["scenario"] == scenario].assign(region=lambda f: f["participant_id"].map(regions))
    cells = cells[cells["region"] != ""]
    if level == "participant":
        cells = cells.groupby(["participant_id", "region"], as_index=False)["rating"].mean()
    return {name: frame["rating"].to_numpy() for name, frame in cells.groupby("region")}


def test_it_matches_scipy_f_oneway_and_hand_eta_squared(ratings, participants):
    table = S.regional_anova(ratings, participants)
    for level in ("participant", "rating"):
        groups = regional_groups(ratings, participants, data.REGION_SCENARIO, level)
        arrays = list(groups.values())
        expected = stats.f_oneway(*arrays)
        pooled = np.concatenate(arrays)
        ss_between = sum(len(g) * (g.mean() - pooled.mean()) ** 2 for g in arrays)
        ss_within = sum(((g - g.mean()) ** 2).sum() for g in arrays)
        row = table.query("scenario == @data.REGION_SCENARIO and level == @level").iloc[0]
        assert row["F"] == pytest.approx(expected.statistic, abs=TOL)
        assert row["p"] == pytest.approx(expected.pvalue, abs=1e-12)
        assert (row["df_between"], row["df_within"]) == (len(arrays) - 1, len(pooled) - len(arrays))
        assert row["eta_squared"] == pytest.approx(ss_between / (ss_between + ss_within), abs=TOL)
        assert row["n"] == len(pooled)


def test_it_finds_the_planted_regional_effect_only(ratings, participants):
    table = S.regional_anova(ratings, participants).query("level == 'participant'").set_index("scenario")
    assert table.loc[data.REGION_SCENARIO, "p_holm"] < 0.05
    assert (table.drop(index=data.REGION_SCENARIO)["p_holm"] >= 0.05).all()
    for _, family in S.regional_anova(ratings, participants).groupby("level"):
        assert family["p_holm"].tolist() == pytest.approx(data.hand_holm(family["p"].tolist()), abs=TOL)


def test_it_matches_welch_anova_by_hand(ratings, participants):
    groups = list(regional_groups(ratings, participants, data.REGION_SCENARIO, "participant").values())
    k = len(groups)
    n = np.array([len(g) for g in groups])
    m = np.array([g.mean() for g in groups])
    w = n / np.array([g.var(ddof=1) for g in groups])
    weighted_mean = (w * m).sum() / w.sum()
    lam = ((1 - w / w.sum()) ** 2 / (n - 1)).sum()
    f = ((w * (m - weighted_mean) ** 2).sum() / (k - 1)) / (1 + 2 * (k - 2) / (k**2 - 1) * lam)
    df_within = (k**2 - 1) / (3 * lam)
    row = S.regional_welch(ratings, participants).query(
        "scenario == @data.REGION_SCENARIO and level == 'participant'").iloc[0]
    assert row["F"] == pytest.approx(f, abs=1e-9)
    assert row["df_within"] == pytest.approx(df_within, abs=1e-9)
    assert row["p"] == pytest.approx(stats.f.sf(f, k - 1, df_within), abs=1e-12)
    assert row["p"] < 0.05


def test_it_matches_games_howell_by_hand(ratings, participants):
    groups = regional_groups(ratings, participants, data.REGION_SCENARIO, "participant")
    pairs = S.regional_games_howell(ratings, participants).query(
        "scenario == @data.REGION_SCENARIO and level == 'participant'")
    assert len(pairs) == 6
    for _, pair in pairs.iterrows():
        a, b = groups[pair["region_a"]], groups[pair["region_b"]]
        va, vb = a.var(ddof=1) / len(a), b.var(ddof=1) / len(b)
        t = (a.mean() - b.mean()) / np.sqrt(va + vb)
        df = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1))
        p = stats.studentized_range.sf(abs(t) * np.sqrt(2), 4, df)
        assert pair["t"] == pytest.approx(t, abs=TOL)
        assert pair["df"] == pytest.approx(df, abs=TOL)
        assert pair["p"] == pytest.approx(p, abs=1e-6)
        involves_top = data.TOP_REGION in (pair["region_a"], pair["region_b"])
        assert (pair["p"] < 0.05) == involves_top


def test_the_studentized_range_is_scipys_to_the_last_bit():
    """analysis.stats.studentized_range makes scipy's QUADPACK calls without nquad: the same bits, for
    random and edge inputs (outside the support, invalid shapes, NaN, the asymptotic form at huge df)."""
    from analysis.stats.studentized_range import studentized_range

    rng = np.random.default_rng(31)
    q = np.concatenate([rng.uniform(0, 9, 40), [0.0, -1.0, 1e-9, 25.0, np.inf, np.nan, 3.0, 3.0, 3.0, 3.0]])
    k = np.concatenate([rng.integers(2, 12, 40), [3, 3, 3, 3, 3, 3, 1, 2, 40, 4]]).astype(float)
    df = np.concatenate([rng.uniform(1.5, 400, 40), [10, 10, 10, 10, 10, 10, 10, 2e5, 7.5, 0.0]])
    for method in ("sf", "cdf"):
        ours, scipys = getattr(studentized_range, method)(q, k, df), getattr(stats.studentized_range, method)(q, k, df)
        assert np.array_equal(ours, scipys, equal_nan=True), method
    # Scalars and broadcasting, as pingouin calls it (one k, an array of df).
    assert studentized_range.sf(2.5, 4, 33.3) == stats.studentized_range.sf(2.5, 4, 33.3)
    assert np.array_equal(studentized_range.sf(q[:5], 4, df[:5]), stats.studentized_range.sf(q[:5], 4, df[:5]))


def test_pingouins_games_howell_gives_the_same_table_with_either(monkeypatch):
    import pingouin
    import pingouin.pairwise

    from analysis.stats.studentized_range import studentized_range, use_in_pingouin

    rng = np.random.default_rng(7)
    long = pd.DataFrame({"region": np.repeat(list("ABCDE"), [9, 14, 6, 11, 8]),
                         "value": rng.integers(1, 8, 48).astype(float)})
    monkeypatch.setattr(pingouin.pairwise, "studentized_range", stats.studentized_range)
    scipys = pingouin.pairwise_gameshowell(data=long, dv="value", between="region")
    use_in_pingouin()
    assert pingouin.pairwise.studentized_range is studentized_range
    pd.testing.assert_frame_equal(pingouin.pairwise_gameshowell(data=long, dv="value", between="region"), scipys,
                                  check_exact=True)


def test_it_matches_scipy_kruskal(ratings, participants):
    table = S.regional_kruskal(ratings, participants)
    for level in ("participant", "rating"):
        groups = list(regional_groups(ratings, participants, "S1", level).values())
        expected = stats.kruskal(*groups)
        row = table.query("scenario == 'S1' and level == @level").iloc[0]
        assert row["H"] == pytest.approx(expected.statistic, abs=TOL)
        assert row["p"] == pytest.approx(expected.pvalue, abs=TOL)
        assert row["epsilon_squared"] == pytest.approx(expected.statistic / (sum(map(len, groups)) - 1), abs=TOL)
    assert table.query("scenario == @data.REGION_SCENARIO")["p_holm"].max() < 0.05


def test_it_stars_the_top_region_only_when_the_lead_is_clear(ratings, participants):
    means = S.region_means(ratings, participants).query("level == 'participant'")
    groups = regional_groups(ratings, participants, "S1", "participant")
    row = means.query("scenario == 'S1' and region == 'South'").iloc[0]
    south = groups["South"]
    low, high = stats.t.interval(0.95, len(south) - 1, loc=south.mean(), scale=stats.sem(south))
    assert (row["n"], row["ci_low"], row["ci_high"]) == (len(south), pytest.approx(low, abs=TOL),
                                                         pytest.approx(high, abs=TOL))
    top = means[means["is_top"]].set_index("scenario")
    assert len(top) == 6
    assert top.loc[data.REGION_SCENARIO, "region"] == data.TOP_REGION
    assert bool(top.loc[data.REGION_SCENARIO, "top_significant"])
    assert not top.drop(index=data.REGION_SCENARIO)["top_significant"].any()
    assert not means.loc[~means["is_top"], "top_significant"].any()


def test_it_reports_a_constant_column_instead_of_raising():
    ratings = pd.DataFrame({"participant_id": list("abcd"), "scenario": "S1", "rating": 3.0})
    people = pd.DataFrame({"participant_id": list("abcd"), "region": ["West", "West", "South", "South"]})
    for analysis in (S.regional_anova, S.regional_welch, S.regional_kruskal, S.regional_games_howell):
        table = analysis(ratings, people)
        assert table["note"].str.len().gt(0).all(), analysis.__name__


# ---------------------------------------------------------------------------
# Descriptives and paired ZS vs FT
# ---------------------------------------------------------------------------


def test_it_matches_scipy_t_interval_in_descriptives(ratings):
    table = S.descriptives(ratings)
    assert len(table) == (8 * 2 + 1) * 6
    row = table.query("model == @data.FT_SYSTEM and condition == 'fine-tuned' and scenario == 'S2'").iloc[0]
    values = ratings.query("model == @data.FT_SYSTEM and condition == 'fine-tuned' and scenario == 'S2'")["rating"]
    low, high = stats.t.interval(0.95, len(values) - 1, loc=values.mean(), scale=stats.sem(values))
    assert row["n"] == len(values) == 120
    assert row["mean"] == pytest.approx(values.mean(), abs=TOL)
    assert row["ci_low"] == pytest.approx(low, abs=TOL)
    assert row["ci_high"] == pytest.approx(high, abs=TOL)


def test_it_matches_scipy_wilcoxon_and_hand_rank_biserial(ratings):
    table = S.paired_zs_ft(ratings, **data.PAIR).set_index("model")
    system = ratings[ratings["model"] == data.FT_SYSTEM]
    zs = system[system["condition"] == "zero-shot"].groupby("participant_id")["rating"].mean()
    ft = system[system["condition"] == "fine-tuned"].groupby("participant_id")["rating"].mean()
    expected = stats.wilcoxon(ft.to_numpy(), zs[ft.index].to_numpy())
    row = table.loc[data.FT_SYSTEM]
    assert row["W"] == pytest.approx(expected.statistic, abs=TOL)
    assert row["p"] == pytest.approx(expected.pvalue, abs=1e-15)
    assert row["p_holm"] < 0.05 and row["rank_biserial"] > 0.5
    assert row["median_ft"] == pytest.approx(np.median(ft), abs=TOL)
    nulls = table.drop(index=data.FT_SYSTEM)
    assert (nulls["p_holm"] < 0.05).sum() <= 1
    assert table["p_holm"].tolist() == pytest.approx(data.hand_holm(table["p"].tolist()), abs=TOL)


@pytest.mark.parametrize("seed", range(40))
def test_the_signed_rank_test_gives_scipys_wilcoxon_bit_for_bit(seed):
    # Mostly the tied and zero cases, where scipy runs its exact permutation test and the fast one
    # enumerates the same null; some without ties, and some over 13 pairs, where scipy itself is called.
    generator = np.random.default_rng(seed)
    size = int(generator.integers(1, 11)) if seed < 32 else int(generator.integers(12, 20))
    levels = generator.integers(-3, 4, size=size).astype(float) / 2
    differences = levels if seed % 8 else generator.normal(size=size)
    if not np.any(differences):
        differences[0] = 1.0
    expected = stats.wilcoxon(differences)
    assert S.signed_rank_test(differences) == (float(expected.statistic), float(expected.pvalue))


def test_the_signed_rank_test_of_a_hand_worked_case():
    # |d| 1, 2, 2, 1, 3 (the zero dropped) rank 1.5, 3.5, 3.5, 1.5, 5: W+ = 13.5, W- = 1.5. The exact p is
    # twice the share of the 32 sign flips whose W+ is at least 13.5 (flipping the zero changes nothing).
    differences = [1.0, 2.0, 2.0, -1.0, 0.0, 3.0]
    null = [sum(rank for rank, positive in zip([1.5, 3.5, 3.5, 1.5, 5.0], flips) if positive)
            for flips in itertools.product([0, 1], repeat=5)]
    by_hand = 2 * sum(value >= 13.5 for value in null) / len(null)
    assert S.signed_rank_test(differences) == (1.5, by_hand)


def test_it_computes_rank_biserial_by_hand():
    differences = [3.0, -1.0, 2.0, 2.0, 0.0, -4.0]
    # Non-zero |d| = 3, 1, 2, 2, 4 -> ranks 4, 1, 2.5, 2.5, 5; W+ = 9, W- = 6.
    assert S.rank_biserial(differences) == pytest.approx((9 - 6) / 15, abs=TOL)


def test_it_tests_each_dimension_separately():
    people = data.make_participants(20, seed=3)
    ratings = data.make_ratings(people, seed=4, dimensions=("resonance", "coherence"))
    table = S.paired_zs_ft(ratings, **data.PAIR)
    assert sorted(table["dimension"].unique()) == ["coherence", "resonance"]
    assert len(table) == 16
    assert table.groupby("dimension")["holm_family"].nunique().eq(1).all()


# ---------------------------------------------------------------------------
# Rankings
# ---------------------------------------------------------------------------


def test_it_summarises_ranks(ratings):
    table = S.rank_summary(ratings)
    per_response = table.query("unit == 'response'")
    assert len(per_response) == 120
    # Ranks are a permutation of 1..5 in each block, so each block's response means average 3.
    assert per_response.groupby("block_id")["mean_rank"].mean().to_numpy() == pytest.approx(np.full(24, 3.0))
    per_model = table.query("unit == 'model'").set_index("model")
    assert per_model["mean_rank"].idxmin() == data.REFERENCE_MODEL


def test_it_summarises_ranks_of_categorical_columns_as_ratings_frame_gives_them(ratings):
    labels = ["participant_id", "block_id", "scenario", "response_id", "model", "condition"]
    categorical = ratings.astype({column: "category" for column in labels})
    table = S.rank_summary(categorical)
    assert table["note"].eq("").all()
    pd.testing.assert_frame_equal(
        table.astype({column: object for column in ("response_id", "block_id", "scenario", "model", "condition")}),
        S.rank_summary(ratings).astype({"model": object}),
    )


def _identical_rankings(n: int) -> pd.DataFrame:
    return pd.DataFrame({"participant_id": np.repeat([f"p{i}" for i in range(n)], 3), "block_id": "Q1",
                         "scenario": "S1", "response_id": ["R1", "R2", "R3"] * n, "rank": [1.0, 2, 3] * n})


def test_friedman_says_when_too_few_rankings_cannot_reach_significance():
    # n identical rankings of 3: chi2 = n (k - 1) = 2n, the largest it can be, and with 2 df its tail is
    # exp(-chi2 / 2) (by hand): exp(-2) = 0.135 for n = 2, so no 2 rankings can give p < .05; exp(-3) = 0.0498 for 3.
    two = S.friedman_by_block(_identical_rankings(2)).iloc[0]
    assert two["chi2"] == pytest.approx(4.0) and two["p"] == pytest.approx(np.exp(-2.0))
    assert two["note"] == "2 complete rankings of 3: the test cannot reach p < 0.05"
    three = S.friedman_by_block(_identical_rankings(3)).iloc[0]
    assert three["p"] == pytest.approx(np.exp(-3.0)) and three["p"] < 0.05 and three["note"] == ""


def test_position_bias_says_when_too_few_participants_cannot_reach_significance():
    ratings = pd.DataFrame({"participant_id": np.repeat(["a", "b"], 3), "position": [1, 2, 3] * 2,
                            "rating": [5.0, 3, 1, 4, 2, 1]})
    test = S.position_bias(ratings).iloc[0]
    assert test["p"] == pytest.approx(np.exp(-2.0))  # both participants order the positions alike: chi2 = 4
    assert test["note"] == "2 participants over 3 positions: the test cannot reach p < 0.05"


def test_it_matches_scipy_friedman_per_block(ratings):
    table = S.friedman_by_block(ratings)
    block = ratings[ratings["block_id"] == "Q7"].pivot(index="participant_id", columns="response_id", values="rank")
    expected = stats.friedmanchisquare(*(block[c].to_numpy() for c in block.columns))
    row = table.set_index("block_id").loc["Q7"]
    assert row["chi2"] == pytest.approx(expected.statistic, abs=TOL)
    assert row["p"] == pytest.approx(expected.pvalue, abs=1e-15)
    assert row["kendall_w"] == pytest.approx(expected.statistic / (120 * 4), abs=TOL)
    assert table["p_holm"].tolist() == pytest.approx(data.hand_holm(table["p"].tolist()), abs=TOL)
    assert (table["p_holm"] < 0.05).all()  # the reference leads every block


def test_it_fits_plackett_luce_at_the_likelihood_maximum():
    rng = np.random.default_rng(5)
    true = np.array([1.0, 0.3, 0.0, -0.5])
    rankings = np.array([np.argsort(-(true + rng.gumbel(size=4)))[:3] for _ in range(300)])

    def negative_log_likelihood(free):
        theta = np.concatenate([[0.0], free])
        total = 0.0
        for ranking in rankings:
            for stage in range(len(ranking) - 1):
                total -= theta[ranking[stage]] - np.log(np.exp(theta[ranking[stage:]]).sum())
        return total

    fitted = optimize.minimize(negative_log_likelihood, np.zeros(3), method="BFGS", options={"gtol": 1e-10})
    theta = np.concatenate([[0.0], fitted.x])
    assert S.plackett_luce(rankings, 4) == pytest.approx(theta - theta.mean(), abs=1e-5)


def test_counted_rankings_give_the_fit_of_the_rankings_repeated():
    rng = np.random.default_rng(8)
    distinct = np.array([np.argsort(-rng.gumbel(size=4)) for _ in range(12)])
    counts = rng.integers(0, 5, len(distinct))
    repeated = np.repeat(distinct, counts, axis=0)
    assert S.plackett_luce(distinct, 4, counts=counts) == pytest.approx(S.plackett_luce(repeated, 4), abs=1e-12)


def test_the_bootstrap_of_plackett_luce_resamples_participants_with_all_their_rankings(ratings):
    """The CI, computed here the long way: each resample's rankings written out and fitted one by one."""
    from analysis.stats.rankings import _rankings_array

    table = S.bradley_terry(ratings, n_boot=25, seed=4).set_index(["model", "condition"])
    items = ratings[["model", "condition"]].drop_duplicates().sort_values(["model", "condition"])
    codes = pd.MultiIndex.from_frame(items).get_indexer(pd.MultiIndex.from_frame(ratings[["model", "condition"]]))
    rankings, owners = _rankings_array(ratings, "participant_id", "block_id", "rank", pd.Series(codes, ratings.index))
    estimate = S.plackett_luce(rankings, len(items))
    people = np.unique(owners)
    rng = np.random.default_rng(4)
    draws = []
    for _ in range(25):
        chosen = people[rng.integers(0, len(people), len(people))]
        sample = np.concatenate([rankings[owners == person] for person in chosen])
        draws.append(S.plackett_luce(sample, len(items), tol=1e-8, start=estimate))
    low, high = np.percentile(draws, [2.5, 97.5], axis=0)
    assert table["strength"].to_numpy() == pytest.approx(estimate, abs=1e-12)
    assert table["ci_low"].to_numpy() == pytest.approx(low, abs=1e-9)
    assert table["ci_high"].to_numpy() == pytest.approx(high, abs=1e-9)


@pytest.mark.parametrize("n_items, m, n_people", [(4, 2, 30), (5, 3, 6), (17, 5, 44), (9, 4, 3)])
def test_the_bootstrap_fits_side_by_side_are_the_one_by_one_fits_bit_for_bit(n_items, m, n_people, monkeypatch):
    """Each draw of the bootstrap's side-by-side fit equals plackett_luce on that draw alone, to the last bit:
    with 8 or more items (numpy sums those rows in another order) and with few people, where some draws leave
    an item out or without a win (fitted alone)."""
    from analysis.stats.rankings import _plackett_luce_draws

    rng = np.random.default_rng(n_items)
    worth = rng.normal(0, 1.5, n_items)
    rankings, owners = [], []
    for person in range(n_people):
        for _ in range(4):
            shown = rng.choice(n_items, m, replace=False)
            rankings.append(shown[np.argsort(-(worth[shown] + rng.gumbel(size=m)))])
            owners.append(person)
    distinct, which = np.unique(np.array(rankings), axis=0, return_inverse=True)
    per_person = np.zeros((n_people, len(distinct)))
    np.add.at(per_person, (np.array(owners), which.ravel()), 1.0)
    draws = np.array([np.bincount(rng.integers(0, n_people, n_people), minlength=n_people) for _ in range(40)])
    counts = draws @ per_person
    start = rng.normal(0, 0.5, n_items)
    one_by_one = np.array([S.plackett_luce(distinct, n_items, tol=1e-8, start=start, counts=row) for row in counts])
    side_by_side = _plackett_luce_draws(distinct, n_items, counts, tol=1e-8, start=start)
    assert np.array_equal(side_by_side, one_by_one, equal_nan=True)
    # In chunks of 7 draws (a large study's arrays are split so): the same.
    monkeypatch.setattr("analysis.stats.rankings._VALUES_PER_STEP", 7 * distinct.size)
    assert np.array_equal(_plackett_luce_draws(distinct, n_items, counts, tol=1e-8, start=start), one_by_one,
                          equal_nan=True)
    if n_people == 3:  # some draws left an item out: the test covers the draws fitted alone
        assert np.isnan(one_by_one).any()


def test_it_reproduces_bradley_terry_for_pairs():
    # A beats B 3 times, B beats A once: worth ratio 3, log-worths +-ln(3)/2.
    rankings = np.array([[0, 1], [0, 1], [0, 1], [1, 0]])
    assert S.plackett_luce(rankings, 2) == pytest.approx([np.log(3) / 2, -np.log(3) / 2], abs=1e-9)


def test_it_finds_the_planted_strengths_with_bootstrap_ci(ratings):
    table = S.bradley_terry(ratings, n_boot=40, seed=1).set_index(["model", "condition"])
    reference = table.loc[(data.REFERENCE_MODEL, "reference")]
    gained_ft = table.loc[(data.FT_SYSTEM, "fine-tuned")]
    gained_zs = table.loc[(data.FT_SYSTEM, "zero-shot")]
    assert gained_ft["ci_low"] > gained_zs["ci_high"]
    assert reference["strength"] > table.drop(index=[(data.REFERENCE_MODEL, "reference"),
                                                     (data.FT_SYSTEM, "fine-tuned")])["strength"].max()
    assert (table["ci_low"] <= table["strength"]).all() and (table["strength"] <= table["ci_high"]).all()
    assert table["worth"].sum() == pytest.approx(1.0)
    assert (table["n_rankings"] == 120 * 24).all() and (table["note"] == "").all()


def test_it_says_when_it_subsampled_the_rankings(ratings):
    table = S.bradley_terry(ratings, n_boot=0, max_rows=1200)
    assert table["note"].str.contains("subsampled 10 of 120 participants").all()
    assert (table["n_participants"] == 10).all()


# ---------------------------------------------------------------------------
# Best-worst
# ---------------------------------------------------------------------------


def test_it_scores_best_worst_on_a_hand_example():
    ratings = pd.DataFrame({
        "participant_id": ["a"] * 3 + ["b"] * 3 + ["c"] * 3,
        "block_id": "Q1", "model": ["X", "Y", "Z"] * 3, "condition": "zero-shot",
        "best": [True, False, False, True, False, False, False, True, False],
        "worst": [False, False, True, False, True, False, False, False, True],
    })
    table = S.best_worst_scores(ratings).set_index("model")
    assert table.loc["X", ["best", "worst", "best_minus_worst", "n_shown"]].tolist() == [2, 0, 2, 3]
    assert table.loc["Y", "best_minus_worst"] == 0
    assert table.loc["Z", "normalized"] == pytest.approx(-2 / 3, abs=TOL)
    assert (table["note"] == "").all()


def test_it_flags_sets_without_one_best_and_one_worst():
    ratings = pd.DataFrame({"participant_id": ["a", "a"], "block_id": "Q1", "model": ["X", "Y"],
                            "condition": "zero-shot", "best": [True, True], "worst": [False, False]})
    assert S.best_worst_scores(ratings)["note"].iloc[0].startswith("1 participant x block")


# ---------------------------------------------------------------------------
# Agreement
# ---------------------------------------------------------------------------

# Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability", the
# 4 observers x 12 units example with missing values.
KRIPPENDORFF_2011 = {
    "A": [1, 2, 3, 3, 2, 1, 4, 1, 2, None, None, None],
    "B": [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, None, 3],
    "C": [None, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, None],
    "D": [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, None],
}
PUBLISHED_ALPHA = {"nominal": 0.743, "ordinal": 0.815, "interval": 0.849, "ratio": 0.797}


def krippendorff_long() -> pd.DataFrame:
    rows = [{"participant_id": observer, "response_id": f"u{unit + 1}", "scenario": "S1" if unit < 6 else "S2",
             "rating": float(value)}
            for observer, values in KRIPPENDORFF_2011.items() for unit, value in enumerate(values)
            if value is not None]
    return pd.DataFrame(rows)


def brute_force_alpha(units: dict[str, list[float]], measurement: str) -> float:
    """alpha = 1 - D_o / D_e from its pairwise definition, looping over every pair of values."""
    pairable = {unit: values for unit, values in units.items() if len(values) >= 2}
    pooled = [value for values in pairable.values() for value in values]
    n = len(pooled)
    counts = {value: pooled.count(value) for value in set(pooled)}

    def delta(c, k):
        if measurement == "nominal":
            return float(c != k)
        if measurement == "interval":
            return (c - k) ** 2
        if measurement == "ratio":
            return ((c - k) / (c + k)) ** 2
        low, high = min(c, k), max(c, k)
        between = sum(count for value, count in counts.items() if low <= value <= high)
        return (between - (counts[c] + counts[k]) / 2) ** 2

    observed = sum(
        delta(a, b) / (len(values) - 1)
        for values in pairable.values() for a, b in itertools.permutations(values, 2)
    ) / n
    expected = sum(delta(a, b) for a, b in itertools.permutations(pooled, 2)) / (n * (n - 1))
    return 1 - observed / expected


@pytest.mark.parametrize("measurement", ["nominal", "ordinal", "interval", "ratio"])
def test_it_reproduces_krippendorffs_worked_example(measurement):
    long = krippendorff_long()
    table = S.krippendorff_alpha(long, level=measurement)
    overall = table.query("scenario == 'all'").iloc[0]
    units = long.groupby("response_id")["rating"].apply(list).to_dict()
    assert overall["alpha"] == pytest.approx(brute_force_alpha(units, measurement), abs=TOL)
    assert overall["alpha"] == pytest.approx(PUBLISHED_ALPHA[measurement], abs=5e-4)
    assert overall["n_units"] == 11 and overall["n_values"] == 40  # unit 12 has one value only
    per_scenario = table.query("scenario == 'S2'").iloc[0]
    scenario_units = long[long["scenario"] == "S2"].groupby("response_id")["rating"].apply(list).to_dict()
    assert per_scenario["alpha"] == pytest.approx(brute_force_alpha(scenario_units, measurement), abs=TOL)


def test_it_computes_alpha_overall_and_per_scenario_on_generated_data(ratings):
    table = S.krippendorff_alpha(ratings)
    assert table["scenario"].tolist() == ["all", "S1", "S2", "S3", "S4", "S5", "S6"]
    # The planted reference and FT effects make agreement clearly positive, noise keeps it below 1.
    assert 0.05 < table.iloc[0]["alpha"] < 0.9


def test_it_correlates_each_rater_with_the_others_left_out(ratings):
    table = S.rater_loo_correlation(ratings).set_index("participant_id")
    person = "P007"
    own = ratings[ratings["participant_id"] == person].set_index("response_id")["rating"]
    others = ratings[ratings["participant_id"] != person].groupby("response_id")["rating"].mean()
    expected = stats.spearmanr(own.to_numpy(), others[own.index].to_numpy())
    assert table.loc[person, "spearman_r"] == pytest.approx(expected.statistic, abs=TOL)
    assert table.loc[person, "n_items"] == 120
    assert (table["spearman_r"] > 0).mean() > 0.9
    # Every rater, r and p, against scipy called rater by rater.
    for rater, cells in ratings.groupby("participant_id"):
        others = ratings[ratings["participant_id"] != rater].groupby("response_id")["rating"].mean()
        expected = stats.spearmanr(cells["rating"].to_numpy(), others[cells["response_id"]].to_numpy())
        assert table.loc[rater, ["spearman_r", "p"]].tolist() == pytest.approx(
            [expected.statistic, expected.pvalue], rel=1e-9, abs=1e-300)


def test_it_correlates_raters_with_the_llm_judge(ratings):
    gold = data.make_gold()
    table = S.rater_judge_agreement(ratings, gold).set_index(["level", "method"])
    means = ratings.groupby("response_id")["rating"].mean()
    aligned = gold.set_index("response_id")["gold_score"][means.index]
    assert table.loc[("response", "spearman"), "r"] == pytest.approx(stats.spearmanr(means, aligned).statistic, abs=TOL)
    assert table.loc[("response", "pearson"), "p"] == pytest.approx(stats.pearsonr(means, aligned).pvalue, abs=1e-15)
    for method, correlate in (("spearman", stats.spearmanr), ("pearson", stats.pearsonr)):
        per_rater = [correlate(g["rating"], g["response_id"].map(gold.set_index("response_id")["gold_score"])).statistic
                     for _, g in ratings.groupby("participant_id")]
        assert table.loc[("rater", method), "r"] == pytest.approx(np.mean(per_rater), abs=TOL)
        assert table.loc[("rater", method), "n"] == len(per_rater)
    assert table.loc[("response", "spearman"), "r"] > 0.5


# ---------------------------------------------------------------------------
# Models
# ---------------------------------------------------------------------------


def balanced_design(seed: int = 7, n_participants: int = 12, *, gain: float = 1.5,
                    dimension: str = "empathy") -> pd.DataFrame:
    """Every participant rates 3 items in each of 2 systems x 2 conditions; FT of system B gains ``gain``."""
    rng = np.random.default_rng(seed)
    rows = []
    leniency = rng.normal(0, 0.5, n_participants)
    quality = rng.normal(0, 0.3, 12)
    for p in range(n_participants):
        for item in range(12):
            system, condition = ("A", "B")[item // 6], ("zero-shot", "fine-tuned")[(item // 3) % 2]
            planted = gain if (system, condition) == ("B", "fine-tuned") else 0.0
            rows.append({"participant_id": f"p{p}", "response_id": f"r{item}", "model": system,
                         "condition": condition, "dimension": dimension,
                         "rating": float(np.clip(np.round(3 + leniency[p] + quality[item] + planted
                                                          + rng.normal(0, 0.7)), 1, 5))})
    return pd.DataFrame(rows)


def test_it_fits_the_crossed_mixed_model(ratings):
    design = balanced_design()
    table = S.mixed_model(**data.PAIR, ratings=design).set_index("term")
    cell = design.groupby(["model", "condition"])["rating"].mean()
    # In a balanced crossed design GLS equals OLS: the fixed effects are cell-mean contrasts.
    assert table.loc["Intercept", "coef"] == pytest.approx(cell[("A", "zero-shot")], abs=1e-6)
    assert table.loc["condition[fine-tuned]", "coef"] == pytest.approx(
        cell[("A", "fine-tuned")] - cell[("A", "zero-shot")], abs=1e-6)
    assert table.loc["system[B]", "coef"] == pytest.approx(cell[("B", "zero-shot")] - cell[("A", "zero-shot")], abs=1e-6)
    interaction = table.loc["condition[fine-tuned]:system[B]"]
    assert interaction["coef"] == pytest.approx(
        cell[("B", "fine-tuned")] - cell[("B", "zero-shot")] - cell[("A", "fine-tuned")] + cell[("A", "zero-shot")],
        abs=1e-6)
    assert interaction["p"] < 0.05  # the planted gain
    assert interaction["ci_low"] == pytest.approx(interaction["coef"] - stats.norm.ppf(0.975) * interaction["se"])
    assert table.loc["var(participant)", "coef"] > 0
    assert (table["n_obs"] == len(design)).all() and (table["n_items"] == 12).all()


def _interaction_by_hand(design: pd.DataFrame) -> float:
    cell = design.groupby(["model", "condition"])["rating"].mean()
    return (cell[("B", "fine-tuned")] - cell[("B", "zero-shot")] - cell[("A", "fine-tuned")]
            + cell[("A", "zero-shot")])


def test_the_mixed_model_is_fitted_per_dimension_and_finds_a_gain_planted_on_the_second_only():
    empathy = balanced_design(seed=8, gain=0.0, dimension="empathy")
    coherence = balanced_design(seed=9, gain=1.5, dimension="coherence")
    table = S.mixed_model(**data.PAIR, ratings=pd.concat([empathy, coherence], ignore_index=True))
    assert sorted(table["dimension"].unique()) == ["coherence", "empathy"]
    term = "condition[fine-tuned]:system[B]"
    rows = table[table["term"] == term].set_index("dimension")
    # Each dimension's interaction is its own cell-mean contrast (balanced: GLS = OLS), worked from its rows only.
    assert rows.loc["empathy", "coef"] == pytest.approx(_interaction_by_hand(empathy), abs=1e-6)
    assert rows.loc["coherence", "coef"] == pytest.approx(_interaction_by_hand(coherence), abs=1e-6)
    assert rows.loc["coherence", "p"] < 0.05 and rows.loc["empathy", "p"] > 0.05
    assert (table.groupby("dimension")["n_obs"].first() == len(empathy)).all()


def test_it_subsamples_participants_for_the_mixed_model_and_says_so():
    design = balanced_design(n_participants=20)
    table = S.mixed_model(**data.PAIR, ratings=design, max_rows=120, seed=3)
    assert table["note"].str.contains("subsampled 10 of 20 participants").all()
    assert (table["n_obs"] == 120).all()


def test_it_matches_the_odds_ratio_with_the_ordinal_model():
    # Two categories and one binary predictor: ordered logit = logistic regression,
    # and the coefficient is the log odds ratio of the 2x2 table.
    ft_high, ft_low, zs_high, zs_low = 30, 10, 15, 25
    rows = []
    for condition, high, low in (("fine-tuned", ft_high, ft_low), ("zero-shot", zs_high, zs_low)):
        for i, value in enumerate([2.0] * high + [1.0] * low):
            rows.append({"participant_id": f"{condition}-{i}", "response_id": f"r-{condition}", "model": "A",
                         "condition": condition, "rating": value})
    table = S.ordinal_model(**data.PAIR, ratings=pd.DataFrame(rows)).set_index("term")
    log_odds_ratio = np.log((ft_high / ft_low) / (zs_high / zs_low))
    assert table.loc["condition[fine-tuned]", "coef"] == pytest.approx(log_odds_ratio, abs=1e-4)
    assert table.loc["cut 1/2", "coef"] == pytest.approx(np.log(zs_low / zs_high), abs=1e-4)
    assert table["note"].str.contains("SE clustered by participant").all()


def test_the_ordinal_model_is_fitted_per_dimension():
    # Two categories and one binary predictor per dimension: each coefficient is its own 2x2 log odds ratio.
    tables = {"coherence": (30, 10, 15, 25), "empathy": (20, 20, 10, 30)}
    rows = []
    for dimension, (ft_high, ft_low, zs_high, zs_low) in tables.items():
        for condition, high, low in (("fine-tuned", ft_high, ft_low), ("zero-shot", zs_high, zs_low)):
            for i, value in enumerate([2.0] * high + [1.0] * low):
                rows.append({"participant_id": f"{dimension}-{condition}-{i}", "response_id": f"r-{condition}",
                             "model": "A", "condition": condition, "dimension": dimension, "rating": value})
    table = S.ordinal_model(**data.PAIR, ratings=pd.DataFrame(rows))
    coefficients = table[table["term"] == "condition[fine-tuned]"].set_index("dimension")["coef"]
    for dimension, (ft_high, ft_low, zs_high, zs_low) in tables.items():
        assert coefficients[dimension] == pytest.approx(np.log((ft_high / ft_low) / (zs_high / zs_low)), abs=1e-4)


def test_it_finds_the_planted_gain_with_the_ordinal_model():
    table = S.ordinal_model(**data.PAIR, ratings=balanced_design(n_participants=30)).set_index("term")
    assert table.loc["condition[fine-tuned]:system[B]", "coef"] > 0
    assert table.loc["condition[fine-tuned]:system[B]", "p"] < 0.05


# ---------------------------------------------------------------------------
# Sensitivity and position bias
# ---------------------------------------------------------------------------


def test_it_stacks_sensitivity_variants(ratings, participants):
    straight_liner = ratings[ratings["participant_id"] == "P000"].assign(participant_id="SL", rating=3.0)
    without_rule = pd.concat([ratings, straight_liner], ignore_index=True)
    table = S.sensitivity(S.regional_anova, ratings, without_rule, participants)
    assert table.columns[0] == "variant"
    assert table["variant"].value_counts().tolist() == [12, 12]
    alone = S.regional_anova(ratings, participants)
    assert table.query("variant == 'with straight-lining rule'")["F"].tolist() == pytest.approx(alone["F"].tolist())


def test_it_tests_that_position_means_are_flat(ratings):
    table = S.position_bias(ratings)
    assert table["position"].tolist() == [1, 2, 3, 4, 5]
    assert (table["n"] == 120 * 24).all()
    means = ratings.pivot_table(index="participant_id", columns="position", values="rating", aggfunc="mean")
    expected = stats.friedmanchisquare(*(means[c].to_numpy() for c in means.columns))
    assert table["statistic"].iloc[0] == pytest.approx(expected.statistic, abs=TOL)
    assert table["p"].iloc[0] == pytest.approx(expected.pvalue, abs=1e-15)


def test_it_detects_a_planted_position_effect_and_mostly_not_a_null_one():
    null_significant = 0
    for seed in range(12):
        people = data.make_participants(30, seed=seed)
        null = data.make_ratings(people, seed=seed + 50)
        null_significant += S.position_bias(null)["p"].iloc[0] < 0.05
    assert null_significant <= 3
    biased = null.assign(rating=np.clip(null["rating"] + (null["position"] == 1) * 1.0, 1, 5))
    assert S.position_bias(biased)["p"].iloc[0] < 0.001


# ---------------------------------------------------------------------------
# Robustness and registry
# ---------------------------------------------------------------------------

#: The registered analyses that take the ratings (and participants) frames: each gets the tests below.
EXPECTED_ANALYSES = sorted(data.registered_analyses())


run = data.run_registered


def test_it_registers_every_exported_table():
    from analysis import registry

    analyses = data.registered_analyses()
    # The paper's tables and the families' main tests are among them (a registry entry lost is a failure here).
    assert {"win_table", "wilcoxon", "friedman", "bradley_terry", "agreement", "mixed_model", "ordinal_model",
            "dimension_wilcoxon", "anova", "ttests"} <= set(analyses)
    assert all(callable(analysis.function) for analysis in analyses.values())
    # Every computed table has its file's entry in the codebook (directly, or through the table it varies).
    from analysis.exporting.codebook import TABLE_COLUMNS

    described = {a.filename for a in registry.REGISTERED if a.filename in TABLE_COLUMNS or a.sensitivity_of}
    assert described == {a.filename for a in registry.REGISTERED}


@pytest.mark.parametrize("name", EXPECTED_ANALYSES)
def test_it_returns_a_note_row_on_an_empty_frame(name):
    empty_ratings = pd.DataFrame(columns=["participant_id", "block_id", "scenario", "response_id", "model",
                                          "condition", "dimension", "position", "rating", "rank", "best", "worst"])
    empty_people = pd.DataFrame(columns=["participant_id", "age", "gender", "race", "education", "region"])
    table = run(name, empty_ratings, empty_people)
    assert len(table) == 1
    assert table["note"].iloc[0] != ""


@pytest.mark.parametrize("name", EXPECTED_ANALYSES)
def test_it_returns_a_note_row_when_columns_are_missing(name):
    table = run(name, pd.DataFrame({"x": [1]}), pd.DataFrame({"y": [1]}))
    assert len(table) == 1 and "missing columns" in table["note"].iloc[0]


def test_it_never_mutates_its_inputs(synthetic_study):
    every_rating, participants = synthetic_study
    ratings = every_rating[every_rating["participant_id"].isin(["P001", "P002", "P003", "P004", "P005", "P006"])
                           & every_rating["block_id"].isin(["Q1", "Q2", "Q5", "Q6"])]
    ratings_before, participants_before = ratings.copy(), participants.copy()
    for name in EXPECTED_ANALYSES:
        options = {"n_boot": 2} if name == "bradley_terry" else {}
        table = run(name, ratings, participants, **options)
        assert "note" in table.columns and len(table) > 0, name
    pd.testing.assert_frame_equal(ratings, ratings_before)
    pd.testing.assert_frame_equal(participants, participants_before)


def test_the_design_tables_cover_every_dimension_with_a_dimension_column():
    people = data.make_participants(10, seed=8)
    ratings = data.make_ratings(people, seed=9, dimensions=("resonance", "coherence"))
    win = S.win_table(ratings, **data.WIN)
    assert len(win) == 96 and sorted(win["dimension"].unique()) == ["coherence", "resonance"]
    assert not win["note"].str.contains("only").any()
    for row in win.sample(6, random_state=0).itertuples():
        expected = ratings.query(f"dimension == '{row.dimension}' and model == '{row.model}' and "
                                 f"scenario == '{row.scenario}' and condition == 'fine-tuned'")["rating"].mean()
        assert row.ft_mean == pytest.approx(expected, abs=1e-12)
    summary = S.win_summary_of_ratings(ratings, **data.WIN)
    for row in summary.itertuples():
        cells = win[(win["dimension"] == row.dimension) & (win["scenario"] == row.scenario)]
        assert row.zs_wins == (cells["winner"] == data.WIN["baseline"]).sum()
    chosen = S.win_table(ratings, dimension="coherence", **data.WIN)
    expected = ratings.query("dimension == 'coherence' and model == 'Qwen2.5-3B' and scenario == 'S1' "
                             "and condition == 'zero-shot'")["rating"].mean()
    assert chosen.set_index(["model", "scenario"]).loc[("Qwen2.5-3B", "S1"), "zs_mean"] == pytest.approx(expected)


def test_it_states_the_holm_family_in_every_table_with_p_values(synthetic_study):
    every_rating, participants = synthetic_study
    ratings = every_rating[every_rating["participant_id"].isin(["P001", "P002", "P003", "P004", "P005", "P006"])
                           & every_rating["block_id"].isin(["Q1", "Q2", "Q5", "Q6"])]
    for name in EXPECTED_ANALYSES:
        if name in {"mixed_model", "ordinal_model"}:
            continue  # covered by the model tests; slow
        options = {"n_boot": 2} if name == "bradley_terry" else {}
        table = run(name, ratings, participants, **options)
        if "p" in table.columns:
            assert "holm_family" in table.columns, name
    assert "holm_family" in S.MODEL_COLUMNS  # mixed and ordinal models share these columns


def test_it_reports_a_missing_grouping_column_without_dropping_the_others(ratings, participants):
    table = S.group_ttests(ratings, participants.drop(columns=["race"]), subgroups=data.SUBGROUPS, levels=["participant"])
    race = table[table["grouping"] == "race"]
    assert len(race) == 1 and race["note"].iloc[0] == "missing column: race"
    assert (table["grouping"] == "age").sum() == 9
