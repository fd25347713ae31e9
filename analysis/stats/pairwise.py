"""Pairwise preference judgements: win rates, Bradley-Terry strengths, left/right position bias.

In a pairwise block (as Chatbot Arena and ACUTE-Eval run it) a participant
sees two responses side by side and says which is better: ``left``,
``right``, ``tie`` or ``both_bad``. The input is the pairwise frame
(``analysis.frames.pairwise_frame``, the rows of pairwise.csv): one row per
judgement with the participant, the ``left_*`` and ``right_*`` response's
model and condition, and the ``preference``. A source is a model x condition.

``pairwise_win_rates`` counts each source's and each condition's wins,
losses, ties and both-bad verdicts, with the win rate among decisive
judgements and its Wilson interval, and tests each pair of conditions with an
exact binomial test; ``pairwise_bradley_terry`` fits Bradley-Terry strengths
(choix) with a participant bootstrap; ``pairwise_position_bias`` asks whether
the left response wins more often than the right one.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import choix
import numpy as np
import pandas as pd
from scipy import sparse, stats
from scipy.sparse.csgraph import connected_components
from statsmodels.stats.proportion import proportion_confint

from analysis.stats.primitives import BINOMIAL_MIN_N, CONFIDENCE, _join_notes, _missing_columns_note, _note_frame, holm

#: What ``analysis.stats`` re-exports of this family.
__all__ = [
    "PAIRWISE_BT_COLUMNS", "PAIRWISE_POSITION_COLUMNS", "PAIRWISE_WIN_COLUMNS", "pairwise_bradley_terry",
    "pairwise_position_bias", "pairwise_win_rates",
]

#: The answers of a pairwise block, as pairwise.csv writes them.
LEFT, RIGHT, TIE, BOTH_BAD = "left", "right", "tie", "both_bad"
PREFERENCES = (LEFT, RIGHT, TIE, BOTH_BAD)

#: Pseudo-comparisons added in each direction between every two items before the Bradley-Terry fit (see
#: ``pairwise_bradley_terry``): small against real data, but they keep a strength finite for an item that
#: always (or never) won.
BT_ALPHA = 0.1
# The fixed-point iteration of I-LSR converges in a few dozen steps on these small matrices; choix's default of
# 100 can be short when a resample leaves an item with only pseudo-comparisons.
_BT_MAX_ITER = 10_000

_SIDES = ("left", "right")


def _decisive_note(decisive: int, tested: bool) -> str:
    """What a row's count of decisive judgements allows: no rate at all, or a test that cannot reach p < .05."""
    if not decisive:
        return "no decisive judgement: no win rate"
    if tested and decisive < BINOMIAL_MIN_N:
        return f"{decisive} decisive judgements: the test cannot reach p < 0.05"
    return ""


def _wilson(successes: np.ndarray, trials: np.ndarray, confidence: float) -> tuple[np.ndarray, np.ndarray]:
    """Wilson score interval per row; NaN where there are no trials."""
    successes, trials = np.asarray(successes, dtype=float), np.asarray(trials, dtype=float)
    some = trials > 0
    low, high = np.full(len(trials), np.nan), np.full(len(trials), np.nan)
    if some.any():
        low[some], high[some] = proportion_confint(successes[some], trials[some], alpha=1 - confidence,
                                                   method="wilson")
        # The bound is exactly 0 with no success and 1 with only successes; statsmodels leaves float dust there.
        low[some & (successes == 0)] = 0.0
        high[some & (successes == trials)] = 1.0
    return low, high


def _judgements(pairwise: pd.DataFrame, columns: dict[str, str]) -> pd.DataFrame:
    """The frame reduced to plain text columns (participant, sides' model/condition, preference)."""
    return pd.DataFrame({key: pairwise[name].astype(object).fillna("").astype(str).to_numpy()
                         for key, name in columns.items()})


