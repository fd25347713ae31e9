"""Rankings and positions: mean ranks, Friedman, Plackett-Luce strengths, position bias.

The analyses of the ranking task (``rank_summary``, ``friedman_by_block``,
``bradley_terry`` over ``plackett_luce``) and of the display order
(``position_bias``: does the mean rating depend on where a response was
shown?). The most/least (best-worst) choices have their own module,
``analysis.stats.best_worst``.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
from scipy import sparse, stats

from analysis.stats.primitives import (
    CONFIDENCE, _join_notes, _missing_columns_note, _note_frame, _subsample_participants, friedman_reach_note, holm,
    mean_ci,
)

#: What ``analysis.stats`` re-exports of this family.
__all__ = [
    "BRADLEY_TERRY_COLUMNS", "FRIEDMAN_COLUMNS", "POSITION_COLUMNS", "RANK_SUMMARY_COLUMNS", "bradley_terry",
    "friedman_by_block", "plackett_luce", "position_bias", "rank_summary",
]


# ---------------------------------------------------------------------------
# Rankings
# ---------------------------------------------------------------------------

RANK_SUMMARY_COLUMNS = [
    "unit", "response_id", "block_id", "scenario", "model", "condition", "n", "mean_rank", "sd_rank", "note",
]


def rank_summary(
    ratings: pd.DataFrame,
    *,
    response: str = "response_id",
    block: str = "block_id",
    scenario: str = "scenario",
    model: str = "model",
    condition: str = "condition",
    rank: str = "rank",
) -> pd.DataFrame:
    """Mean rank (1 = ranked first) per response, per model x condition and per model.

    ``unit`` says which: ``response``, ``model_condition`` or ``model``.
    Columns that do not apply to a unit are ``""``.

    Examples
    --------
    >>> ratings = pd.DataFrame({"response_id": ["Q1-R1", "Q1-R2"] * 2, "block_id": "Q1",
    ...     "scenario": "S1", "model": ["A", "B"] * 2, "condition": "base", "rank": [1.0, 2, 2, 1]})
    >>> rank_summary(ratings).query("unit == 'model'")[["model", "n", "mean_rank"]]
      model  n  mean_rank
    4     A  2        1.5
    5     B  2        1.5
    """
    problem = _missing_columns_note(ratings, [response, block, scenario, model, condition, rank])
    if problem:
        return _note_frame(RANK_SUMMARY_COLUMNS, problem)
    data = ratings.dropna(subset=[rank])
    if data.empty:
        return _note_frame(RANK_SUMMARY_COLUMNS, "no ranks (ranking off?)")
    units = {
        "response": [response, block, scenario, model, condition],
        "model_condition": [model, condition],
        "model": [model],
    }
    tables = []
    for unit, keys in units.items():
        table = data.groupby(keys, sort=True)[rank].agg(n="count", mean_rank="mean", sd_rank="std").reset_index()
        tables.append(table.assign(unit=unit))
    combined = pd.concat(tables, ignore_index=True)
    for column in (response, block, scenario, condition):
        # ratings_frame gives categoricals, which take no new "" label.
        combined[column] = combined[column].astype(object).fillna("")
    combined = combined.rename(columns={response: "response_id", block: "block_id", scenario: "scenario",
                                        model: "model", condition: "condition"})
    combined["note"] = ""
    return combined[RANK_SUMMARY_COLUMNS]


FRIEDMAN_COLUMNS = [
    "block_id", "scenario", "n", "k", "chi2", "df", "p", "p_holm", "kendall_w", "holm_family", "note",
]


def friedman_by_block(
    ratings: pd.DataFrame,
    *,
    participant: str = "participant_id",
    block: str = "block_id",
    scenario: str = "scenario",
    response: str = "response_id",
    rank: str = "rank",
) -> pd.DataFrame:
    """Friedman test per block: do participants rank the block's responses differently from chance?

    Only participants who ranked every response of the block enter.
    ``kendall_w = chi2 / (n (k - 1))``. Holm across blocks.

    Examples
    --------
    >>> ratings = pd.DataFrame({"participant_id": np.repeat(list("abcd"), 3), "block_id": "Q1",
    ...     "scenario": "S1", "response_id": ["R1", "R2", "R3"] * 4,
    ...     "rank": [1.0, 2, 3, 1, 2, 3, 1, 3, 2, 1, 2, 3]})
    >>> friedman_by_block(ratings)[["n", "k", "chi2", "kendall_w"]].round(3)
       n  k  chi2  kendall_w
    0  4  3   6.5      0.812
    """
    problem = _missing_columns_note(ratings, [participant, block, scenario, response, rank])
    if problem:
        return _note_frame(FRIEDMAN_COLUMNS, problem)
    data = ratings.dropna(subset=[rank])
    if data.empty:
        return _note_frame(FRIEDMAN_COLUMNS, "no ranks (ranking off?)")
    rows = []
    for block_id, cells in data.groupby(block, sort=True):
        # pivot_table's table (participant x response, mean rank; its columns without a value dropped, in the
        # same order) at a third of its cost, then only complete rankings.
        table = (cells.groupby([participant, response], observed=True, sort=True)[rank].mean()
                 .unstack(response).dropna(axis=1, how="all").dropna())
        n, k = table.shape
        row = {"block_id": block_id, "scenario": cells[scenario].iloc[0], "n": n, "k": k, "chi2": np.nan,
               "df": k - 1, "p": np.nan, "kendall_w": np.nan, "note": ""}
        if k < 3 or n < 2:
            row["note"] = "needs at least 3 responses and 2 complete rankings"
        elif np.ptp(table.to_numpy(), axis=1).max() == 0:
            row["note"] = "every ranking is all ties"
        else:
            result = stats.friedmanchisquare(*(table[column].to_numpy(dtype=float) for column in table.columns))
            row.update(chi2=float(result.statistic), p=float(result.pvalue),
                       kendall_w=float(result.statistic) / (n * (k - 1)))
            row["note"] = friedman_reach_note(n, k, f"{n} complete rankings of {k}")
        rows.append(row)
    table = pd.DataFrame(rows)
    table["p_holm"] = holm(table["p"].to_numpy(dtype=float))
    table["holm_family"] = f"all blocks ({len(table)})"
    return table[FRIEDMAN_COLUMNS]


BRADLEY_TERRY_COLUMNS = [
    "model", "condition", "strength", "ci_low", "ci_high", "worth", "n_rankings", "n_participants",
    "n_boot", "method", "note",
]


def plackett_luce(rankings: np.ndarray, n_items: int, *, tol: float = 1e-10, max_iter: int = 5000,
                  start: np.ndarray | None = None, counts: np.ndarray | None = None) -> np.ndarray:
    """Plackett-Luce log-worths by Hunter's (2004) MM algorithm, centred to mean 0.

    ``rankings`` is an integer array (n_rankings x m): item indices ordered
    from first (best) to last. With m = 2 this is the Bradley-Terry model.
    Items that never beat anything get ``-inf`` (no finite MLE). ``counts``
    says how many times each ranking was observed (default once each): the
    estimate is that of the rankings repeated so, computed on the distinct ones.

    Examples
    --------
    >>> plackett_luce(np.array([[0, 1], [0, 1], [1, 0]]), 2).round(4).tolist()
    [0.3466, -0.3466]
    >>> plackett_luce(np.array([[0, 1], [1, 0]]), 2, counts=np.array([2, 1])).round(4).tolist()
    [0.3466, -0.3466]
    """
    rankings = np.asarray(rankings, dtype=int)
    counts = np.ones(len(rankings)) if counts is None else np.asarray(counts, dtype=float)
    rankings, counts = rankings[counts > 0], counts[counts > 0]
    m = rankings.shape[1]
    # Wins: times an item is chosen at a stage, i.e. ranked anywhere but last.
    wins = np.bincount(rankings[:, : m - 1].ravel(), weights=np.repeat(counts, m - 1), minlength=n_items)
    appears = np.bincount(rankings.ravel(), minlength=n_items) > 0
    gamma = np.exp(start) if start is not None else np.ones(n_items)
    gamma[~appears] = 1.0
    for _ in range(max_iter):
        worths = gamma[rankings]
        # Denominator of each stage t: total worth of the items still unranked.
        remaining = np.cumsum(worths[:, ::-1], axis=1)[:, ::-1][:, : m - 1]
        # An item at position s was in the choice sets of stages 0..min(s, m-2).
        stage_sums = np.cumsum(1.0 / remaining, axis=1)
        exposure = np.concatenate([stage_sums, stage_sums[:, -1:]], axis=1) * counts[:, None]
        denominator = np.bincount(rankings.ravel(), weights=exposure.ravel(), minlength=n_items)
        updated = np.where(appears, wins / np.where(denominator > 0, denominator, 1.0), 1.0)
        positive = updated[appears & (wins > 0)]
        updated = updated / np.exp(np.log(positive).mean())
        converged = np.nanmax(np.abs(np.log(updated[appears & (wins > 0)]) - np.log(gamma[appears & (wins > 0)]))) < tol
        gamma = updated
        if converged:
            break
    return _centred_log_worths(gamma, appears)


def _centred_log_worths(gamma: np.ndarray, appears: np.ndarray) -> np.ndarray:
    """Log-worths centred to mean 0 over the finite ones; NaN for items that appear in no ranking."""
    with np.errstate(divide="ignore"):
        strengths = np.log(gamma)
    strengths[~appears] = np.nan
    finite = np.isfinite(strengths)
    strengths[finite] -= strengths[finite].mean()
    return strengths


def _plackett_luce_draws(rankings: np.ndarray, n_items: int, counts: np.ndarray, *, tol: float,
                         start: np.ndarray, max_iter: int = 5000) -> np.ndarray:
    """``plackett_luce(rankings, n_items, tol=tol, start=start, counts=row)`` for each row of ``counts``
    (draws x rankings), bit for bit, fitted side by side: the bootstrap's 200 fits of about a hundred MM
    steps each cost more in numpy's per-call overhead than in arithmetic.

    The draws fitted together are those that rank the same items and in which the same items win. Their
    arrays are laid out ranking x position x draw, so that each step below does, for each draw, the
    additions ``plackett_luce`` does, on the same values in the same order: the cumulative sums position by
    position, and each item's total in the order of ``np.bincount`` (a sparse product adds a row's entries
    in index order). The rankings a draw did not pick add exact zeros. Any other draw is fitted alone.
    """
    n_draws, (n_rankings, m) = len(counts), rankings.shape
    # item x (ranking, position): the sums of np.bincount(rankings.ravel(), weights) of each draw at once.
    by_item = sparse.csr_array((np.ones(rankings.size), (rankings.ravel(), np.arange(rankings.size))),
                               shape=(n_items, rankings.size))
    chosen_at_a_stage = np.tile(np.arange(m) < m - 1, n_rankings)[:, None]  # every position but the last
    wins = (by_item @ (np.repeat(counts.T, m, axis=0) * chosen_at_a_stage)).T
    appears = (by_item @ np.repeat((counts > 0).T.astype(float), m, axis=0)).T > 0
    scored = appears & (wins > 0)
    usual = (appears == appears[0]).all(axis=1) & (scored == scored[0]).all(axis=1)
    fits = np.empty((n_draws, n_items))
    for draw in np.flatnonzero(~usual):
        fits[draw] = plackett_luce(rankings, n_items, tol=tol, max_iter=max_iter, start=start, counts=counts[draw])
    together = np.flatnonzero(usual)
    if len(together):
        appear, score = appears[together[0]], scored[together[0]]
        # The draws go in chunks that keep each array small (each draw's arithmetic is its own).
        chunk = max(1, _VALUES_PER_STEP // rankings.size)
        for first in range(0, len(together), chunk):
            draws = together[first: first + chunk]
            fits[draws] = _plackett_luce_together(rankings, by_item, counts[draws].T, wins[draws], start=start,
                                                  appear=appear, score=score, tol=tol, max_iter=max_iter)
    return fits


# Values per array of a chunk of draws: 1 MB of doubles, so that a step's arrays stay in the processor's
# caches (at TIDE size, chunks of 7 draws fit 200 draws in 0.30 s against 0.50 s in chunks of 112 draws).
_VALUES_PER_STEP = 125_000


def _plackett_luce_together(rankings: np.ndarray, by_item: sparse.csr_array, counts: np.ndarray, wins: np.ndarray,
                            *, start: np.ndarray, appear: np.ndarray, score: np.ndarray, tol: float,
                            max_iter: int) -> np.ndarray:
    """The fits of ``_plackett_luce_draws``'s usual draws (``counts``: ranking x draw), side by side."""
    m = rankings.shape[1]
    gamma = np.tile(np.exp(start), (counts.shape[1], 1))
    gamma[:, ~appear] = 1.0
    active = np.arange(counts.shape[1])
    # The rankings a draw did not pick may divide by zero (items of worth 0): their terms are dropped below.
    with np.errstate(divide="ignore", invalid="ignore"):
        for _ in range(max_iter):  # one MM step of every draw still moving
            worths = gamma[active].T[rankings]  # ranking x position x draw
            # Worth still unranked before each stage, then the running sums of its inverse (plackett_luce's two
            # cumsums, one position at a time).
            remaining = np.empty_like(worths)
            remaining[:, m - 1] = worths[:, m - 1]
            for stage in range(m - 2, -1, -1):
                remaining[:, stage] = remaining[:, stage + 1] + worths[:, stage]
            exposure = np.empty_like(worths)
            exposure[:, 0] = 1.0 / remaining[:, 0]
            for stage in range(1, m - 1):
                exposure[:, stage] = exposure[:, stage - 1] + 1.0 / remaining[:, stage]
            exposure[:, m - 1] = exposure[:, m - 2]
            drawn = counts[:, active][:, None, :]
            exposure = np.where(drawn > 0, exposure * drawn, 0.0)
            denominator = (by_item @ exposure.reshape(rankings.size, len(active))).T
            updated = np.where(appear, wins[active] / np.where(denominator > 0, denominator, 1.0), 1.0)
            updated = updated / np.exp(_row_means(np.log(updated[:, score])))[:, None]
            change = np.nanmax(np.abs(np.log(updated[:, score]) - np.log(gamma[active][:, score])), axis=1)
            gamma[active] = updated
            active = active[~(change < tol)]
            if not len(active):
                break
    return np.array([_centred_log_worths(row, appear) for row in gamma]).reshape(gamma.shape)


