"""Predict the mean human rating of a response from its frozen sentence embedding.

Ridge regression (scikit-learn) on all-MiniLM-L6-v2 embeddings, evaluated with
cross-validation grouped by scenario: every response of a held-out scenario is
unseen during fitting, so the error estimates how the predictor does on a new
scenario rather than on paraphrases of training items. Pure library code.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from analysis.automatic_metrics.metrics import ENCODER_NAME, EmbeddingCache, Encoder, embed

SERIAL_FORMAT = "rating-predictor/1"


def _group_splits(groups: np.ndarray, n_splits: int | None) -> list[tuple[np.ndarray, np.ndarray]]:
    """Leave-one-group-out by default; GroupKFold when ``n_splits`` is given."""
    from sklearn.model_selection import GroupKFold, LeaveOneGroupOut

    if len(np.unique(groups)) < 2:
        raise ValueError("grouped cross-validation needs at least two groups")
    splitter = LeaveOneGroupOut() if n_splits is None else GroupKFold(n_splits=n_splits)
    placeholder = np.zeros((len(groups), 1))
    return list(splitter.split(placeholder, groups=groups))


def _fit_ridge(embeddings: np.ndarray, ratings: np.ndarray, alpha: float) -> tuple[np.ndarray, float]:
    from sklearn.linear_model import Ridge

    model = Ridge(alpha=alpha).fit(embeddings, ratings)
    return np.asarray(model.coef_, dtype=float), float(model.intercept_)


def _spearman(observed: np.ndarray, predicted: np.ndarray) -> float:
    # A constant prediction (the mean baseline within one fold) has no ranking.
    if len(observed) < 2 or np.ptp(predicted) == 0 or np.ptp(observed) == 0:
        return float("nan")
    return float(stats.spearmanr(observed, predicted).statistic)


def _error_row(predictor: str, held_out: str, n_train: int, observed: np.ndarray, predicted: np.ndarray) -> dict[str, Any]:
    errors = predicted - observed
    return {
        "predictor": predictor,
        "held_out": held_out,
        "n_train": n_train,
        "n_test": len(observed),
        "mse": float(np.mean(errors**2)),
        "mae": float(np.mean(np.abs(errors))),
        "spearman": _spearman(observed, predicted),
    }


def cross_validate_ratings(
    embeddings: np.ndarray,
    ratings: Sequence[float],
    groups: Sequence[Any],
    *,
    alpha: float = 1.0,
    n_splits: int | None = None,
) -> pd.DataFrame:
    """Grouped cross-validation of ridge against a mean-rating baseline.

    Parameters
    ----------
    embeddings : numpy.ndarray
        (n, dim) frozen sentence embeddings.
    ratings : sequence of float
        Mean human rating per response.
    groups : sequence
        Group label per response (the scenario); a group is never split.
    alpha : float
        Ridge penalty (fixed, not tuned: tuning it on the same folds would make
        the held-out error optimistic).
    n_splits : int, optional
        ``None`` leaves one group out per fold; an int uses GroupKFold.

    Returns
    -------
    DataFrame
        Columns ``predictor`` (``ridge`` or ``mean_baseline``), ``held_out``
        (the held-out groups, or ``all`` for the pooled out-of-fold
        predictions), ``n_train, n_test, mse, mae, spearman``.
    """
    X = np.asarray(embeddings, dtype=float)
    y = np.asarray(ratings, dtype=float)
    g = np.asarray(groups)
    out_of_fold = {"ridge": np.empty_like(y), "mean_baseline": np.empty_like(y)}
    rows = []
    for train, test in _group_splits(g, n_splits):
        coef, intercept = _fit_ridge(X[train], y[train], alpha)
        fold_predictions = {"ridge": X[test] @ coef + intercept, "mean_baseline": np.full(len(test), y[train].mean())}
        held_out = ",".join(str(v) for v in sorted(set(g[test].tolist()), key=str))
        for name, predicted in fold_predictions.items():
            out_of_fold[name][test] = predicted
            rows.append(_error_row(name, held_out, len(train), y[test], predicted))
    pooled = [_error_row(name, "all", len(y), y, predicted) for name, predicted in out_of_fold.items()]
    table = pd.DataFrame(pooled + rows)
    return table.sort_values(["predictor", "held_out"], kind="stable", ignore_index=True)


@dataclass
class RatingPredictor:
    """A fitted ridge model from sentence embeddings to mean human rating.

    ``cv_mse``, ``cv_mae`` and ``cv_spearman`` are the pooled out-of-fold
    figures of the grouped cross-validation run before the final fit on all data.
    """

    coef: np.ndarray
    intercept: float
    alpha: float
    encoder_name: str
    n_train: int
    cv_mse: float
    cv_mae: float
    cv_spearman: float
    cv_results: pd.DataFrame = field(default_factory=pd.DataFrame, repr=False)

    def predict_embeddings(self, embeddings: np.ndarray) -> np.ndarray:
        """Predicted ratings for already computed embeddings."""
        return np.asarray(embeddings, dtype=float) @ self.coef + self.intercept

    def predict(
        self, texts: Sequence[str], *, encoder: Encoder | None = None, cache: EmbeddingCache | None = None
    ) -> np.ndarray:
        """Predicted mean rating per text (not clipped to the rating scale)."""
        return self.predict_embeddings(embed(list(texts), encoder, cache=cache))

    def score(
        self, texts: Sequence[str], *, encoder: Encoder | None = None, cache: EmbeddingCache | None = None
    ) -> pd.DataFrame:
        """Predicted rating per text, with the cross-validated error to read it against.

        Returns
        -------
        DataFrame
            ``text, predicted_rating, cv_mse, cv_mae, cv_rmse``.
        """
        texts = list(texts)
        return pd.DataFrame(
            {
                "text": texts,
                "predicted_rating": self.predict(texts, encoder=encoder, cache=cache),
                "cv_mse": self.cv_mse,
                "cv_mae": self.cv_mae,
                "cv_rmse": float(np.sqrt(self.cv_mse)),
            }
        )

    def to_bytes(self) -> bytes:
        """UTF-8 JSON (no pickle): safe to store in a database and load anywhere."""
        payload = {
            "format": SERIAL_FORMAT,
            "coef": self.coef.tolist(),  # floats round-trip exactly through JSON's repr
            "intercept": self.intercept,
            "alpha": self.alpha,
            "encoder_name": self.encoder_name,
            "n_train": self.n_train,
            "cv_mse": self.cv_mse,
            "cv_mae": self.cv_mae,
            "cv_spearman": self.cv_spearman,
            "cv_results": json.loads(self.cv_results.to_json(orient="records")),
        }
        return json.dumps(payload).encode("utf-8")

    @classmethod
    def from_bytes(cls, data: bytes) -> RatingPredictor:
        """Inverse of :meth:`to_bytes`."""
        payload = json.loads(data.decode("utf-8"))
        if payload.get("format") != SERIAL_FORMAT:
            raise ValueError(f"not a serialized rating predictor: format {payload.get('format')!r}")
        return cls(
            coef=np.asarray(payload["coef"], dtype=float),
            intercept=float(payload["intercept"]),
            alpha=float(payload["alpha"]),
            encoder_name=payload["encoder_name"],
            n_train=int(payload["n_train"]),
            cv_mse=float(payload["cv_mse"]),
            cv_mae=float(payload["cv_mae"]),
            cv_spearman=_float_or_nan(payload["cv_spearman"]),
            cv_results=pd.DataFrame(payload["cv_results"]),
        )


def _float_or_nan(value: float | None) -> float:
    return float("nan") if value is None else float(value)


def fit_predictor(
    frame: pd.DataFrame,
    *,
    text: str = "text",
    rating: str = "mean_rating",
    group: str = "scenario",
    alpha: float = 1.0,
    n_splits: int | None = None,
    encoder: Encoder | None = None,
    cache: EmbeddingCache | None = None,
    embeddings: np.ndarray | None = None,
) -> RatingPredictor:
    """Cross-validate by ``group``, then fit ridge on every row.

    Parameters
    ----------
    frame : DataFrame
        One row per response with the text, its mean human rating and its group.
    text, rating, group : str
        Column names.
    alpha : float
        Ridge penalty.
    n_splits : int, optional
        See :func:`cross_validate_ratings`.
    encoder, cache
        Passed to :func:`analysis.automatic_metrics.metrics.embed`.
    embeddings : numpy.ndarray, optional
        Precomputed embeddings in row order (skips the encoder).

    Returns
    -------
    RatingPredictor
        Fitted on all rows; carries the CV table and pooled CV error.
    """
    rated = frame[rating].notna().to_numpy()
    data = frame.loc[rated, [text, rating, group]]
    if embeddings is None:
        X = embed(data[text].astype(str).tolist(), encoder, cache=cache)
    elif len(embeddings) == len(frame):
        X = np.asarray(embeddings)[rated]  # unrated rows are left out of the fit, keep rows aligned
    else:
        raise ValueError(f"{len(embeddings)} embeddings for {len(frame)} rows")
    X = np.asarray(X, dtype=float)
    y = data[rating].to_numpy(float)
    cv = cross_validate_ratings(X, y, data[group].to_numpy(), alpha=alpha, n_splits=n_splits)
    pooled = cv[(cv["predictor"] == "ridge") & (cv["held_out"] == "all")].iloc[0]
    coef, intercept = _fit_ridge(X, y, alpha)
    return RatingPredictor(
        coef=coef,
        intercept=intercept,
        alpha=alpha,
        encoder_name=ENCODER_NAME,
        n_train=len(y),
        cv_mse=float(pooled["mse"]),
        cv_mae=float(pooled["mae"]),
        cv_spearman=float(pooled["spearman"]),
        cv_results=cv,
    )
