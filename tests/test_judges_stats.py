"""The judges' agreement statistics (analysis/stats/judges.py), each figure checked against an independent
computation (scipy, the krippendorff package, sklearn's cohen_kappa_score), and on a generated study with a
planted judge: a judge whose scores are the people's mean plus noise of known correlation, and a planted
left-position bias in its pairwise verdicts; the analyses recover both."""

from __future__ import annotations

import krippendorff
import numpy as np
import pandas as pd
import pytest
from scipy import stats
from sklearn.metrics import cohen_kappa_score

from analysis.stats import judges as J

RHO, LEFT_BIAS = 0.7, 0.5  # the planted correlation; the share of verdicts that pick left whatever is shown
SYSTEMS, CONDITIONS = ["s1", "s2", "s3", "s4", "s5"], ["zs", "ft"]


@pytest.fixture(scope="module")
def planted():
    """400 responses (5 systems x 2 conditions x 40 scenarios), 6 people each, on a 1-7 scale; an LLM judge of
    planted correlation RHO with the people's mean; a judge that is one more person; a metric judge."""
    rng = np.random.default_rng(7)
    responses = pd.DataFrame([{"response_id": f"r{s}-{m}-{c}", "block_id": f"b{s}", "scenario": f"S{s % 4}",
                               "model": m, "condition": c}
                              for s in range(40) for m in SYSTEMS for c in CONDITIONS])
    quality = rng.normal(0, 1, len(responses)) + responses["model"].map(
        {m: k * 0.3 for k, m in enumerate(SYSTEMS)}).to_numpy() + np.where(responses["condition"] == "ft", 0.4, 0)
    people = []
    for person in range(6):
        values = np.clip(np.round(4 + quality + rng.normal(0, 0.8, len(responses))), 1, 7)
        people.append(responses.assign(participant_id=f"p{person}", dimension="empathy", rating=values))
    ratings = pd.concat(people, ignore_index=True)
    mean = ratings.groupby("response_id")["rating"].mean().reindex(responses["response_id"]).to_numpy()
    z = (mean - mean.mean()) / mean.std()
    noisy = RHO * z + np.sqrt(1 - RHO ** 2) * rng.normal(0, 1, len(z))
    person_like = np.clip(np.round(4 + quality + rng.normal(0, 0.8, len(responses))), 1, 7)
    judges = pd.concat([
        responses.assign(judge="llm-a", kind="llm", dimension="empathy", position=1, rating=noisy),
        responses.assign(judge="person-like", kind="other", dimension="empathy", position=1, rating=person_like),
        responses.assign(judge="rouge_l", kind="metric", dimension="empathy", position=1,
                         rating=mean / 7 + rng.normal(0, 0.2, len(z))),
    ], ignore_index=True)
    return ratings, judges[J.JUDGE_RATING_FIELDS]


def _means(ratings: pd.DataFrame, judges: pd.DataFrame, judge: str) -> pd.DataFrame:
    own = judges[judges["judge"] == judge].set_index("response_id")["rating"]
    return pd.DataFrame({"judge": own, "people": ratings.groupby("response_id")["rating"].mean()}).dropna()


def _row(table: pd.DataFrame, judge: str, level: str, method: str) -> pd.Series:
    rows = table[(table["judge"] == judge) & (table["level"] == level) & (table["method"] == method)]
    assert len(rows) == 1, (judge, level, method)
    return rows.iloc[0]


def test_response_level_correlations_equal_scipys_and_recover_the_planted_one(planted):
    ratings, judges = planted
    table = J.judge_response_agreement(ratings, judges, n_boot=300)
    assert list(table.columns) == J.AGREEMENT_COLUMNS
    both = _means(ratings, judges, "llm-a")
    for method, function in (("spearman", stats.spearmanr), ("kendall", stats.kendalltau),
                             ("pearson", stats.pearsonr)):
        row = _row(table, "llm-a", "response", method)
        expected = function(both["judge"], both["people"])
        assert row["estimate"] == pytest.approx(expected[0], abs=1e-12)
        assert row["p"] == pytest.approx(expected[1], rel=1e-9, abs=1e-300)
        assert row["n"] == 400 and row["ci_low"] < row["estimate"] < row["ci_high"]
    pearson = _row(table, "llm-a", "response", "pearson")
    assert pearson["estimate"] == pytest.approx(RHO, abs=0.07)  # the planted correlation, recovered
    # The percentile bootstrap CI is close to Fisher's z interval for n = 400.
    z, half = np.arctanh(pearson["estimate"]), 1.96 / np.sqrt(400 - 3)
    assert pearson["ci_low"] == pytest.approx(np.tanh(z - half), abs=0.03)
    assert pearson["ci_high"] == pytest.approx(np.tanh(z + half), abs=0.03)
    assert set(table["kind"]) == {"llm", "other", "metric"}  # metrics sit in the same table, as judges