def _row_means(values: np.ndarray) -> np.ndarray:
    """The mean of each row, bit for bit as numpy gives that of the row alone: along an axis of 8 or more,
    numpy adds in another order than for one row (pairwise), so longer rows are taken one at a time."""
    if values.shape[1] < 8:
        return values.mean(axis=1)
    return np.array([row.mean() for row in values])


def _rankings_array(data: pd.DataFrame, participant: str, block: str, rank: str, item_codes: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """(rankings as item indices best-first, the participant of each ranking); incomplete rankings dropped."""
    ordered = data.assign(_item=item_codes).sort_values([participant, block, rank], kind="stable")
    sizes = ordered.groupby([participant, block], sort=False).size()
    m = int(sizes.max())
    complete = sizes[sizes == m].index
    ordered = ordered.set_index([participant, block]).loc[complete].reset_index()
    rankings = ordered["_item"].to_numpy(dtype=int).reshape(-1, m)
    owners = ordered[participant].to_numpy()[::m]
    return rankings, owners


def bradley_terry(
    ratings: pd.DataFrame,
    *,
    n_boot: int = 200,
    seed: int = 0,
    max_rows: int | None = 200_000,
    confidence: float = CONFIDENCE,
    participant: str = "participant_id",
    block: str = "block_id",
    model: str = "model",
    condition: str = "condition",
    rank: str = "rank",
) -> pd.DataFrame:
    """Plackett-Luce strength (log-worth) per model x condition from the rankings, with bootstrap CI.

    Plackett-Luce generalises Bradley-Terry from pairs to full rankings; each
    participant x block ranking is one observation and the items are the
    model x condition sources shown in it. ``strength`` is the log-worth
    centred to mean 0 across items (differences are log-odds of being ranked
    above); ``worth`` = softmax of strengths (sums to 1). The percentile
    bootstrap resamples participants with replacement (``n_boot`` times).
    Rankings with a missing or duplicated rank are dropped. When the rows
    exceed ``max_rows``, whole participants are subsampled; ``note`` says so.

    Examples
    --------
    >>> ratings = pd.DataFrame({"participant_id": np.repeat(list("abc"), 2), "block_id": "Q1",
    ...     "model": ["A", "B"] * 3, "condition": "base", "rank": [1.0, 2, 1, 2, 2, 1]})
    >>> bradley_terry(ratings, n_boot=0)[["model", "strength", "worth"]].round(4)
      model  strength   worth
    0     A    0.3466  0.6667
    1     B   -0.3466  0.3333
    """
    problem = _missing_columns_note(ratings, [participant, block, model, condition, rank])
    if problem:
        return _note_frame(BRADLEY_TERRY_COLUMNS, problem)
    data = ratings.dropna(subset=[rank])
    # A ranking is kept when no rank repeats in it; vectorised (a Python call per ranking took minutes).
    repeated = data.duplicated([participant, block, rank], keep=False)
    valid = ~repeated.groupby([data[participant], data[block]], observed=True).transform("any")
    data = data[valid.astype(bool)]
    if data.empty:
        return _note_frame(BRADLEY_TERRY_COLUMNS, "no complete rankings (ranking off?)")
    data, subsample_note = _subsample_participants(data, max_rows, seed, participant)
    items = data[[model, condition]].drop_duplicates().sort_values([model, condition]).reset_index(drop=True)
    codes = pd.MultiIndex.from_frame(items).get_indexer(pd.MultiIndex.from_frame(data[[model, condition]]))
    rankings, owners = _rankings_array(data, participant, block, rank, pd.Series(codes, index=data.index))
    if rankings.shape[1] < 2:
        note = "every ranking holds one item: nothing was ranked above anything"
        return _note_frame(BRADLEY_TERRY_COLUMNS, _join_notes(subsample_note, note))
    # Distinct rankings are few (orders of the few items of each block): the fits run on them, with counts.
    distinct, which = np.unique(rankings, axis=0, return_inverse=True)
    strengths = plackett_luce(distinct, len(items), counts=np.bincount(which.ravel(), minlength=len(distinct)))
    low, high = _bootstrap_ci(distinct, which.ravel(), owners, len(items), strengths, n_boot, seed, confidence)
    finite = np.isfinite(strengths)
    worth = np.where(finite, np.exp(np.where(finite, strengths, 0.0)), 0.0)
    table = items.rename(columns={model: "model", condition: "condition"}).assign(
        strength=strengths, ci_low=low, ci_high=high, worth=worth / worth.sum(),
        n_rankings=len(rankings), n_participants=len(np.unique(owners)), n_boot=n_boot,
        method="Plackett-Luce (MM), percentile bootstrap over participants",
    )
    table["note"] = [
        _join_notes(subsample_note, "" if ok else "never ranked above another item: no finite strength")
        for ok in finite
    ]
    return table[BRADLEY_TERRY_COLUMNS]


def _bootstrap_ci(distinct: np.ndarray, which: np.ndarray, owners: np.ndarray, n_items: int, estimate: np.ndarray,
                  n_boot: int, seed: int, confidence: float) -> tuple[np.ndarray, np.ndarray]:
    """Percentile CI over participants resampled with replacement.

    ``which`` gives the distinct ranking (a row of ``distinct``) of each
    observed ranking, ``owners`` its participant. A resample repeats each
    participant's rankings as often as it drew the participant, so the counts
    of the distinct rankings are the draw counts times the per-participant counts.
    """
    if n_boot <= 0:
        return np.full(n_items, np.nan), np.full(n_items, np.nan)
    rng = np.random.default_rng(seed)
    people, person_index = np.unique(owners, return_inverse=True)
    per_person = sparse.csr_array((np.ones(len(which)), (person_index.ravel(), which)),
                                  shape=(len(people), len(distinct)))
    start = np.where(np.isfinite(estimate), estimate, 0.0)
    chosen = np.stack([np.bincount(rng.integers(0, len(people), len(people)), minlength=len(people))
                       for _ in range(n_boot)], axis=1).astype(float)
    draws = _plackett_luce_draws(distinct, n_items, (per_person.T @ chosen).T, tol=1e-8, start=start)
    tail = (1 - confidence) / 2 * 100
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        draws[~np.isfinite(draws)] = np.nan
        return np.nanpercentile(draws, tail, axis=0), np.nanpercentile(draws, 100 - tail, axis=0)


# ---------------------------------------------------------------------------
# Position bias
# ---------------------------------------------------------------------------

POSITION_COLUMNS = [
    "position", "n", "mean", "sd", "ci_low", "ci_high", "test", "statistic", "df", "p", "n_participants",
    "holm_family", "note",
]


def position_bias(
    ratings: pd.DataFrame,
    *,
    participant: str = "participant_id",
    position: str = "position",
    rating: str = "rating",
) -> pd.DataFrame:
    """Mean rating per display position, and a Friedman test that the profile is flat.

    Each participant's mean rating at each position is one observation; the
    Friedman test (repeated measures, no normality assumed) uses the
    participants who saw every position. The test columns (``test,
    statistic, df, p, n_participants``) repeat on every row. ``n`` is the
    number of ratings at the position; the CI is over those ratings.

    Examples
    --------
    >>> ratings = pd.DataFrame({"participant_id": np.repeat(list("abcd"), 3), "position": [1, 2, 3] * 4,
    ...                         "rating": [5.0, 3, 1, 4, 3, 2, 5, 2, 1, 4, 2, 3]})
    >>> position_bias(ratings)[["position", "mean", "statistic", "n_participants"]].round(3)
       position  mean  statistic  n_participants
    0         1  4.50        6.5               4
    1         2  2.50        6.5               4
    2         3  1.75        6.5               4
    """
    problem = _missing_columns_note(ratings, [participant, position, rating])
    if problem:
        return _note_frame(POSITION_COLUMNS, problem)
    data = ratings.dropna(subset=[rating, position])
    if data.empty:
        return _note_frame(POSITION_COLUMNS, "no rating with a position (ranking-only study?)")
    rows = [{"position": key, **mean_ci(cells[rating].to_numpy(dtype=float))}
            for key, cells in data.groupby(position, sort=True)]
    table = pd.DataFrame(rows)
    per_participant = data.pivot_table(index=participant, columns=position, values=rating, aggfunc="mean").dropna()
    n, k = per_participant.shape
    test = {"test": "Friedman", "statistic": np.nan, "df": k - 1, "p": np.nan, "n_participants": n,
            "holm_family": "none: a single test", "note": ""}
    if k < 3 or n < 2:
        test["note"] = "needs at least 3 positions and 2 participants who saw all of them"
    elif np.ptp(per_participant.to_numpy(), axis=1).max() == 0:
        test["note"] = "every participant's position means are equal: no evidence of bias"
    else:
        result = stats.friedmanchisquare(*(per_participant[column].to_numpy(dtype=float)
                                           for column in per_participant.columns))
        test.update(statistic=float(result.statistic), p=float(result.pvalue),
                    note=friedman_reach_note(n, k, f"{n} participants over {k} positions"))
    return table.assign(**test)[POSITION_COLUMNS]
