"""How far judges (LLMs, automatic metrics) agree with the human raters, on the same blocks and scales.

Inputs are the retained human ``ratings`` frame and the ``judges`` frame (one row per judge rating:
``judge, kind, block_id, scenario, response_id, model, condition, dimension, position, rating``); for
pairwise studies the human ``pairwise`` frame and the ``judge_pairwise`` frame (``judge, kind``, then the
columns of the pairwise frame). Every function is pure and returns a new tidy frame; ``judge_agreement``
gathers them into one table with one row per judge x dimension x level x method (``AGREEMENT_COLUMNS``).

Levels and methods:

* ``response``: ``spearman``, ``kendall`` (tau-b), ``pearson`` of the judge's score of each response
  with the mean of the human raters' ratings of it; percentile bootstrap CIs over responses.
* ``system``: ``kendall`` (tau-b) of the systems' order (mean per system, judge vs people);
  ``same_winner``: the share of systems whose winner of the study's comparison (baseline vs treatment
  mean) is the same from the judge as from the people; ``same_study_winner``: 1 when the condition
  with the higher mean over every system is the same, else 0.
* ``rater``: ``alpha_people`` and ``alpha_with_judge``: Krippendorff's alpha of the people, and of the
  people with the judge added as one more rater ("is it as good as one more person?");
  ``loo_spearman``: the judge's Spearman correlation with the mean of the people, beside
  ``people_loo_spearman_median``, the median of each person's correlation with the others' mean
  (``judge_rater_loo`` lists every person and judge).
* ``pair``: ``cohen_kappa`` of the judge's verdict on each pair with the people's majority verdict
  (the winning response, tie or both bad; pairs without a majority are left out), bootstrap CI over pairs.
* ``position``: ``left_share``: the share of the judge's decisive verdicts that chose the left response
  (Wilson CI, exact binomial p against one half); ``order_consistency``: the share of pairs asked in
  both orders where the judge chose the same response (or the same non-decisive verdict) both times.

Metric judges (kind ``metric``) are on their own scale: they enter the correlations but not alpha.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd
from scipy import stats

from analysis.stats.comparisons import WIN_COLUMNS
from analysis.stats.primitives import BINOMIAL_MIN_N, _missing_columns_note, _note_frame
from analysis.stats.reliability import alpha_from_values

AGREEMENT_COLUMNS = ["judge", "kind", "dimension", "level", "method", "estimate", "ci_low", "ci_high", "n", "p",
                     "note"]
SUMMARY_COLUMNS = ["judge", "kind", "n_ratings", "n_responses", "n_blocks", "n_pairwise", "dimensions", "note"]
RATER_LOO_COLUMNS = ["rater", "rater_kind", "dimension", "spearman_r", "n_items", "note"]
JUDGE_WIN_COLUMNS = ["judge", "kind", *WIN_COLUMNS]
#: The columns of the ``judges`` frame (judges.selectors.judge_ratings_frame).
JUDGE_RATING_FIELDS = ["judge", "kind", "block_id", "scenario", "response_id", "model", "condition", "dimension",
                       "position", "rating"]
_JUDGE_NEEDS = ["judge", "kind", "response_id", "dimension", "rating"]
_PEOPLE_NEEDS = ["participant_id", "response_id", "model", "condition", "rating"]
CORRELATIONS: dict[str, Callable] = {"spearman": stats.spearmanr, "kendall": stats.kendalltau,
                                     "pearson": stats.pearsonr}
MIN_ITEMS = 3
#: The dimension under which ranks are compared (the judge's rank of a response vs the people's mean rank).
RANK_DIMENSION = "rank"


def _row(judge: str, kind: str, dimension: str, level: str, method: str, estimate: float = np.nan,
         ci: tuple[float, float] = (np.nan, np.nan), n: int = 0, p: float = np.nan, note: str = "") -> dict:
    return {"judge": judge, "kind": kind, "dimension": dimension, "level": level, "method": method,
            "estimate": estimate, "ci_low": ci[0], "ci_high": ci[1], "n": int(n), "p": p, "note": note}


def _text(frame: pd.DataFrame, columns: Sequence[str]) -> pd.DataFrame:
    """Plain text label columns (categoricals of the frames become strings), so groupby and merge behave."""
    out = frame.copy()
    for column in columns:
        if column in out.columns:
            out[column] = out[column].astype(object).where(out[column].notna(), "").astype(str)
    return out


def _dimension_of(frame: pd.DataFrame) -> pd.Series:
    return frame["dimension"] if "dimension" in frame.columns else pd.Series("", index=frame.index)


def _inputs_problem(ratings: pd.DataFrame, judges: pd.DataFrame) -> str:
    problem = _missing_columns_note(ratings, _PEOPLE_NEEDS)
    if problem:
        return f"people's ratings: {problem}"
    problem = _missing_columns_note(judges, _JUDGE_NEEDS)
    return f"judges' ratings: {problem}" if problem else ""


def with_ranks(ratings: pd.DataFrame) -> pd.DataFrame:
    """The ratings plus, for a ranking study, each person's rank of each response as the dimension "rank"."""
    if "rank" not in ratings.columns or ratings["rank"].isna().all():
        return ratings
    ranks = ratings.dropna(subset=["rank"]).drop_duplicates(["participant_id", "response_id"])
    ranks = ranks.assign(dimension=RANK_DIMENSION, rating=ranks["rank"].astype(float))
    return pd.concat([ratings, ranks], ignore_index=True)