def test_system_level_kendall_and_the_same_winner(planted):
    ratings, judges = planted
    table = J.judge_system_agreement(ratings, judges, baseline="zs", treatment="ft")
    paired = _means(ratings, judges, "llm-a").join(
        judges.drop_duplicates("response_id").set_index("response_id")[["model", "condition"]])
    systems = paired.groupby("model")[["judge", "people"]].mean()
    row = _row(table, "llm-a", "system", "kendall")
    assert row["estimate"] == pytest.approx(stats.kendalltau(systems["judge"], systems["people"])[0], abs=1e-12)
    assert row["n"] == 5
    cells = paired.groupby(["model", "condition"])[["judge", "people"]].mean().unstack("condition")
    same = ((cells["judge"]["ft"] > cells["judge"]["zs"]) == (cells["people"]["ft"] > cells["people"]["zs"])).mean()
    assert _row(table, "llm-a", "system", "same_winner")["estimate"] == pytest.approx(same)
    overall = _row(table, "person-like", "system", "same_study_winner")
    assert overall["estimate"] == 1.0 and overall["note"] == "judge: ft; people: ft"  # the planted ft advantage


def _matrix(long: pd.DataFrame) -> np.ndarray:
    return long.pivot_table(index="rater", columns="response_id", values="rating", aggfunc="first").to_numpy()


@pytest.mark.parametrize("level", ["ordinal", "interval"])
def test_alpha_with_and_without_the_judge_equals_the_krippendorff_package(planted, level):
    ratings, judges = planted
    table = J.judge_alpha(ratings, judges, level=level)
    people = ratings.rename(columns={"participant_id": "rater"})
    for judge in ("llm-a", "person-like"):
        own = judges[judges["judge"] == judge].rename(columns={"judge": "rater"})
        with_judge = pd.concat([people, own])[["rater", "response_id", "rating"]]
        assert _row(table, judge, "rater", "alpha_people")["estimate"] == pytest.approx(
            krippendorff.alpha(reliability_data=_matrix(people), level_of_measurement=level), abs=1e-9)
        assert _row(table, judge, "rater", "alpha_with_judge")["estimate"] == pytest.approx(
            krippendorff.alpha(reliability_data=_matrix(with_judge), level_of_measurement=level), abs=1e-9)
    # A judge that rates like one more person keeps alpha about where it was ("as good as one more person").
    people_alpha = _row(table, "person-like", "rater", "alpha_people")["estimate"]
    assert _row(table, "person-like", "rater", "alpha_with_judge")["estimate"] == pytest.approx(people_alpha, abs=0.02)
    assert np.isnan(_row(table, "rouge_l", "rater", "alpha_with_judge")["estimate"])


def test_leave_one_out_correlations_beside_each_persons(planted):
    ratings, judges = planted
    loo = J.judge_rater_loo(ratings, judges).set_index("rater")
    for person in ("p0", "p3"):
        own = ratings[ratings["participant_id"] == person].set_index("response_id")["rating"]
        others = ratings[ratings["participant_id"] != person].groupby("response_id")["rating"].mean()
        assert loo.loc[person, "spearman_r"] == pytest.approx(stats.spearmanr(own, others.reindex(own.index))[0])
    both = _means(ratings, judges, "llm-a")
    assert loo.loc["llm-a", "spearman_r"] == pytest.approx(stats.spearmanr(both["judge"], both["people"])[0])
    table = J.judge_alpha(ratings, judges)
    median = _row(table, "llm-a", "rater", "people_loo_spearman_median")
    persons = loo[loo["rater_kind"] == "person"]["spearman_r"]
    assert (median["estimate"], median["ci_low"], median["ci_high"], median["n"]) == (
        pytest.approx(persons.median()), persons.min(), persons.max(), 6)


