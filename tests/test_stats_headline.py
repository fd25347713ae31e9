"""The seed reports' headline tables, checked against a second computation (issue 26, item 3).

``demographics_table`` (TIDE's Table 3) against counts made with a Counter and
the statistics module; ``reference_vs_systems`` (the Indiana report's human
versus AI comparison) against trials counted with loops, the exact binomial
p-value summed from ``scipy.stats.binom.pmf`` and statsmodels' Wilson
interval. Then the three seed fixtures, answered by bots, show their headline
tables on the results page.
"""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from statsmodels.stats.proportion import proportion_confint

from analysis import stats as S
from analysis.stats.headline import NOT_ANSWERED, NUMBER_ROW, DemographicQuestion
from surveys.definition import PREFER_NOT
from tests.support import stats_data as data
from tests.support.researcher import fill_with_bots, finished_run, narrow_analyses

TOL = 1e-12
QUESTIONS = (
    DemographicQuestion("age", "number"),
    DemographicQuestion("sex", "choice", ("Female", "Male", "Intersex")),
    DemographicQuestion("gender", "choice", ("Woman", "Man", "Non-binary")),
    DemographicQuestion("race", "choice", ("White or Caucasian", "Black or African American", "Asian")),
)


def binomial_p_by_hand(count: int, n: int, chance: float) -> float:
    """Two-sided exact p: the probability of every outcome no likelier than the one observed."""
    pmf = stats.binom.pmf(np.arange(n + 1), n, chance)
    return float(min(1.0, pmf[pmf <= pmf[count] * (1 + 1e-7)].sum()))


# --------------------------------------------------------------------------- demographics


def test_the_demographics_table_counts_every_answer_as_a_counter_does():
    people = data.make_participants(116, seed=4)
    table = S.demographics_table(people, demographic_questions=QUESTIONS)
    total = len(people)
    assert (table["n_participants"] == total).all()
    for question in QUESTIONS[1:]:
        rows = table[table["question"] == question.key]
        counts = Counter(people[question.key])
        expected_order = [*question.choices,
                          *sorted((a for a in counts if a not in question.choices and a != PREFER_NOT),
                                  key=lambda a: (-counts[a], a)), PREFER_NOT]
        assert rows["answer"].tolist() == expected_order
        assert rows["n"].tolist() == [counts.get(answer, 0) for answer in expected_order]
        assert rows["percent"].tolist() == pytest.approx([100 * counts.get(a, 0) / total for a in expected_order],
                                                         abs=TOL)
        assert rows["percent"].sum() == pytest.approx(100, abs=1e-9)


def test_a_number_question_gets_mean_sd_and_range_of_the_numbers_only():
    people = data.make_participants(116, seed=4)
    table = S.demographics_table(people, demographic_questions=QUESTIONS[:1]).set_index("answer")
    numbers = []
    for answer in people["age"]:
        try:
            numbers.append(float(answer))
        except ValueError:
            pass
    row = table.loc[NUMBER_ROW]
    assert row["n"] == len(numbers)
    assert row["mean"] == pytest.approx(statistics.mean(numbers), abs=TOL)
    assert row["sd"] == pytest.approx(statistics.stdev(numbers), abs=TOL)
    assert (row["min"], row["max"]) == (min(numbers), max(numbers))
    unreadable = sum(a not in ("", PREFER_NOT) and not a.replace(".", "").isdigit() for a in people["age"])
    assert row["note"] == (f"{unreadable} answers are not numbers (left out)" if unreadable else "")
    assert table.loc[PREFER_NOT, "n"] == (people["age"] == PREFER_NOT).sum()
    assert table.loc[NOT_ANSWERED, "n"] == (people["age"] == "").sum()


def test_no_questions_or_no_participants_is_a_note():
    assert S.demographics_table(data.make_participants(3), demographic_questions=())["note"].iloc[0] == \
        "the study asks no demographic questions"
    empty = data.make_participants(3).iloc[:0]
    assert S.demographics_table(empty, demographic_questions=QUESTIONS)["note"].iloc[0] == "no retained participants"


# --------------------------------------------------------------------------- the reference against the systems


def most_least_frame(seed: int, sets: int = 60, size: int = 5) -> pd.DataFrame:
    """Choice sets of ``size`` sources, one of them the human; the human is picked least more often than chance."""
    rng = np.random.default_rng(seed)
    rows = []
    for s in range(sets):
        least = 0 if rng.random() < 0.6 else int(rng.integers(size))
        most = int(rng.choice([i for i in range(size) if i != least]))
        for i in range(size):
            rows.append({"participant_id": f"p{s // 3}", "block_id": f"B{s % 3}", "model": f"M{i}",
                         "condition": "human" if i == 0 else "llm", "response_id": f"B{s % 3}-{i}",
                         "best": i == most, "worst": i == least, "rating": np.nan, "rank": np.nan})
    return pd.DataFrame(rows)


def check_row(row: pd.Series, count: int, n: int, chance: float) -> None:
    assert (row["count"], row["n"]) == (count, n)
    assert row["chance"] == pytest.approx(chance, abs=TOL)
    assert row["share"] == pytest.approx(count / n, abs=TOL)
    low, high = proportion_confint(count, n, alpha=0.05, method="wilson")
    assert (row["ci_low"], row["ci_high"]) == pytest.approx((low, high), abs=1e-12)
    assert row["p"] == pytest.approx(binomial_p_by_hand(count, n, chance), rel=1e-9)