def human_means(ratings: pd.DataFrame) -> pd.DataFrame:
    """The mean human rating of each response per dimension: dimension, response_id, model, condition, human, n."""
    data = _text(ratings.dropna(subset=["rating"]), ["dimension", "response_id", "model", "condition"])
    data = data.assign(dimension=_dimension_of(data))
    return (data.groupby(["dimension", "response_id", "model", "condition"], sort=True)["rating"]
            .agg(human="mean", n="size").reset_index())


def _judge_scores(judges: pd.DataFrame) -> pd.DataFrame:
    data = _text(judges.dropna(subset=["rating"]), ["judge", "kind", "dimension", "response_id"])
    return (data.groupby(["judge", "kind", "dimension", "response_id"], sort=True)["rating"].mean()
            .rename("score").reset_index())


def _paired(ratings: pd.DataFrame, judges: pd.DataFrame) -> pd.DataFrame:
    """One row per judge x dimension x response with the judge's score and the people's mean."""
    return _judge_scores(judges).merge(human_means(ratings), on=["dimension", "response_id"], how="inner")


def _bootstrap_ci(x: np.ndarray, y: np.ndarray, method: str, n_boot: int, seed: int,
                  confidence: float = 0.95) -> tuple[float, float]:
    """Percentile bootstrap CI of a correlation over items (resampled with replacement)."""
    if n_boot <= 0:
        return np.nan, np.nan
    rng = np.random.default_rng(seed)
    estimates = []
    for _ in range(n_boot):
        pick = rng.integers(0, len(x), len(x))
        xs, ys = x[pick], y[pick]
        if np.ptp(xs) == 0 or np.ptp(ys) == 0:
            continue  # a resample with a constant side has no correlation
        estimates.append(CORRELATIONS[method](xs, ys)[0])
    if len(estimates) < max(10, n_boot // 2):
        return np.nan, np.nan
    tail = (1 - confidence) / 2 * 100
    low, high = np.nanpercentile(estimates, [tail, 100 - tail])
    return float(low), float(high)


def judge_response_agreement(ratings: pd.DataFrame, judges: pd.DataFrame, *, n_boot: int = 2000,
                             seed: int = 0) -> pd.DataFrame:
    """Spearman, Kendall tau-b and Pearson of each judge with the people's mean, per dimension, at response level.

    Examples
    --------
    >>> people = pd.DataFrame({"participant_id": ["p1", "p2"] * 4, "response_id": np.repeat(list("abcd"), 2),
    ...     "model": "m", "condition": "c", "dimension": "d", "rating": [1, 2, 2, 3, 4, 4, 5, 4]})
    >>> judge = pd.DataFrame({"judge": "j", "kind": "llm", "response_id": list("abcd"), "dimension": "d",
    ...     "rating": [1, 3, 4, 5]})
    >>> judge_response_agreement(people, judge, n_boot=0)[["method", "estimate", "n"]].round(4)
         method  estimate  n
    0  spearman    1.0000  4
    1   kendall    1.0000  4
    2   pearson    0.9746  4
    """
    if problem := _inputs_problem(ratings, judges):
        return _note_frame(AGREEMENT_COLUMNS, problem)
    paired = _paired(ratings, judges)
    if paired.empty:
        return _note_frame(AGREEMENT_COLUMNS, "no response rated by both a judge and the people")
    rows = []
    for (judge, kind, dimension), part in paired.groupby(["judge", "kind", "dimension"], sort=True):
        x, y = part["score"].to_numpy(float), part["human"].to_numpy(float)
        for k, method in enumerate(CORRELATIONS):
            if len(x) < MIN_ITEMS or np.ptp(x) == 0 or np.ptp(y) == 0:
                rows.append(_row(judge, kind, dimension, "response", method, n=len(x),
                                 note=f"needs {MIN_ITEMS} or more responses and scores that vary"))
                continue
            result = CORRELATIONS[method](x, y)
            rows.append(_row(judge, kind, dimension, "response", method, float(result[0]),
                             _bootstrap_ci(x, y, method, n_boot, seed + k), len(x), float(result[1])))
    return pd.DataFrame(rows, columns=AGREEMENT_COLUMNS)


def _winner(means: pd.Series, baseline: str, treatment: str, lower_wins: bool = False) -> str:
    """The condition with the better mean (the higher; the lower for ranks), "tie", or "" when one is missing."""
    if baseline not in means or treatment not in means:
        return ""
    if means[baseline] == means[treatment]:
        return "tie"
    return baseline if (means[baseline] > means[treatment]) != lower_wins else treatment


def judge_system_agreement(ratings: pd.DataFrame, judges: pd.DataFrame, *, baseline: str | None = None,
                           treatment: str | None = None) -> pd.DataFrame:
    """Kendall tau-b of the systems' order, and whether the judge finds the same winners of the comparison.

    Means are over responses (each response's people mean, or the judge's score), so that both sides weigh
    the responses alike."""
    if problem := _inputs_problem(ratings, judges):
        return _note_frame(AGREEMENT_COLUMNS, problem)
    paired = _paired(ratings, judges)
    if paired.empty:
        return _note_frame(AGREEMENT_COLUMNS, "no response rated by both a judge and the people")
    rows = []
    for (judge, kind, dimension), part in paired.groupby(["judge", "kind", "dimension"], sort=True):
        systems = part.groupby("model", sort=True)[["score", "human"]].mean()
        if len(systems) < MIN_ITEMS or systems["score"].nunique() < 2 or systems["human"].nunique() < 2:
            rows.append(_row(judge, kind, dimension, "system", "kendall", n=len(systems),
                             note=f"needs {MIN_ITEMS} or more systems whose means vary"))
        else:
            tau = stats.kendalltau(systems["score"], systems["human"])
            rows.append(_row(judge, kind, dimension, "system", "kendall", float(tau[0]), n=len(systems),
                             p=float(tau[1])))
        if baseline is None or treatment is None:
            continue
        cells = part[part["condition"].isin([baseline, treatment])]
        by_system = cells.groupby(["model", "condition"], sort=True)[["score", "human"]].mean()
        same, n = 0, 0
        for system in cells["model"].unique():
            own = by_system.loc[system]
            judge_winner = _winner(own["score"], baseline, treatment, dimension == RANK_DIMENSION)
            human_winner = _winner(own["human"], baseline, treatment, dimension == RANK_DIMENSION)
            if judge_winner and human_winner:
                n += 1
                same += judge_winner == human_winner
        rows.append(_row(judge, kind, dimension, "system", "same_winner", same / n if n else np.nan, n=n,
                         note="" if n else "no system has responses of both conditions"))
        overall = cells.groupby("condition")[["score", "human"]].mean()
        judge_winner, human_winner = (_winner(overall[side], baseline, treatment, dimension == RANK_DIMENSION)
                                      for side in ("score", "human"))
        rows.append(_row(judge, kind, dimension, "system", "same_study_winner",
                         float(judge_winner == human_winner) if judge_winner and human_winner else np.nan,
                         n=len(cells), note=f"judge: {judge_winner or '-'}; people: {human_winner or '-'}"))
    return pd.DataFrame(rows, columns=AGREEMENT_COLUMNS)


def _loo(ratings: pd.DataFrame, dimension: str) -> pd.DataFrame:
    """Each person's Spearman correlation with the mean of the other people, on one dimension."""
    data = ratings[_dimension_of(ratings) == dimension]
    rows = []
    for person, own in data.groupby("participant_id", sort=True):
        others = data[data["participant_id"] != person].groupby("response_id")["rating"].mean()
        mine = own.groupby("response_id")["rating"].mean()
        both = pd.concat([mine.rename("own"), others.rename("others")], axis=1, join="inner")
        if len(both) < MIN_ITEMS or both["own"].nunique() < 2 or both["others"].nunique() < 2:
            rows.append({"rater": person, "rater_kind": "person", "dimension": dimension, "spearman_r": np.nan,
                         "n_items": len(both), "note": f"needs {MIN_ITEMS} or more shared responses that vary"})
            continue
        rows.append({"rater": person, "rater_kind": "person", "dimension": dimension,
                     "spearman_r": float(stats.spearmanr(both["own"], both["others"])[0]), "n_items": len(both),
                     "note": ""})
    return pd.DataFrame(rows, columns=RATER_LOO_COLUMNS)


def judge_rater_loo(ratings: pd.DataFrame, judges: pd.DataFrame) -> pd.DataFrame:
    """Every person's and every judge's Spearman correlation with the mean of the people other than them."""
    if problem := _inputs_problem(ratings, judges):
        return _note_frame(RATER_LOO_COLUMNS, problem)
    ratings = with_ranks(ratings)
    people = _text(ratings.dropna(subset=["rating"]), ["participant_id", "response_id", "dimension"])
    people = people.assign(dimension=_dimension_of(people))
    paired = _paired(ratings, judges)
    parts = []
    for dimension in sorted(people["dimension"].unique()):
        parts.append(_loo(people, dimension))
        for (judge, kind), part in paired[paired["dimension"] == dimension].groupby(["judge", "kind"], sort=True):
            usable = len(part) >= MIN_ITEMS and part["score"].nunique() > 1 and part["human"].nunique() > 1
            parts.append(pd.DataFrame([{
                "rater": judge, "rater_kind": kind, "dimension": dimension,
                "spearman_r": float(stats.spearmanr(part["score"], part["human"])[0]) if usable else np.nan,
                "n_items": len(part), "note": "" if usable else f"needs {MIN_ITEMS} or more responses that vary"}],
                columns=RATER_LOO_COLUMNS))
    parts = [part for part in parts if not part.empty]
    if not parts:
        return _note_frame(RATER_LOO_COLUMNS, "no ratings")
    return pd.concat(parts, ignore_index=True)


def judge_alpha(ratings: pd.DataFrame, judges: pd.DataFrame, *, level: str = "ordinal") -> pd.DataFrame:
    """Krippendorff's alpha of the people, and with each judge as one more rater; its LOO correlation beside theirs.

    Units are responses; the judge's value on a response is its score (the mean, if it rated it twice).
    Metric judges are left out of alpha: their scores are not on the rating scale."""
    if problem := _inputs_problem(ratings, judges):
        return _note_frame(AGREEMENT_COLUMNS, problem)
    people = _text(ratings.dropna(subset=["rating"]), ["participant_id", "response_id", "dimension"])
    people = people.assign(dimension=_dimension_of(people))
    scores = _judge_scores(judges)
    loo = judge_rater_loo(ratings, judges)
    rows = []
    for (judge, kind, dimension), part in scores.groupby(["judge", "kind", "dimension"], sort=True):
        own = people[people["dimension"] == dimension].drop_duplicates(["participant_id", "response_id"])
        base = alpha_from_values(own["response_id"].to_numpy(), own["rating"].to_numpy(float), level)
        n_raters = own["participant_id"].nunique()
        rows.append(_row(judge, kind, dimension, "rater", "alpha_people", base["alpha"], n=n_raters,
                         note=base["note"]))
        if kind == "metric":
            rows.append(_row(judge, kind, dimension, "rater", "alpha_with_judge", n=n_raters + 1,
                             note="a metric is not on the rating scale"))
        else:
            units = np.concatenate([own["response_id"].to_numpy(), part["response_id"].to_numpy()])
            values = np.concatenate([own["rating"].to_numpy(float), part["score"].to_numpy(float)])
            added = alpha_from_values(units, values, level)
            rows.append(_row(judge, kind, dimension, "rater", "alpha_with_judge", added["alpha"], n=n_raters + 1,
                             note=added["note"]))
        mine = loo[(loo["rater"] == judge) & (loo["rater_kind"] == kind) & (loo["dimension"] == dimension)]
        persons = loo[(loo["rater_kind"] == "person") & (loo["dimension"] == dimension)]["spearman_r"].dropna()
        rows.append(_row(judge, kind, dimension, "rater", "loo_spearman",
                         float(mine["spearman_r"].iloc[0]) if len(mine) else np.nan,
                         n=int(mine["n_items"].iloc[0]) if len(mine) else 0))
        rows.append(_row(judge, kind, dimension, "rater", "people_loo_spearman_median",
                         float(persons.median()) if len(persons) else np.nan,
                         (float(persons.min()), float(persons.max())) if len(persons) else (np.nan, np.nan),
                         n=len(persons), note="ci_low and ci_high are the lowest and highest person's"))
    if not rows:
        return _note_frame(AGREEMENT_COLUMNS, "no judge ratings")
    return pd.DataFrame(rows, columns=AGREEMENT_COLUMNS)


def _verdicts(frame: pd.DataFrame) -> pd.DataFrame:
    """Each pairwise judgement as the unordered pair (first, second by key) and its verdict on it:
    the key of the chosen response, "tie" or "both_bad"."""
    data = _text(frame, ["left_response_id", "right_response_id", "preference", "block_id"])
    low = np.minimum(data["left_response_id"], data["right_response_id"])
    high = np.maximum(data["left_response_id"], data["right_response_id"])
    verdict = np.select([data["preference"] == "left", data["preference"] == "right"],
                        [data["left_response_id"], data["right_response_id"]], default=data["preference"])
    return data.assign(first=low, second=high, verdict=verdict)


def _kappa(a: Sequence[str], b: Sequence[str]) -> float:
    """Cohen's kappa of two label sequences (unweighted)."""
    a, b = np.asarray(a), np.asarray(b)
    labels = np.union1d(a, b)
    observed = np.mean(a == b)
    expected = sum(np.mean(a == label) * np.mean(b == label) for label in labels)
    return float((observed - expected) / (1 - expected)) if expected < 1 else np.nan


def _majority(verdicts: pd.Series) -> str:
    counts = verdicts.value_counts()
    return "" if len(counts) > 1 and counts.iloc[0] == counts.iloc[1] else str(counts.index[0])


def judge_pairwise_agreement(pairwise: pd.DataFrame, judge_pairwise: pd.DataFrame, *, n_boot: int = 2000,
                             seed: int = 0) -> pd.DataFrame:
    """Cohen's kappa of each judge with the people's majority per pair, and the judge's position bias.

    A judge asked a pair in both orders gives two verdicts; for kappa each counts (so a judge that
    flips with the order loses agreement). Verdicts are named by the response chosen, so a label means
    the same whatever side it was shown on."""
    if judge_pairwise.empty:
        return _note_frame(AGREEMENT_COLUMNS, "no pairwise judgements of a judge")
    if problem := _missing_columns_note(judge_pairwise, ["judge", "kind", "left_response_id", "right_response_id",
                                                         "preference"]):
        return _note_frame(AGREEMENT_COLUMNS, problem)
    people = _verdicts(pairwise) if not pairwise.empty else pd.DataFrame(columns=["first", "second", "verdict"])
    majority = (people.groupby(["first", "second"], sort=True)["verdict"].agg(_majority).rename("people")
                .reset_index())
    majority = majority[majority["people"] != ""]
    judged = _verdicts(judge_pairwise)
    rows = []
    for (judge, kind), part in judged.groupby(["judge", "kind"], sort=True):
        both = part.merge(majority, on=["first", "second"], how="inner")
        if len(both) < MIN_ITEMS:
            rows.append(_row(judge, kind, "", "pair", "cohen_kappa", n=len(both),
                             note=f"needs {MIN_ITEMS} or more verdicts on pairs with a people's majority"))
        else:
            kappa = _kappa(both["verdict"], both["people"])
            rng, boot = np.random.default_rng(seed), []
            pairs = both.groupby(["first", "second"]).indices
            groups = list(pairs.values())
            for _ in range(n_boot):
                pick = np.concatenate([groups[i] for i in rng.integers(0, len(groups), len(groups))])
                boot.append(_kappa(both["verdict"].to_numpy()[pick], both["people"].to_numpy()[pick]))
            boot = np.asarray(boot, dtype=float)
            ci = tuple(np.nanpercentile(boot, [2.5, 97.5])) if n_boot and np.isfinite(boot).sum() >= 10 else (np.nan, np.nan)
            rows.append(_row(judge, kind, "", "pair", "cohen_kappa", kappa, (float(ci[0]), float(ci[1])), len(both)))
        decisive = part[part["preference"].isin(["left", "right"])]
        n_left, n = int((decisive["preference"] == "left").sum()), len(decisive)
        if n:
            from statsmodels.stats.proportion import proportion_confint
            low, high = proportion_confint(n_left, n, alpha=0.05, method="wilson")
            rows.append(_row(judge, kind, "", "position", "left_share", n_left / n, (float(low), float(high)), n,
                             float(stats.binomtest(n_left, n, 0.5).pvalue),
                             note=f"{n} decisive verdicts: the test cannot reach p < 0.05" if n < BINOMIAL_MIN_N else ""))
        else:
            rows.append(_row(judge, kind, "", "position", "left_share", note="no decisive verdict"))
        orders = part.groupby(["first", "second"])["verdict"].agg(["nunique", "size"])
        twice = orders[orders["size"] == 2]
        rows.append(_row(judge, kind, "", "position", "order_consistency",
                         float((twice["nunique"] == 1).mean()) if len(twice) else np.nan, n=len(twice),
                         note="" if len(twice) else "no pair asked in both orders"))
    return pd.DataFrame(rows, columns=AGREEMENT_COLUMNS)


def judge_agreement(ratings: pd.DataFrame, judges: pd.DataFrame, pairwise: pd.DataFrame,
                    judge_pairwise: pd.DataFrame, *, baseline: str | None = None, treatment: str | None = None,
                    n_boot: int = 2000, level: str = "ordinal") -> pd.DataFrame:
    """judge_agreement.csv: every agreement of every judge, one row per judge x dimension x level x method.

    Ranks (a ranking study's, and a judge's) are compared as the dimension "rank" (``with_ranks``)."""
    if not ratings.empty and "rank" in ratings.columns:
        ratings = with_ranks(ratings)
    parts = []
    if not _inputs_problem(ratings, judges):
        parts += [judge_response_agreement(ratings, judges, n_boot=n_boot),
                  judge_system_agreement(ratings, judges, baseline=baseline, treatment=treatment),
                  judge_alpha(ratings, judges, level=level)]
    if not judge_pairwise.empty:
        parts.append(judge_pairwise_agreement(pairwise, judge_pairwise, n_boot=n_boot))
    parts = [part for part in parts if part["judge"].notna().any()]
    if not parts:
        return _note_frame(AGREEMENT_COLUMNS, "no judge answered the blocks people answered")
    return pd.concat(parts, ignore_index=True)


def judge_summary(judges: pd.DataFrame, judge_pairwise: pd.DataFrame) -> pd.DataFrame:
    """judges.csv: each judge, its kind, and how much it answered."""
    rows: dict[tuple[str, str], dict] = {}
    for (judge, kind), part in _text(judges, ["judge", "kind"]).groupby(["judge", "kind"], sort=True) \
            if not _missing_columns_note(judges, JUDGE_RATING_FIELDS) else []:
        rows[(judge, kind)] = {"judge": judge, "kind": kind, "n_ratings": len(part),
                               "n_responses": part["response_id"].nunique(), "n_blocks": part["block_id"].nunique(),
                               "n_pairwise": 0, "dimensions": " ".join(sorted(map(str, part["dimension"].unique()))),
                               "note": ""}
    for (judge, kind), part in _text(judge_pairwise, ["judge", "kind"]).groupby(["judge", "kind"], sort=True) \
            if not _missing_columns_note(judge_pairwise, ["judge", "kind", "block_id"]) else []:
        row = rows.setdefault((judge, kind), {"judge": judge, "kind": kind, "n_ratings": 0, "n_responses": 0,
                                              "n_blocks": part["block_id"].nunique(), "dimensions": "", "note": ""})
        row["n_pairwise"] = len(part)
    if not rows:
        return _note_frame(SUMMARY_COLUMNS, "no judges")
    return pd.DataFrame(list(rows.values()), columns=SUMMARY_COLUMNS)


def judge_win_table(judges: pd.DataFrame, *, baseline: str, treatment: str,
                    references: Sequence[str] = ()) -> pd.DataFrame:
    """The study's win table computed from each judge's ratings (the judge as the one rater), with a judge column."""
    from analysis.stats.comparisons import win_table

    if problem := _missing_columns_note(judges, JUDGE_RATING_FIELDS):
        return _note_frame(JUDGE_WIN_COLUMNS, problem)
    parts = []
    for (judge, kind), part in _text(judges, ["judge", "kind"]).groupby(["judge", "kind"], sort=True):
        if kind == "metric":
            continue  # a metric scores against the reference: it has no win over it
        table = win_table(part.assign(participant_id=judge), baseline=baseline, treatment=treatment,
                          references=references)
        parts.append(table.assign(judge=judge, kind=kind))
    if not parts:
        return _note_frame(JUDGE_WIN_COLUMNS, "no judge rates on the study's scale")
    table = pd.concat(parts, ignore_index=True)
    return table[["judge", "kind"] + [c for c in table.columns if c not in ("judge", "kind")]]