@pytest.fixture(scope="module")
def pairwise_planted():
    """300 pairs, 5 people each with a clear majority for the better response; a judge asked every pair in both
    orders that picks left in LEFT_BIAS of its verdicts and the better response otherwise."""
    rng = np.random.default_rng(11)
    people, judge = [], []
    for k in range(300):
        a, b = f"r{k}a", f"r{k}b"
        better = a if rng.random() < 0.5 else b
        for person in range(5):
            left, right = (a, b) if rng.random() < 0.5 else (b, a)
            chosen = better if rng.random() < 0.8 else (a if better == b else b)
            people.append({"participant_id": f"p{person}", "block_id": f"b{k}", "left_response_id": left,
                           "right_response_id": right, "preference": "left" if chosen == left else "right"})
        for left, right in ((a, b), (b, a)):
            pick_left = rng.random() < LEFT_BIAS or better == left
            judge.append({"judge": "llm-a", "kind": "llm", "block_id": f"b{k}", "left_response_id": left,
                          "right_response_id": right, "preference": "left" if pick_left else "right"})
    return pd.DataFrame(people), pd.DataFrame(judge)


def test_cohen_kappa_equals_sklearns_and_the_planted_left_bias_is_recovered(pairwise_planted):
    people, judge = pairwise_planted
    table = J.judge_pairwise_agreement(people, judge, n_boot=200)
    # Independently: the people's majority (chosen response) per pair, and the judge's chosen response per order.
    chosen = lambda f: np.where(f["preference"] == "left", f["left_response_id"], f["right_response_id"])  # noqa: E731
    majority = people.assign(c=chosen(people)).groupby("block_id")["c"].agg(lambda s: s.mode().iloc[0])
    verdicts = judge.assign(c=chosen(judge))
    expected = cohen_kappa_score(verdicts["c"], majority.reindex(verdicts["block_id"]).to_numpy())
    kappa = _row(table, "llm-a", "pair", "cohen_kappa")
    assert kappa["estimate"] == pytest.approx(expected, abs=1e-12) and kappa["n"] == 600
    assert kappa["ci_low"] < kappa["estimate"] < kappa["ci_high"]
    left = _row(table, "llm-a", "position", "left_share")
    n_left = int((judge["preference"] == "left").sum())
    assert left["estimate"] == n_left / 600 and left["p"] == pytest.approx(stats.binomtest(n_left, 600).pvalue)
    # Planted: left half the time whatever, else the better one (left half the time): 0.5 + 0.5 x 0.5.
    assert left["estimate"] == pytest.approx(LEFT_BIAS + (1 - LEFT_BIAS) / 2, abs=0.04) and left["p"] < 1e-6
    # The same response in both orders only when the bias did not strike against it: about (1 - 0.5) + 0.5 x 0.5 ...
    consistency = _row(table, "llm-a", "position", "order_consistency")
    flips = verdicts.groupby("block_id")["c"].nunique()
    assert consistency["estimate"] == pytest.approx((flips == 1).mean()) and consistency["n"] == 300


def test_an_unbiased_judge_shows_no_position_bias(pairwise_planted):
    people, _ = pairwise_planted
    fair = people[people["participant_id"] == "p0"].assign(judge="fair", kind="llm")
    left = _row(J.judge_pairwise_agreement(people, fair, n_boot=0), "fair", "position", "left_share")
    assert left["ci_low"] < 0.5 < left["ci_high"]


def test_a_left_share_of_too_few_verdicts_says_its_test_cannot_reach_significance(pairwise_planted):
    people, judge = pairwise_planted
    # Five verdicts, all left: the smallest two-sided exact binomial p of 5 trials is 2 x 0.5**5 = 0.0625.
    five = judge[judge["block_id"].isin([f"b{k}" for k in range(5)])].drop_duplicates("block_id").assign(
        preference="left")
    left = _row(J.judge_pairwise_agreement(people, five, n_boot=0), "llm-a", "position", "left_share")
    assert left["n"] == 5 and left["p"] == pytest.approx(0.0625)
    assert left["note"] == "5 decisive verdicts: the test cannot reach p < 0.05"
    # Six can (2 x 0.5**6 = 0.03125): no note.
    six = judge[judge["block_id"].isin([f"b{k}" for k in range(6)])].drop_duplicates("block_id").assign(
        preference="left")
    left = _row(J.judge_pairwise_agreement(people, six, n_boot=0), "llm-a", "position", "left_share")
    assert left["p"] == pytest.approx(0.03125) and left["note"] == ""


