"""Tie-aware ranking metrics of DESIGN.md, vectorised over items with numpy.

Scores come as an (items x candidates) float matrix with NaN for a missing score, and
relevance as a matching matrix (N - human position). Every metric is the expectation over
uniformly random tie-breaking, computed in closed form from each candidate's tie group:
`p` = 1 + number of strictly better candidates, `g` = size of its tie group, so the group
occupies positions p .. p+g-1.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
from numpy.typing import NDArray

from harness.dataset import Item

MissingPolicy = Literal["worst", "exclude"]
METRIC_NAMES = ("hit@1", "mrr", "ndcg", "kendall_tau_b")
FloatArray = NDArray[np.float64]


def _tie_groups(scores: FloatArray) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    better = (scores[:, None, :] > scores[:, :, None]).sum(axis=2)
    equal = (scores[:, None, :] == scores[:, :, None]).sum(axis=2)
    return better + 1, equal


def _pairwise_sign(values: FloatArray) -> NDArray[np.int64]:
    # Comparisons instead of subtraction so that -inf (missing, policy worst) ties with -inf.
    a, b = values[:, :, None], values[:, None, :]
    return (a > b).astype(np.int64) - (a < b).astype(np.int64)


def per_item_metrics(scores: FloatArray, relevance: FloatArray) -> dict[str, FloatArray]:
    """Metric values per item for one block of items with the same candidate count N.

    `scores` must already have missing values replaced (policy `worst` uses -inf).
    """
    m, n = scores.shape
    positions, group = _tie_groups(scores)
    ranks = np.arange(1, n + 1)
    harmonic = np.concatenate([[0.0], np.cumsum(1.0 / ranks)])
    discount = np.concatenate([[0.0], np.cumsum(1.0 / np.log2(ranks + 1))])
    last = positions + group - 1

    rows = np.arange(m)
    best = relevance.argmax(axis=1)
    best_pos, best_group = positions[rows, best], group[rows, best]
    hit = np.where(best_pos == 1, 1.0 / best_group, 0.0)
    mrr = (harmonic[best_pos + best_group - 1] - harmonic[best_pos - 1]) / best_group

    mean_discount = (discount[last] - discount[positions - 1]) / group
    dcg = (relevance * mean_discount).sum(axis=1)
    ideal = (-np.sort(-relevance, axis=1) / np.log2(ranks + 1)).sum(axis=1)
    ndcg = np.divide(dcg, ideal, out=np.zeros(m), where=ideal > 0)

    tau = kendall_tau_b(scores, relevance)
    return {"hit@1": hit, "mrr": mrr, "ndcg": ndcg, "kendall_tau_b": tau}


def kendall_tau_b(x: FloatArray, y: FloatArray) -> FloatArray:
    """Row-wise Kendall's tau-b between two (items x N) matrices; 0 where a row is all tied."""
    m, n = x.shape
    x_sign, y_sign = _pairwise_sign(x), _pairwise_sign(y)
    concordance = (x_sign * y_sign).sum(axis=(1, 2)) / 2
    n_pairs = n * (n - 1) / 2
    untied_x = n_pairs - ((x_sign == 0).sum(axis=(1, 2)) - n) / 2
    untied_y = n_pairs - ((y_sign == 0).sum(axis=(1, 2)) - n) / 2
    denominator = np.sqrt(untied_x * untied_y)
    tau: FloatArray = np.divide(concordance, denominator, out=np.zeros(m), where=denominator > 0)
    return tau


def top_is_tied(scores: FloatArray) -> NDArray[np.bool_]:
    top = scores.max(axis=1, keepdims=True)
    result: NDArray[np.bool_] = (scores == top).sum(axis=1) > 1
    return result


@dataclass(frozen=True)
class MetricSummary:
    mean: float | None
    ci95: tuple[float, float] | None
    repeats: list[float] | None = None
    std: float | None = None

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {"mean": self.mean, "ci95": list(self.ci95) if self.ci95 else None}
        if self.repeats is not None:
            out["repeats"] = self.repeats
            out["std"] = self.std
        return out


@dataclass(frozen=True)
class Aggregate:
    n_items: int
    n_candidates: int
    coverage: float
    tie_rate: float | None
    missing_policy: MissingPolicy
    metrics: dict[str, MetricSummary]
    per_item: dict[str, FloatArray] = field(repr=False, default_factory=dict)
    item_ids: list[str] = field(repr=False, default_factory=list)
    n_repeats: int = 1

    def to_json(self) -> dict[str, object]:
        return {
            "n_items": self.n_items,
            "n_candidates": self.n_candidates,
            "coverage": _round(self.coverage),
            "tie_rate": _round(self.tie_rate),
            "missing_policy": self.missing_policy,
            "n_repeats": self.n_repeats,
            "metrics": {name: summary.to_json() for name, summary in self.metrics.items()},
        }