def _unknown_preferences_note(data: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    known = data["preference"].isin(PREFERENCES)
    dropped = int((~known).sum())
    note = f"{dropped} judgements with a preference other than {', '.join(PREFERENCES)} left out" if dropped else ""
    return data[known], note


def _sides_long(data: pd.DataFrame, item: Sequence[str]) -> pd.DataFrame:
    """One row per judgement and side: the side's item (``item`` columns without the side prefix), its
    opponent's, and the outcome for that side (win, loss, tie, both_bad)."""
    outcome_of = {"left": {LEFT: "win", RIGHT: "loss"}, "right": {RIGHT: "win", LEFT: "loss"}}
    parts = []
    for side, other in (_SIDES, _SIDES[::-1]):
        part = pd.DataFrame({"participant": data["participant"].to_numpy()})
        for name in item:
            part[name] = data[f"{side}_{name}"].to_numpy()
            part[f"opponent_{name}"] = data[f"{other}_{name}"].to_numpy()
        part["outcome"] = data["preference"].map({**outcome_of[side], TIE: "tie", BOTH_BAD: "both_bad"}).to_numpy()
        parts.append(part)
    return pd.concat(parts, ignore_index=True)


def _tallies(long: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Comparisons, wins, losses, ties, both_bad, decisive and participants per ``keys``."""
    counts = pd.crosstab([long[k] for k in keys], long["outcome"])
    counts = counts.reindex(columns=["win", "loss", "tie", "both_bad"], fill_value=0)
    table = pd.DataFrame({
        "wins": counts["win"], "losses": counts["loss"], "ties": counts["tie"], "both_bad": counts["both_bad"],
    })
    table["comparisons"] = table.sum(axis=1)
    table["decisive"] = table["wins"] + table["losses"]
    table["n_participants"] = long.groupby(keys)["participant"].nunique()
    return table.reset_index()


PAIRWISE_WIN_COLUMNS = [
    "level", "model", "condition", "opponent", "comparisons", "wins", "losses", "ties", "both_bad", "decisive",
    "win_rate", "ci_low", "ci_high", "win_rate_ties_half", "n_participants", "p", "p_holm", "holm_family", "note",
]


def pairwise_win_rates(
    pairwise: pd.DataFrame,
    *,
    baseline: str | None = None,
    confidence: float = CONFIDENCE,
    participant: str = "participant_id",
    left_model: str = "left_model",
    right_model: str = "right_model",
    left_condition: str = "left_condition",
    right_condition: str = "right_condition",
    preference: str = "preference",
) -> pd.DataFrame:
    """Wins, losses, ties and both-bad verdicts per source and per condition, with win rates and exact tests.

    Rows at three levels (``level``):

    * ``source``: one per model x condition, over every judgement showing it
      against another source (``opponent`` blank);
    * ``condition``: one per condition, over the judgements showing it against
      another condition (``model`` and ``opponent`` blank); judgements of two
      sources of the same condition say nothing about conditions and are
      left out here;
    * ``pair``: one per two conditions that met, ``condition`` against
      ``opponent``: ``wins`` counts the judgements ``condition`` won. With a
      ``baseline`` (the design's), the baseline is the opponent of every
      pair it is in. A two-sided exact binomial test of wins against losses
      (``scipy.stats.binomtest``, p = 0.5 under the null) per pair, Holm across
      the pairs.

    ``comparisons`` counts all judgements of the row, ``decisive`` those with a
    winner (``wins + losses``). ``win_rate = wins / decisive``, with its Wilson
    score interval (``ci_low``, ``ci_high``; statsmodels
    ``proportion_confint(method="wilson")``); ties and both-bad verdicts are
    left out of it. ``win_rate_ties_half = (wins + (ties + both_bad) / 2) /
    comparisons`` counts a tie, and a both-bad verdict (neither preferred, a
    tie as Chatbot Arena counts it), as half a win. A judgement showing the same
    source on both sides is left out of every row. Preferences other than
    left, right, tie and both_bad are left out; ``note`` says how many.

    Examples
    --------
    >>> pairwise = pd.DataFrame({"participant_id": list("abcde"), "left_model": "M", "right_model": "M",
    ...     "left_condition": ["base", "tuned", "base", "tuned", "base"],
    ...     "right_condition": ["tuned", "base", "tuned", "base", "tuned"],
    ...     "preference": ["right", "left", "left", "tie", "both_bad"]})
    >>> table = pairwise_win_rates(pairwise, baseline="base")
    >>> table[["level", "condition", "opponent", "wins", "losses", "ties", "both_bad"]]
           level condition opponent  wins  losses  ties  both_bad
    0     source      base              1       2     1         1
    1     source     tuned              2       1     1         1
    2  condition      base              1       2     1         1
    3  condition     tuned              2       1     1         1
    4       pair     tuned     base     2       1     1         1
    >>> table[["win_rate", "win_rate_ties_half", "p"]].iloc[-1].round(3).tolist()
    [0.667, 0.6, 1.0]
    """
    columns = {"participant": participant, "left_model": left_model, "right_model": right_model,
               "left_condition": left_condition, "right_condition": right_condition, "preference": preference}
    problem = _missing_columns_note(pairwise, list(columns.values()))
    if problem:
        return _note_frame(PAIRWISE_WIN_COLUMNS, problem)
    data, note = _unknown_preferences_note(_judgements(pairwise, columns))
    long = _sides_long(data, ["model", "condition"])
    sources = long[(long["model"] != long["opponent_model"]) | (long["condition"] != long["opponent_condition"])]
    if sources.empty:
        return _note_frame(PAIRWISE_WIN_COLUMNS, _join_notes(note, "no judgement between two different sources"))
    by_source = _tallies(sources, ["model", "condition"]).assign(level="source", opponent="")
    between = long[long["condition"] != long["opponent_condition"]]
    tables = [by_source]
    if not between.empty:
        by_condition = _tallies(between, ["condition"]).assign(level="condition", model="", opponent="")
        tables += [by_condition, _pair_rows(between, baseline)]
    table = pd.concat(tables, ignore_index=True)
    low, high = _wilson(table["wins"], table["decisive"], confidence)
    table["win_rate"] = table["wins"] / table["decisive"].where(table["decisive"] > 0)
    table["win_rate_ties_half"] = (table["wins"] + (table["ties"] + table["both_bad"]) / 2) / table["comparisons"]
    table["ci_low"], table["ci_high"] = low, high
    table["note"] = [_join_notes(note, _decisive_note(int(decisive), level == "pair"))
                     for decisive, level in zip(table["decisive"], table["level"])]
    if "p" not in table:
        table["p"] = np.nan
    pairs = (table["level"] == "pair").to_numpy()
    tested = pairs & table["p"].notna().to_numpy()
    table["p_holm"] = np.nan
    table.loc[tested, "p_holm"] = holm(table.loc[tested, "p"].to_numpy())
    family = (f"the {int(tested.sum())} binomial tests of the condition pairs" if tested.any()
              else "none: no pair of conditions has a decisive judgement")
    table["holm_family"] = np.where(pairs, family, "")
    return table[PAIRWISE_WIN_COLUMNS]


def _pair_rows(between: pd.DataFrame, baseline: str | None) -> pd.DataFrame:
    """One row per two conditions that met, ``condition`` against ``opponent``, with the exact binomial test."""
    conditions = sorted(set(between["condition"]))
    if baseline in conditions:
        # The baseline last: every pair it is in then reads "<other> against the baseline".
        conditions = [c for c in conditions if c != baseline] + [baseline]
    order = {name: k for k, name in enumerate(conditions)}
    first = between[between["condition"].map(order) < between["opponent_condition"].map(order)]
    table = _tallies(first.rename(columns={"opponent_condition": "opponent"}), ["condition", "opponent"])
    table = table.assign(level="pair", model="")
    table["p"] = [stats.binomtest(int(w), int(w + l), 0.5, alternative="two-sided").pvalue if w + l else np.nan
                  for w, l in zip(table["wins"], table["losses"])]
    return table


# ---------------------------------------------------------------------------
# Bradley-Terry
# ---------------------------------------------------------------------------

PAIRWISE_BT_COLUMNS = [
    "level", "model", "condition", "strength", "ci_low", "ci_high", "p_beats_baseline", "p_ci_low", "p_ci_high",
    "decisive", "wins", "n_participants", "anchor", "alpha", "n_boot", "method", "note",
]


def _strengths(counts: np.ndarray, alpha: float, initial: np.ndarray | None = None) -> np.ndarray:
    """Bradley-Terry log-strengths (mean zero) of a win-count matrix (``counts[i, j]``: i beat j) plus ``alpha``
    pseudo-wins each way between every two items, by choix's I-LSR on the dense matrix.

    All NaN when the maximum-likelihood estimate does not exist, which only ``alpha = 0`` allows: an item that
    never won (choix finds no stationary distribution, ValueError) or never lost (no convergence, RuntimeError).
    """
    regularised = counts + alpha * (1.0 - np.eye(len(counts)))
    try:
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            strengths = choix.ilsr_pairwise_dense(regularised, alpha=0.0, initial_params=initial,
                                                  max_iter=_BT_MAX_ITER)
    except (ValueError, RuntimeError):
        return np.full(len(counts), np.nan)
    return strengths if np.isfinite(strengths).all() else np.full(len(counts), np.nan)


def pairwise_bradley_terry(
    pairwise: pd.DataFrame,
    *,
    baseline: str | None = None,
    n_boot: int = 200,
    seed: int = 0,
    alpha: float = BT_ALPHA,
    confidence: float = CONFIDENCE,
    participant: str = "participant_id",
    left_model: str = "left_model",
    right_model: str = "right_model",
    left_condition: str = "left_condition",
    right_condition: str = "right_condition",
    preference: str = "preference",
) -> pd.DataFrame:
    """Bradley-Terry strengths per condition and per source (model x condition), with bootstrap intervals.

    Under Bradley-Terry, item i beats item j with probability
    ``1 / (1 + exp(-(s_i - s_j)))``. The strengths ``s`` are fitted by choix
    (``ilsr_pairwise_dense``, the maximum-likelihood estimate by iterative
    Luce spectral ranking) on the decisive judgements only: ties and both-bad
    verdicts are left out, as are judgements of one item against itself
    (at the condition level, two sources of the same condition). Before the
    fit, ``alpha`` pseudo-wins are added in each direction between every two
    items (default 0.1): the estimate then exists even for an item that
    always or never won, and moves little where there are real judgements.

    ``level`` is ``condition`` (model blank) or ``source``. Strengths are log
    strengths anchored (``anchor``) to the ``baseline`` condition where the
    study names one: the baseline's strength is 0 at the condition level, and
    the mean strength of its sources is 0 at the source level; without a
    baseline (or when it has no judgement) they are centred to mean 0.
    ``p_beats_baseline = 1 / (1 + exp(-strength))`` is the implied probability
    of beating the baseline (at the source level: a source of the baseline of
    mean strength); blank without a baseline.

    Intervals are percentile intervals over ``n_boot`` bootstrap resamples of
    the participants (not of the judgements: one participant's judgements stay
    together), drawn by ``numpy.random.default_rng(seed)``, each refitted and
    anchored the same way; ``p_ci_low``/``p_ci_high`` are the strength
    interval mapped to probabilities. When the items' judgements fall into
    groups that never met, strengths across groups are not identified: the
    level's rows are blank and ``note`` says so.

    Examples
    --------
    >>> pairwise = pd.DataFrame({"participant_id": list("abcdef"), "left_model": "M", "right_model": "M",
    ...     "left_condition": ["base", "tuned"] * 3, "right_condition": ["tuned", "base"] * 3,
    ...     "preference": ["right", "left", "right", "right", "right", "tie"]})
    >>> table = pairwise_bradley_terry(pairwise, baseline="base", n_boot=0, alpha=0.0)
    >>> table.query("level == 'condition'")[["condition", "wins", "strength", "p_beats_baseline"]].round(4)
      condition  wins  strength  p_beats_baseline
    0      base     1    0.0000               0.5
    1     tuned     4    1.3863               0.8
    """
    columns = {"participant": participant, "left_model": left_model, "right_model": right_model,
               "left_condition": left_condition, "right_condition": right_condition, "preference": preference}
    problem = _missing_columns_note(pairwise, list(columns.values()))
    if problem:
        return _note_frame(PAIRWISE_BT_COLUMNS, problem)
    data, note = _unknown_preferences_note(_judgements(pairwise, columns))
    decisive = data[data["preference"].isin((LEFT, RIGHT))]
    if decisive.empty:
        return _note_frame(PAIRWISE_BT_COLUMNS, _join_notes(note, "no decisive judgement (only ties or both bad)"))
    winner_is_left = (decisive["preference"] == LEFT).to_numpy()
    people, person = np.unique(decisive["participant"].to_numpy(), return_inverse=True)
    sides = {side: decisive[f"{side}_model"] + "\x1f" + decisive[f"{side}_condition"] for side in _SIDES}
    levels = [("condition", {side: decisive[f"{side}_condition"] for side in _SIDES}), ("source", sides)]
    tables = []
    for level, labels in levels:
        winners = np.where(winner_is_left, labels["left"], labels["right"])
        losers = np.where(winner_is_left, labels["right"], labels["left"])
        apart = winners != losers
        fit = _BradleyTerryFit(winners[apart], losers[apart], person[apart], len(people), alpha)
        tables.append(fit.table(level, baseline, n_boot, seed, confidence))
    table = pd.concat(tables, ignore_index=True)
    table["alpha"], table["n_boot"] = alpha, n_boot
    table["method"] = f"Bradley-Terry (choix I-LSR, {alpha:g} pseudo-wins each way), percentile bootstrap over participants"
    table["note"] = [_join_notes(note, row) for row in table["note"]]
    return table[PAIRWISE_BT_COLUMNS]


class _BradleyTerryFit:
    """The decisive judgements of one level (items by label) as per-participant win-count matrices."""

    def __init__(self, winners: np.ndarray, losers: np.ndarray, person: np.ndarray, n_people: int, alpha: float):
        self.items = sorted(set(winners) | set(losers))
        code = {label: k for k, label in enumerate(self.items)}
        k = len(self.items)
        win, lose = np.array([code[w] for w in winners], dtype=int), np.array([code[l] for l in losers], dtype=int)
        # Row p, column i*k + j: how often participant p saw item i beat item j.
        self.per_person = sparse.csr_array((np.ones(len(win)), (person, win * k + lose)), shape=(n_people, k * k))
        self.counts = np.asarray(self.per_person.sum(axis=0)).reshape(k, k)
        self.participants = np.asarray([
            len(np.unique(person[(win == i) | (lose == i)])) for i in range(k)
        ])
        self.alpha = alpha

    def _groups(self) -> int:
        met = sparse.csr_array(self.counts + self.counts.T > 0)
        return connected_components(met, directed=False)[0] if len(self.items) else 0

    def table(self, level: str, baseline: str | None, n_boot: int, seed: int, confidence: float) -> pd.DataFrame:
        models, conditions = self._names(level)
        table = pd.DataFrame({"level": level, "model": models, "condition": conditions,
                              "decisive": (self.counts.sum(axis=1) + self.counts.sum(axis=0)).astype(int),
                              "wins": self.counts.sum(axis=1).astype(int), "n_participants": self.participants})
        anchor_of = np.array([c == baseline for c in conditions], dtype=bool)
        anchored = baseline is not None and anchor_of.any()
        table["anchor"] = (f"{baseline} = 0" if level == "condition" else f"mean of the {baseline} sources = 0") \
            if anchored else "mean 0"
        groups = self._groups()
        if len(self.items) < 2 or groups > 1:
            why = ("one item: nothing to compare" if len(self.items) < 2 else
                   f"the judgements form {groups} groups that never met: strengths across them are not identified")
            return table.assign(**{name: np.nan for name in ("strength", "ci_low", "ci_high", "p_beats_baseline",
                                                             "p_ci_low", "p_ci_high")}, note=why)
        strength = self._anchor(_strengths(self.counts, self.alpha), anchor_of if anchored else None)
        if not np.isfinite(strength).all():
            return table.assign(**{name: np.nan for name in ("strength", "ci_low", "ci_high", "p_beats_baseline",
                                                             "p_ci_low", "p_ci_high")},
                                note="no maximum-likelihood estimate: an item always or never won (alpha = 0)")
        (low, high), failed = self._bootstrap(strength, anchor_of if anchored else None, n_boot, seed, confidence)
        table["strength"], table["ci_low"], table["ci_high"] = strength, low, high
        for column, values in (("p_beats_baseline", strength), ("p_ci_low", low), ("p_ci_high", high)):
            table[column] = 1.0 / (1.0 + np.exp(-values)) if anchored else np.nan
        table["note"] = f"{failed} of {n_boot} resamples without an estimate left out of the interval" if failed else ""
        return table

    def _names(self, level: str) -> tuple[list[str], list[str]]:
        if level == "condition":
            return [""] * len(self.items), list(self.items)
        pairs = [label.split("\x1f", 1) for label in self.items]
        return [p[0] for p in pairs], [p[1] for p in pairs]

    @staticmethod
    def _anchor(strength: np.ndarray, anchor_of: np.ndarray | None) -> np.ndarray:
        shift = strength[..., anchor_of].mean(axis=-1) if anchor_of is not None else strength.mean(axis=-1)
        return strength - np.expand_dims(shift, -1)

    def _bootstrap(self, estimate: np.ndarray, anchor_of: np.ndarray | None, n_boot: int, seed: int,
                   confidence: float) -> tuple[tuple[np.ndarray, np.ndarray], int]:
        """Percentile interval over participants resampled with replacement, and the number of resamples without
        an estimate. A resample's win counts are the draw counts times each participant's own counts."""
        k = len(self.items)
        n_people = self.per_person.shape[0]
        if n_boot <= 0 or n_people < 2:
            return (np.full(k, np.nan), np.full(k, np.nan)), 0
        rng = np.random.default_rng(seed)
        weights = rng.multinomial(n_people, np.full(n_people, 1.0 / n_people), size=n_boot)
        resampled = np.asarray(self.per_person.T @ weights.T).T.reshape(n_boot, k, k)
        start = estimate - estimate.mean()
        draws = self._anchor(np.array([_strengths(counts, self.alpha, start) for counts in resampled]), anchor_of)
        failed = int(np.isnan(draws).any(axis=1).sum())
        tail = (1 - confidence) / 2 * 100
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            return (np.nanpercentile(draws, tail, axis=0), np.nanpercentile(draws, 100 - tail, axis=0)), failed


# ---------------------------------------------------------------------------
# Position bias
# ---------------------------------------------------------------------------

PAIRWISE_POSITION_COLUMNS = [
    "judgements", "decisive", "left", "right", "ties", "both_bad", "left_share", "ci_low", "ci_high", "p",
    "tie_share", "both_bad_share", "n_participants", "note",
]


def pairwise_position_bias(
    pairwise: pd.DataFrame,
    *,
    confidence: float = CONFIDENCE,
    participant: str = "participant_id",
    preference: str = "preference",
) -> pd.DataFrame:
    """Does the left response win more often than the right one? One row over every judgement.

    ``left_share = left / decisive`` is the share of the decisive judgements
    (a side preferred) that chose the left response, with its Wilson score
    interval, and ``p`` the two-sided exact binomial test of ``left`` out of
    ``decisive`` against 0.5 (``scipy.stats.binomtest``). Display order is
    randomised per participant, so without a bias the share is 0.5 whichever
    sources are compared. ``tie_share`` and ``both_bad_share`` are shares of
    all ``judgements``.

    Examples
    --------
    >>> pairwise = pd.DataFrame({"participant_id": list("abcdefgh"),
    ...     "preference": ["left"] * 5 + ["right", "tie", "both_bad"]})
    >>> pairwise_position_bias(pairwise)[["decisive", "left", "left_share", "p", "tie_share"]].round(4)
       decisive  left  left_share       p  tie_share
    0         6     5      0.8333  0.2188      0.125
    """
    problem = _missing_columns_note(pairwise, [participant, preference])
    if problem:
        return _note_frame(PAIRWISE_POSITION_COLUMNS, problem)
    data, note = _unknown_preferences_note(_judgements(pairwise, {"participant": participant,
                                                                  "preference": preference}))
    counts = data["preference"].value_counts().reindex(PREFERENCES, fill_value=0)
    left, right, ties, both_bad = (int(counts[name]) for name in PREFERENCES)
    decisive, judgements = left + right, len(data)
    low, high = _wilson(np.array([left]), np.array([decisive]), confidence)
    row = {
        "judgements": judgements, "decisive": decisive, "left": left, "right": right, "ties": ties,
        "both_bad": both_bad, "left_share": left / decisive if decisive else np.nan,
        "ci_low": low[0], "ci_high": high[0],
        "p": stats.binomtest(left, decisive, 0.5, alternative="two-sided").pvalue if decisive else np.nan,
        "tie_share": ties / judgements if judgements else np.nan,
        "both_bad_share": both_bad / judgements if judgements else np.nan,
        "n_participants": int(data["participant"].nunique()),
        "note": _join_notes(note, "no decisive judgement: no test" if not decisive
                            else _decisive_note(decisive, tested=True)),
    }
    return pd.DataFrame([row], columns=PAIRWISE_POSITION_COLUMNS)