def test_the_gathered_table_and_the_summary(planted, pairwise_planted):
    ratings, judges = planted
    people, judge = pairwise_planted
    table = J.judge_agreement(ratings, judges, people, judge.assign(judge="pair-judge"), baseline="zs",
                              treatment="ft", n_boot=50)
    assert list(table.columns) == J.AGREEMENT_COLUMNS
    assert set(table["level"]) == {"response", "system", "rater", "pair", "position"}
    assert not table.duplicated(["judge", "dimension", "level", "method"]).any()
    summary = J.judge_summary(judges, judge).set_index("judge")
    assert summary.loc["llm-a", "n_ratings"] == 400 and summary.loc["llm-a", "n_pairwise"] == 600
    assert summary.loc["rouge_l", "kind"] == "metric"
    empty = J.judge_agreement(ratings, judges.iloc[:0], people.iloc[:0], judge.iloc[:0])
    assert empty["note"].iloc[0] == "no judge answered the blocks people answered"
    nothing = pd.DataFrame()
    assert J.judge_rater_loo(nothing, nothing)["note"].iloc[0] == "people's ratings: missing columns: " \
        "participant_id, response_id, model, condition, rating"
    assert list(J.judge_win_table(nothing, baseline="zs", treatment="ft").columns) == J.JUDGE_WIN_COLUMNS


def test_a_judges_ranks_are_compared_with_the_peoples_mean_rank():
    rng = np.random.default_rng(3)
    rows, judge = [], []
    for block in range(30):
        quality = rng.normal(0, 1, 4)
        for person in range(5):
            ranks = np.argsort(np.argsort(-(quality + rng.normal(0, 0.7, 4)))) + 1
            rows += [{"participant_id": f"p{person}", "block_id": f"b{block}", "response_id": f"b{block}-{k}",
                      "model": f"s{k}", "condition": "zs" if k % 2 else "ft", "dimension": "", "rating": np.nan,
                      "rank": int(ranks[k])} for k in range(4)]
        own = np.argsort(np.argsort(-(quality + rng.normal(0, 0.7, 4)))) + 1
        judge += [{"judge": "ranker", "kind": "llm", "block_id": f"b{block}", "scenario": "S", "response_id":
                   f"b{block}-{k}", "model": f"s{k}", "condition": "zs" if k % 2 else "ft", "dimension": "rank",
                   "position": k + 1, "rating": float(own[k])} for k in range(4)]
    people, judges = pd.DataFrame(rows), pd.DataFrame(judge)
    table = J.judge_agreement(people, judges, pd.DataFrame(), pd.DataFrame(), baseline="zs", treatment="ft",
                              n_boot=0)
    mean_rank = people.groupby("response_id")["rank"].mean()
    own = judges.set_index("response_id")["rating"].reindex(mean_rank.index)
    row = _row(table, "ranker", "response", "spearman")
    assert row["dimension"] == "rank" and row["n"] == 120
    assert row["estimate"] == pytest.approx(stats.spearmanr(own, mean_rank)[0], abs=1e-12)


def test_the_judges_levels_figure_plots_every_measure_beyond_single_responses(planted, pairwise_planted):
    from analysis.charts import judge_levels_chart
    from analysis.registry import figure_source
    from tests.test_charts import _numbers

    ratings, judges = planted
    people, judge = pairwise_planted
    table = J.judge_agreement(ratings, judges, people, judge.assign(judge="pair-judge"), baseline="zs",
                              treatment="ft", n_boot=50)
    figure = judge_levels_chart(table)
    plotted = {(trace["name"], label): x for trace in figure["data"]
               for label, x in zip(trace["y"], _numbers(trace["x"]), strict=True)}
    expected = table[(table["level"] != "response") & table["estimate"].notna()]
    assert len(plotted) == len(expected) > 0
    for row in expected.itertuples():
        label = f"{row.judge} ({row.kind}) · {row.level}" + (f" · {row.dimension}" if row.dimension else "")
        assert plotted[(row.method, label)] == pytest.approx(row.estimate)
    assert {"cohen_kappa", "left_share", "alpha_with_judge", "kendall"} <= {name for name, _ in plotted}
    assert figure_source("judge_levels").name == "judge_agreement"
