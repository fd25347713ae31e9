"""The pairwise preference analyses (analysis.stats.pairwise) against independent computations, the pairwise
frame against the stored rows, and the pipeline feeding the analyses the retained participants' judgements.

Win rates and position bias are checked against counts made here row by row, Wilson intervals against the
formula written out, tests against scipy.stats.binomtest, Bradley-Terry strengths against a maximum-likelihood
fit written here with scipy.optimize; never against the functions' own output.
"""

from __future__ import annotations

import itertools
import math
import random

import numpy as np
import pandas as pd
import pytest
from scipy import optimize, stats

from analysis import frames, pipeline, registry
from analysis import stats as S
from analysis.design import study_design
from surveys.models import BlockVisit, ItemPlacement, Study
from tests.support.researcher import fill_with_bots
from tests.support.shared import in_process_tasks, rows_kept_until_exit
from tests.support.stats_data import hand_holm
from tests.support.studies import load_fixture

Z95 = stats.norm.ppf(0.975)


def hand_wilson(successes: int, n: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval written out."""
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return centre - half, centre + half


def judgements(rows: list[tuple[str, str, str, str, str, str]]) -> pd.DataFrame:
    """(participant, left model, left condition, right model, right condition, preference) -> a pairwise frame."""
    return pd.DataFrame(rows, columns=["participant_id", "left_model", "left_condition", "right_model",
                                       "right_condition", "preference"])


def planted(n_people: int, *, seed: int, left_bias: float = 0.0) -> pd.DataFrame:
    """Judgements of two systems x (base, tuned) plus a reference: reference > tuned > base, ties and both-bad."""
    rng = random.Random(seed)
    worth = {"base": 1.0, "tuned": 2.0, "ref": 4.0}
    pairs = [(("A", "base"), ("A", "tuned")), (("A", "tuned"), ("R", "ref")), (("A", "base"), ("R", "ref")),
             (("B", "base"), ("B", "tuned")), (("B", "tuned"), ("R", "ref")), (("B", "base"), ("R", "ref"))]
    rows = []
    for person, (first, second) in itertools.product(range(n_people), pairs * 2):
        left, right = (first, second) if rng.random() < 0.5 else (second, first)
        draw = rng.random()
        if draw < 0.1:
            verdict = "tie"
        elif draw < 0.15:
            verdict = "both_bad"
        else:
            p_left = worth[left[1]] / (worth[left[1]] + worth[right[1]]) + left_bias
            verdict = "left" if rng.random() < p_left else "right"
        rows.append((f"p{person}", *left, *right, verdict))
    return judgements(rows)


# --------------------------------------------------------------------------- win rates


def hand_tallies(data: pd.DataFrame, key) -> dict:
    """Per key of a side (a function of (model, condition)): [wins, losses, ties, both_bad], counted row by row.
    ``key`` returning None for both sides' equal keys leaves the row out."""
    counts: dict = {}
    for row in data.itertuples(index=False):
        left, right = key(row.left_model, row.left_condition), key(row.right_model, row.right_condition)
        if left == right:
            continue
        for side, other, won in ((left, right, "left"), (right, left, "right")):
            tally = counts.setdefault(side, [0, 0, 0, 0])
            if row.preference in ("left", "right"):
                tally[0 if row.preference == won else 1] += 1
            else:
                tally[2 if row.preference == "tie" else 3] += 1
    return counts


def test_win_rates_count_every_source_and_condition_as_counted_by_hand():
    data = planted(30, seed=1)
    table = S.pairwise_win_rates(data, baseline="base")
    for level, key in (("source", lambda m, c: (m, c)), ("condition", lambda m, c: c)):
        expected = hand_tallies(data, key)
        rows = table[table["level"] == level]
        assert len(rows) == len(expected)
        for row in rows.itertuples(index=False):
            wins, losses, ties, both_bad = expected[(row.model, row.condition) if level == "source" else row.condition]
            assert (row.wins, row.losses, row.ties, row.both_bad) == (wins, losses, ties, both_bad)
            assert row.comparisons == wins + losses + ties + both_bad and row.decisive == wins + losses
            assert row.win_rate == pytest.approx(wins / (wins + losses), abs=1e-12)
            assert (row.ci_low, row.ci_high) == pytest.approx(hand_wilson(wins, wins + losses), abs=1e-9)
            assert row.win_rate_ties_half == pytest.approx((wins + (ties + both_bad) / 2) / row.comparisons)
            assert np.isnan(row.p) and row.holm_family == "" and row.note == ""


def test_each_pair_of_conditions_gets_an_exact_binomial_test_holm_adjusted_across_pairs():
    data = planted(25, seed=2)
    table = S.pairwise_win_rates(data, baseline="base")
    pairs = table[table["level"] == "pair"]
    # The baseline is the opponent in every pair it is in.
    assert set(zip(pairs["condition"], pairs["opponent"])) == {("tuned", "base"), ("ref", "base"), ("ref", "tuned")}
    pvalues = []
    for row in pairs.itertuples(index=False):
        met = data[((data["left_condition"] == row.condition) & (data["right_condition"] == row.opponent))
            | ((data["left_condition"] == row.opponent) & (data["right_condition"] == row.condition))]
        won = ((met["left_condition"] == row.condition) & (met["preference"] == "left")) | (
            (met["right_condition"] == row.condition) & (met["preference"] == "right"))
        lost = ((met["left_condition"] == row.condition) & (met["preference"] == "right")) | (
            (met["right_condition"] == row.condition) & (met["preference"] == "left"))
        assert (row.wins, row.losses, row.comparisons) == (won.sum(), lost.sum(), len(met))
        expected = stats.binomtest(int(won.sum()), int(won.sum() + lost.sum()), 0.5).pvalue
        assert row.p == pytest.approx(expected, rel=1e-12)
        pvalues.append(expected)
    assert pairs["p_holm"].tolist() == pytest.approx(hand_holm(pvalues))
    assert (pairs["holm_family"] == "the 3 binomial tests of the condition pairs").all()
    # The planted order shows: the reference beats the baseline clearly.
    assert pairs.set_index("condition").loc["ref", "p"].min() < 0.001


def test_a_source_against_itself_and_two_sources_of_one_condition():
    data = judgements([("a", "A", "base", "A", "base", "left"),  # the same source twice: no information
                       ("a", "A", "base", "B", "base", "left"),  # one condition: counts for sources only
                       ("b", "A", "base", "B", "tuned", "right")])
    table = S.pairwise_win_rates(data)
    sources = table[table["level"] == "source"].set_index(["model", "condition"])
    assert sources.loc[("A", "base"), ["comparisons", "wins", "losses"]].tolist() == [2, 1, 1]
    assert sources.loc[("B", "base"), ["wins", "losses"]].tolist() == [0, 1]
    conditions = table[table["level"] == "condition"].set_index("condition")
    assert conditions.loc["base", ["comparisons", "wins", "losses"]].tolist() == [1, 0, 1]
    # Without a baseline the pair's conditions are in alphabetical order.
    assert table[table["level"] == "pair"][["condition", "opponent", "wins"]].values.tolist() == [["base", "tuned", 0]]


def test_win_rate_is_blank_without_a_decisive_judgement_and_bad_input_gives_a_note_row():
    only_ties = S.pairwise_win_rates(judgements([("a", "A", "x", "B", "y", "tie"), ("b", "A", "x", "B", "y", "oops")]))
    assert only_ties["win_rate"].isna().all() and only_ties["ci_low"].isna().all() and only_ties["p"].isna().all()
    assert (only_ties["win_rate_ties_half"] == 0.5).all()
    assert only_ties["note"].str.contains("1 judgements with a preference other than").all()
    assert only_ties["note"].str.contains("no decisive judgement").all()
    assert only_ties.loc[only_ties["level"] == "pair", "holm_family"].str.startswith("none: ").all()
    missing = S.pairwise_win_rates(pd.DataFrame({"participant_id": ["a"]}))
    assert list(missing.columns) == S.PAIRWISE_WIN_COLUMNS and missing["note"].iloc[0].startswith("missing columns")
    empty = S.pairwise_win_rates(judgements([]))
    assert len(empty) == 1 and empty["note"].iloc[0] == "no data"


# --------------------------------------------------------------------------- Bradley-Terry


def hand_bradley_terry(data: pd.DataFrame, side_key, alpha: float) -> dict:
    """Maximum of the Bradley-Terry log-likelihood (BFGS), with ``alpha`` pseudo-wins each way between every two
    items added to the decisive judgements' win counts; mean-zero log strengths by item."""
    decisive = data[data["preference"].isin(["left", "right"])]
    items = sorted({side_key(r.left_model, r.left_condition) for r in decisive.itertuples()}
                   | {side_key(r.right_model, r.right_condition) for r in decisive.itertuples()})
    code = {item: k for k, item in enumerate(items)}
    wins = np.full((len(items), len(items)), alpha) - alpha * np.eye(len(items))
    for r in decisive.itertuples():
        left, right = side_key(r.left_model, r.left_condition), side_key(r.right_model, r.right_condition)
        if left != right:
            winner, loser = (left, right) if r.preference == "left" else (right, left)
            wins[code[winner], code[loser]] += 1

    def minus_log_likelihood(free):
        s = np.append(free, 0.0)  # the last item fixed at 0: the likelihood only sees differences
        return -sum(wins[i, j] * (s[i] - np.logaddexp(s[i], s[j]))
                    for i in range(len(s)) for j in range(len(s)) if i != j)

    fit = optimize.minimize(minus_log_likelihood, np.zeros(len(items) - 1), method="BFGS",
                            options={"gtol": 1e-10})
    s = np.append(fit.x, 0.0)
    return dict(zip(items, s - s.mean()))


@pytest.mark.parametrize("alpha", [0.0, 0.1, 1.0])
def test_condition_strengths_are_the_maximum_likelihood_fit_anchored_to_the_baseline(alpha):
    data = planted(8, seed=3)
    table = S.pairwise_bradley_terry(data, baseline="base", n_boot=0, alpha=alpha)
    expected = hand_bradley_terry(data, lambda m, c: c, alpha)
    rows = table[table["level"] == "condition"].set_index("condition")
    for condition, strength in expected.items():
        assert rows.loc[condition, "strength"] == pytest.approx(strength - expected["base"], abs=1e-6)
        assert rows.loc[condition, "p_beats_baseline"] == pytest.approx(
            math.exp(strength) / (math.exp(strength) + math.exp(expected["base"])), abs=1e-6)
    assert rows.loc["base", "strength"] == 0 and (rows["anchor"] == "base = 0").all()
    assert (rows["alpha"] == alpha).all() and rows["ci_low"].isna().all()


def test_source_strengths_are_anchored_to_the_mean_of_the_baseline_sources():
    data = planted(30, seed=4)
    table = S.pairwise_bradley_terry(data, baseline="base", n_boot=0)
    expected = hand_bradley_terry(data, lambda m, c: (m, c), S.pairwise.BT_ALPHA)
    shift = np.mean([expected[("A", "base")], expected[("B", "base")]])
    rows = table[table["level"] == "source"].set_index(["model", "condition"])
    assert len(rows) == len(expected) == 5
    for source, strength in expected.items():
        assert rows.loc[source, "strength"] == pytest.approx(strength - shift, abs=1e-6)
    assert (rows["anchor"] == "mean of the base sources = 0").all()
    # Reference > tuned > base, as planted.
    conditions = table[table["level"] == "condition"].set_index("condition")["strength"]
    assert conditions["ref"] > conditions["tuned"] > conditions["base"] == 0


def test_without_a_baseline_strengths_are_centred_and_no_probability_is_given():
    table = S.pairwise_bradley_terry(planted(6, seed=5), n_boot=0)
    for _, rows in table.groupby("level"):
        assert rows["strength"].mean() == pytest.approx(0, abs=1e-9)
    assert table["p_beats_baseline"].isna().all() and (table["anchor"] == "mean 0").all()


def test_the_participant_bootstrap_is_reproducible_and_contains_the_point_estimate():
    data = planted(20, seed=6)
    first = S.pairwise_bradley_terry(data, baseline="base", n_boot=60, seed=11)
    again = S.pairwise_bradley_terry(data, baseline="base", n_boot=60, seed=11)
    other = S.pairwise_bradley_terry(data, baseline="base", n_boot=60, seed=12)
    pd.testing.assert_frame_equal(first, again)
    assert not np.allclose(first["ci_low"], other["ci_low"])
    assert ((first["ci_low"] <= first["strength"]) & (first["strength"] <= first["ci_high"])).all()
    assert ((first["p_ci_low"] <= first["p_beats_baseline"]) & (first["p_beats_baseline"] <= first["p_ci_high"])).all()
    baseline = first[(first["level"] == "condition") & (first["condition"] == "base")].iloc[0]
    assert baseline["ci_low"] == baseline["ci_high"] == 0  # the anchor does not vary
    assert (first["n_boot"] == 60).all() and (first["note"] == "").all()


def test_the_bootstrap_resamples_participants_not_judgements():
    # Two participants who disagree completely: resampling the 40 judgements would give a narrow interval around
    # 0; resampling the two participants gives samples where one of them is drawn twice, and a wide interval.
    data = judgements([("a", "A", "x", "A", "y", "left")] * 20 + [("b", "A", "x", "A", "y", "right")] * 20)
    table = S.pairwise_bradley_terry(data, n_boot=200, seed=0)
    row = table[(table["level"] == "condition") & (table["condition"] == "x")].iloc[0]
    assert row["strength"] == pytest.approx(0, abs=1e-9)
    assert row["ci_low"] < -2 and row["ci_high"] > 2
    assert row["n_participants"] == 2


def test_items_whose_judgements_never_meet_are_not_identified():
    data = judgements([("a", "A", "x", "B", "y", "left"), ("a", "C", "z", "D", "w", "right")])
    table = S.pairwise_bradley_terry(data, n_boot=10)
    assert table["strength"].isna().all()
    assert table["note"].str.contains("2 groups that never met").all()
    ties_only = S.pairwise_bradley_terry(judgements([("a", "A", "x", "B", "y", "tie")]))
    assert list(ties_only.columns) == S.PAIRWISE_BT_COLUMNS
    assert ties_only["note"].iloc[0] == "no decisive judgement (only ties or both bad)"


def test_an_item_that_always_wins_has_a_finite_strength_only_with_pseudo_wins():
    data = judgements([(f"p{k}", "A", "x", "A", "y", "left") for k in range(5)])
    regularised = S.pairwise_bradley_terry(data, baseline="y", n_boot=20)
    x = regularised[(regularised["level"] == "condition") & (regularised["condition"] == "x")].iloc[0]
    # With 0.1 pseudo-wins each way: 5.1 wins against 0.1, so the strength is log(51).
    assert x["strength"] == pytest.approx(math.log(5.1 / 0.1), abs=1e-6)
    plain = S.pairwise_bradley_terry(data, baseline="y", n_boot=0, alpha=0.0)
    assert plain["strength"].isna().all() and plain["note"].str.contains("always or never won").all()


# --------------------------------------------------------------------------- position bias


def test_position_bias_on_a_worked_example():
    # 14 left, 6 right, 3 ties, 2 both bad from 5 participants.
    verdicts = ["left"] * 14 + ["right"] * 6 + ["tie"] * 3 + ["both_bad"] * 2
    data = pd.DataFrame({"participant_id": [f"p{k % 5}" for k in range(len(verdicts))], "preference": verdicts})
    row = S.pairwise_position_bias(data).iloc[0]
    assert (row["judgements"], row["decisive"], row["left"], row["right"], row["ties"], row["both_bad"]) == (
        25, 20, 14, 6, 3, 2)
    assert row["left_share"] == pytest.approx(0.7)
    assert (row["ci_low"], row["ci_high"]) == pytest.approx(hand_wilson(14, 20), abs=1e-9)
    # Exact two-sided binomial p by hand: P(X >= 14) + P(X <= 6) for X ~ Bin(20, 1/2).
    tail = sum(math.comb(20, k) for k in range(14, 21)) / 2 ** 20
    assert row["p"] == pytest.approx(2 * tail, rel=1e-12)
    assert row["p"] == pytest.approx(stats.binomtest(14, 20, 0.5).pvalue, rel=1e-12)
    assert (row["tie_share"], row["both_bad_share"], row["n_participants"]) == (3 / 25, 2 / 25, 5)


def test_a_planted_left_bias_is_found_and_none_is_found_without_it():
    biased = S.pairwise_position_bias(planted(40, seed=7, left_bias=0.15)).iloc[0]
    fair = S.pairwise_position_bias(planted(40, seed=7)).iloc[0]
    assert biased["left_share"] > 0.6 and biased["p"] < 0.001
    assert fair["ci_low"] < 0.5 < fair["ci_high"]


def test_position_bias_without_decisive_judgements_or_columns():
    row = S.pairwise_position_bias(pd.DataFrame({"participant_id": ["a"], "preference": ["tie"]})).iloc[0]
    assert np.isnan(row["left_share"]) and np.isnan(row["p"]) and row["tie_share"] == 1
    assert row["note"] == "no decisive judgement: no test"
    missing = S.pairwise_position_bias(pd.DataFrame())
    assert list(missing.columns) == S.PAIRWISE_POSITION_COLUMNS and missing["note"].iloc[0].startswith("missing")


# --------------------------------------------------------------------------- the frame and the pipeline


def answer_pairs(study, *, seed: int = 0) -> None:
    """Give every submitted block of the study a preference through the ORM: the better condition (reference >
    fine-tuned > zero-shot, by the study's condition order reversed) 75% of the time."""
    rng = random.Random(seed)
    order = {name: k for k, name in enumerate(reversed(["zero-shot", "fine-tuned", "reference"]))}
    visits = BlockVisit.objects.filter(participant__study=study, block__isnull=False, submitted_at__isnull=False)
    sides = {(p.visit_id, p.position): p.item.condition.name
             for p in ItemPlacement.objects.filter(visit__in=visits).select_related("item__condition")}
    for visit in visits.order_by("id"):
        better = "left" if order[sides[(visit.pk, 1)]] < order[sides[(visit.pk, 2)]] else "right"
        worse = "right" if better == "left" else "left"
        draw = rng.random()
        visit.preference = better if draw < 0.75 else worse if draw < 0.9 else rng.choice(["tie", "both_bad"])
        visit.save(update_fields=["preference"])


@pytest.fixture(scope="module")
def _answered_pk(django_db_setup, django_db_blocker):
    """Built once for the module's database tests, each of which runs in a savepoint of it
    (tests/support/shared.py): what a test changes is rolled back before the next."""
    with rows_kept_until_exit(django_db_blocker), in_process_tasks():
        study = load_fixture("pairwise.json")
        fill_with_bots(study, 10)
        yield study.pk


@pytest.fixture
def answered(_answered_pk, db):
    """The pairwise study with 10 bots who answered through the services."""
    return Study.objects.get(pk=_answered_pk)


def test_the_frame_has_one_row_per_answered_pair_as_stored(answered):
    frame = frames.pairwise_frame(answered.pk)
    assert list(frame.columns) == frames.PAIRWISE_COLUMNS
    visits = (BlockVisit.objects.filter(participant__study=answered, submitted_at__isnull=False)
              .exclude(preference="").select_related("participant", "block__scenario")
              .order_by("participant_id", "sequence"))
    assert len(frame) == visits.count() > 0
    for row, visit in zip(frame.itertuples(index=False), visits):
        left, right = (ItemPlacement.objects.select_related("item__system", "item__condition").get(
            visit=visit, position=position).item for position in (1, 2))
        assert (row.participant_id, row.block_id, row.scenario, row.preference) == (
            visit.participant.pseudonym, visit.block.key, visit.block.scenario.key, visit.preference)
        assert (row.left_response_id, row.right_response_id, row.left_model, row.right_model, row.left_condition,
                row.right_condition) == (left.key, right.key, left.system.name, right.system.name,
                                         left.condition.name, right.condition.name)
        assert row.seconds_on_block == pytest.approx((visit.submitted_at - visit.shown_at).total_seconds())


def test_the_frame_leaves_out_unanswered_blocks_and_narrows_to_participants_or_visits(answered):
    visit = BlockVisit.objects.filter(participant__study=answered, submitted_at__isnull=False).first()
    # A block shown but not yet submitted has no answer yet.
    BlockVisit.objects.filter(pk=visit.pk).update(preference="", submitted_at=None)
    whole = frames.pairwise_frame(answered.pk)
    assert len(whole) == BlockVisit.objects.filter(participant__study=answered).exclude(preference="").count()
    person = visit.participant
    mine = frames.pairwise_frame(answered.pk, participant_ids=[person.pk])
    assert set(mine["participant_id"]) == {person.pseudonym} and len(mine) == (
        whole["participant_id"] == person.pseudonym).sum()
    two = list(BlockVisit.objects.filter(participant__study=answered).exclude(preference="")
               .order_by("participant_id", "sequence").values_list("id", flat=True)[3:5])
    pd.testing.assert_frame_equal(frames.pairwise_frame(answered.pk, visit_ids=two).astype(str),
                                  whole.iloc[3:5].reset_index(drop=True).astype(str))
    assert frames.pairwise_frame(answered.pk, participant_ids=[]).empty
    assert list(frames.pairwise_frame(answered.pk, visit_ids=[]).columns) == frames.PAIRWISE_COLUMNS


def test_the_frame_reads_a_few_queries_whatever_the_number_of_participants(answered, django_assert_max_num_queries):
    with django_assert_max_num_queries(5):
        frame = frames.pairwise_frame(answered.pk)
    assert frame["participant_id"].nunique() > 5


def test_the_pipeline_feeds_the_pairwise_analyses_the_retained_participants_judgements(answered):
    answer_pairs(answered)  # a planted order of the conditions, for the strengths below
    design = study_design(answered.pk)
    chosen = registry.statistics_analyses(design=design.features)
    # The study asks an age question, so its demographics table applies too (issue 26).
    assert {a.name for a in chosen} == {"pairwise_win_rates", "pairwise_bradley_terry", "pairwise_position_bias",
                                        "demographics_table"}
    pairwise = frames.pairwise_frame(answered.pk)
    people = frames.participants_frame(answered.pk, design)
    dropped = people["participant_id"].iloc[0]
    people = people.assign(excluded_by=np.where(people["participant_id"] == dropped, "speed", ""))
    computed = pipeline.compute_statistics({"ratings": frames.ratings_frame(answered.pk), "participants": people,
                                            "gold": frames.gold_frame(answered.pk), "pairwise": pairwise},
                                           analyses=chosen, design=design,
                                           options={"pairwise_bradley_terry": {"n_boot": 20}})
    assert not computed.failures
    kept = pairwise[pairwise["participant_id"] != dropped]
    position = computed.tables["pairwise_position_bias"].iloc[0]
    assert position["judgements"] == len(kept) and position["n_participants"] == kept["participant_id"].nunique()
    assert position["left"] == (kept["preference"] == "left").sum()
    pd.testing.assert_frame_equal(computed.tables["pairwise_win_rates"],
                                  S.pairwise_win_rates(kept, baseline="zero-shot"))
    strengths = computed.tables["pairwise_bradley_terry"]
    conditions = strengths[strengths["level"] == "condition"].set_index("condition")["strength"]
    assert conditions["reference"] > conditions["fine-tuned"] > conditions["zero-shot"] == 0


# --------------------------------------------------------------------------- the figure


def test_the_strength_figure_draws_conditions_and_sources_with_their_intervals():
    from analysis import charts
    from tests.test_charts import _numbers

    table = S.pairwise_bradley_terry(planted(15, seed=8), baseline="base", n_boot=20)
    figure = charts.results_figures({"pairwise_bradley_terry": table}, registry.figure_sources())["pairwise_strength"]
    conditions, sources = figure["data"]
    expected = table[table["level"] == "condition"].sort_values("strength")
    assert conditions["y"] == expected["condition"].tolist()
    assert _numbers(conditions["x"]) == pytest.approx(expected["strength"].tolist())
    assert _numbers(conditions["error_x"]["array"]) == pytest.approx(
        (expected["ci_high"] - expected["strength"]).tolist())
    assert len(sources["y"]) == 5 and "A · base" in sources["y"]
    assert "base = 0" in figure["layout"]["title"]["text"]
    empty = charts.pairwise_strength_chart(S.pairwise_bradley_terry(judgements([])))
    assert empty["layout"]["annotations"][0]["text"] == "No decisive pairwise judgements yet."


# --------------------------------------------------------------------------- too few to reach p < .05


@pytest.mark.parametrize("decisive", [5, 6])
def test_a_pair_or_position_test_with_too_few_decisive_judgements_says_it_cannot_reach_significance(decisive):
    # The most extreme outcome (every decisive judgement one way) gives scipy's smallest p: above .05 at 5, below at 6.
    smallest = stats.binomtest(decisive, decisive, 0.5).pvalue
    reachable = smallest < 0.05
    assert reachable == (decisive == 6)
    rows = [(f"p{k}", "A", "tuned", "A", "base", "left") for k in range(decisive)] + [
        ("q", "A", "tuned", "A", "base", "tie")]
    pair = S.pairwise_win_rates(judgements(rows), baseline="base").query("level == 'pair'").iloc[0]
    assert pair["decisive"] == decisive and pair["p"] == pytest.approx(smallest)
    assert ("cannot reach p < 0.05" in pair["note"]) == (not reachable)
    position = S.pairwise_position_bias(judgements(rows)).iloc[0]
    assert position["p"] == pytest.approx(smallest)
    assert ("cannot reach p < 0.05" in position["note"]) == (not reachable)