def _round(value: float | None) -> float | None:
    return None if value is None else round(float(value), 6)


@dataclass
class ScoreMatrix:
    """Scores of one repeat: one row per item (in `item_ids` order), NaN where missing."""

    item_ids: list[str]
    scores: list[FloatArray]
    relevance: list[FloatArray]


def build_matrix(
    items: Sequence[Item], predictions: Mapping[str, Mapping[str, float | None]]
) -> ScoreMatrix:
    """Align predictions ({item_id: {candidate: score}}) to the items' candidate order.

    An item without a prediction, or a candidate without a score, counts as missing.
    """
    scores, relevance = [], []
    for item in items:
        given = predictions.get(item.id, {})
        row = [given.get(cid) for cid in item.candidates]
        scores.append(np.array([np.nan if s is None else s for s in row], dtype=np.float64))
        rel = item.relevance
        relevance.append(np.array([rel[cid] for cid in item.candidates], dtype=np.float64))
    return ScoreMatrix([item.id for item in items], scores, relevance)


def _per_item(
    matrix: ScoreMatrix, missing: MissingPolicy
) -> tuple[dict[str, FloatArray], FloatArray]:
    """Per-item metrics (NaN for excluded items) and a per-item tied-top indicator."""
    m = len(matrix.item_ids)
    values = {name: np.full(m, np.nan) for name in METRIC_NAMES}
    tied = np.full(m, np.nan)
    sizes = np.array([len(row) for row in matrix.scores])
    for n in np.unique(sizes):
        (index,) = np.nonzero(sizes == n)
        scores = np.stack([matrix.scores[i] for i in index])
        relevance = np.stack([matrix.relevance[i] for i in index])
        if missing == "exclude":
            keep = ~np.isnan(scores).any(axis=1)
            index, scores, relevance = index[keep], scores[keep], relevance[keep]
        scores = np.where(np.isnan(scores), -np.inf, scores)
        if len(index) == 0:
            continue
        for name, vals in per_item_metrics(scores, relevance).items():
            values[name][index] = vals
        tied[index] = top_is_tied(scores)
    return values, tied


def aggregate(
    repeats: Sequence[ScoreMatrix],
    *,
    missing: MissingPolicy = "worst",
    n_bootstrap: int = 1000,
    seed: int = 0,
) -> Aggregate:
    """Mean metrics with seeded percentile-bootstrap 95% CIs over items; with several
    repeats also the per-repeat means and their standard deviation."""
    if not repeats:
        raise ValueError("no predictions to aggregate")
    item_ids = repeats[0].item_ids
    per_repeat = [_per_item(matrix, missing) for matrix in repeats]
    all_scores = np.concatenate([np.concatenate(m.scores) for m in repeats])
    coverage = float(np.mean(~np.isnan(all_scores))) if all_scores.size else 0.0
    tied = np.stack([t for _, t in per_repeat])
    tie_rate = float(np.nanmean(tied)) if np.isfinite(tied).any() else None

    stacked = {name: np.stack([vals[name] for vals, _ in per_repeat]) for name in METRIC_NAMES}
    present = np.isfinite(stacked["hit@1"]).any(axis=0)
    per_item = {name: np.nanmean(v[:, present], axis=0) for name, v in stacked.items()}
    n_items = int(present.sum())
    rng = np.random.default_rng(seed)
    resample = rng.integers(0, n_items, size=(n_bootstrap, n_items)) if n_items else None

    summaries: dict[str, MetricSummary] = {}
    for name in METRIC_NAMES:
        values = per_item[name]
        if n_items == 0 or resample is None:
            summaries[name] = MetricSummary(mean=None, ci95=None)
            continue
        boot = values[resample].mean(axis=1)
        low, high = np.percentile(boot, [2.5, 97.5])
        repeat_means = [float(np.nanmean(v)) for v in stacked[name] if np.isfinite(v).any()]
        multi = len(repeats) > 1
        summaries[name] = MetricSummary(
            mean=round(float(np.mean(repeat_means)), 6),
            ci95=(round(float(low), 6), round(float(high), 6)),
            repeats=[round(x, 6) for x in repeat_means] if multi else None,
            std=round(float(np.std(repeat_means, ddof=1)), 6) if multi else None,
        )
    n_candidates = max((len(row) for row in repeats[0].scores), default=0)
    return Aggregate(
        n_items=n_items,
        n_candidates=n_candidates,
        coverage=coverage,
        tie_rate=tie_rate,
        missing_policy=missing,
        metrics=summaries,
        per_item=per_item,
        item_ids=[item_ids[i] for i in np.flatnonzero(present)],
        n_repeats=len(repeats),
    )