def test_most_and_least_of_the_reference_against_chance():
    ratings = most_least_frame(seed=2)
    table = S.reference_vs_systems(ratings, references=["human"]).set_index("measure")
    assert table.index.tolist() == ["most", "least"]
    sets: dict[tuple, dict[str, bool]] = defaultdict(dict)
    for row in ratings.itertuples():
        if row.condition == "human":
            sets[(row.participant_id, row.block_id)] = {"most": row.best, "least": row.worst}
    for measure in ("most", "least"):
        check_row(table.loc[measure], sum(s[measure] for s in sets.values()), len(sets), 1 / 5)
    assert table.loc["least", "p"] < 0.001  # the planted preference is found
    holm_by_hand = data.hand_holm(table["p"].tolist())
    assert table["p_holm"].tolist() == pytest.approx(holm_by_hand, abs=TOL)


def test_ranked_first_and_rated_higher_on_a_tide_shaped_study():
    participants = data.make_participants(20, seed=3)
    ratings = data.make_ratings(participants, seed=5)
    table = S.reference_vs_systems(ratings, references=["reference"])
    first = table[table["measure"] == "ranked_first"].iloc[0]
    wins, trials, chances = 0, 0, []
    for _, cells in ratings.dropna(subset=["rank"]).groupby(["participant_id", "block_id"]):
        if "reference" not in set(cells["condition"]):
            continue
        trials += 1
        chances.append(1 / len(cells))
        wins += cells.loc[cells["condition"] == "reference", "rank"].min() == cells["rank"].min()
    check_row(first, wins, trials, float(np.mean(chances)))
    higher = table[table["measure"] == "rated_higher"]
    for row in higher.itertuples():
        won = lost = 0
        for _, cells in ratings[ratings.get("dimension", "") == row.dimension].groupby(
                ["participant_id", "block_id"]) if "dimension" in ratings else ratings.groupby(
                ["participant_id", "block_id"]):
            reference = cells.loc[cells["condition"] == "reference", "rating"].dropna()
            if reference.empty:
                continue
            for other in cells.loc[cells["condition"] != "reference", "rating"].dropna():
                won += reference.mean() > other
                lost += reference.mean() < other
        check_row(pd.Series(row._asdict()), won, won + lost, 0.5)
    assert len(higher) == max(1, ratings.get("dimension", pd.Series([""])).nunique())


def test_too_few_trials_to_reach_significance_say_so():
    # One set of 5: a "least" pick of the human has p = 0.2 at best (two sets could reach 0.04).
    table = S.reference_vs_systems(most_least_frame(seed=1, sets=1), references=["human"])
    assert min(binomial_p_by_hand(k, 1, 0.2) for k in (0, 1)) > 0.05 > binomial_p_by_hand(2, 2, 0.2)
    assert table["note"].str.contains("1 trials: the test cannot reach p < 0.05").all()
    assert not S.reference_vs_systems(most_least_frame(seed=1), references=["human"])["note"].str.contains(
        "cannot reach").any()


def test_a_study_without_references_or_data_gets_a_note():
    assert S.reference_vs_systems(most_least_frame(1), references=[])["note"].iloc[0] == \
        "the study has no reference condition"
    table = S.reference_vs_systems(most_least_frame(1), references=["nobody"])
    assert table["note"].iloc[0] == "no response of nobody was judged" and np.isnan(table["p"].iloc[0])


# --------------------------------------------------------------------------- the fixtures' results pages

HEADLINES = {
    "tide": ("demographics_table", "reference_vs_systems", "win_table"),
    "counselor": ("demographics_table", "dimension_wilcoxon"),
    "most_least": ("reference_vs_systems", "best_worst_shares"),
}


@pytest.mark.django_db
@pytest.mark.parametrize("fixture", sorted(HEADLINES))
def test_each_seed_fixture_shows_its_authors_headline_tables(fixture, request, client, owner, monkeypatch):
    study = request.getfixturevalue(fixture)
    study.owners.add(owner)
    client.force_login(owner)
    fill_with_bots(study, 8, mix={"honest": 1.0})
    narrow_analyses(monkeypatch, HEADLINES[fixture] + ("win_summary", "sensitivity_win_table"))
    run = finished_run(study)
    page = client.get(f"/studies/{study.slug}/runs/{run.pk}/").content.decode()
    for name in HEADLINES[fixture]:
        assert f'id="t-{name}"' in page, name
    # No gold scores: the straight-lining rule flags no one, so its sensitivity table is not shown.
    assert 'id="t-sensitivity_win_table"' not in page
    tables = {t.name: t for t in run.tables.all()}
    if "demographics_table" in tables:
        table = tables["demographics_table"]
        rows = [dict(zip(table.columns, row)) for row in table.rows]
        kept = run.n_retained
        assert kept > 0 and all(r["n_participants"] == kept for r in rows)
        for question in {row["question"] for row in rows}:
            mine = [r for r in rows if r["question"] == question]
            # Every retained participant is on exactly one row of each question (mean (SD) counts the numbers).
            unreadable = sum(int(r["note"].split()[0]) for r in mine if r["note"].endswith("(left out)"))
            assert sum(r["n"] for r in mine) + unreadable == kept, question
            assert mine[-1]["answer"] in (PREFER_NOT, NOT_ANSWERED)
            assert PREFER_NOT in [r["answer"] for r in mine]
    if "dimension_wilcoxon" in tables:
        table = tables["dimension_wilcoxon"]
        levels = [dict(zip(table.columns, row))["level"] for row in table.rows]
        assert levels[0] in ("item", "rater_mean") and "crossed" in levels
