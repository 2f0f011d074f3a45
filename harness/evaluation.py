"""The one evaluation path: predictions (from a run's records or from a file) -> one score
matrix per repeat -> metrics with bootstrap CIs, overall and per item `group`. The runner,
`harness evaluate`, the reports and the Python API all come through here, so they count
repeats the same way: repeats 0..n-1, where n is the run's `repeats` (or, for a predictions
file, one past the highest repeat it holds), and a repeat without predictions counts as
every score missing."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from harness.dataset import Item
from harness.metrics import (
    Aggregate,
    FloatArray,
    MissingPolicy,
    ScoreMatrix,
    aggregate,
    build_matrix,
)
from harness.records import Predictions, Record, predictions_from_records


@dataclass(frozen=True)
class Evaluation:
    aggregate: Aggregate
    matrices: list[ScoreMatrix]  # one per repeat, items in dataset order
    predictions: Predictions
    groups: dict[str, Aggregate] = field(default_factory=dict)  # per item group, sorted

    def mean_scores(self) -> dict[str, FloatArray]:
        """Per item, the mean of each candidate's usable scores over repeats (NaN if none)."""
        out: dict[str, FloatArray] = {}
        for i, item_id in enumerate(self.matrices[0].item_ids):
            stacked = np.stack([m.scores[i] for m in self.matrices])
            usable = np.isfinite(stacked)
            total = np.where(usable, stacked, 0.0).sum(axis=0)
            count = usable.sum(axis=0)
            out[item_id] = np.divide(
                total, count, out=np.full(total.shape, np.nan), where=count > 0
            )
        return out

    def to_json(self) -> dict[str, Any]:
        """metrics.json: the overall aggregate, and `groups` (each group's aggregate) when the
        items carry groups."""
        out = self.aggregate.to_json()
        if self.groups:
            out["groups"] = {name: agg.to_json() for name, agg in self.groups.items()}
        return out


def _rows(matrix: ScoreMatrix, rows: Sequence[int]) -> ScoreMatrix:
    return ScoreMatrix(
        [matrix.item_ids[i] for i in rows],
        [matrix.scores[i] for i in rows],
        [matrix.relevance[i] for i in rows],
    )


def group_aggregates(
    items: Sequence[Item],
    matrices: Sequence[ScoreMatrix],
    *,
    merge_groups: Mapping[str, str] | None = None,
    **options: Any,
) -> dict[str, Aggregate]:
    """The aggregate of each group of items (`Item.group`, renamed by `merge_groups`), in
    name order; none when no item has a group (items without one form `(none)`)."""
    if not any(item.group for item in items):
        return {}
    merge = merge_groups or {}
    rows: dict[str, list[int]] = {}
    for row, item in enumerate(items):
        name = merge.get(item.group or "", item.group or "(none)")
        rows.setdefault(name, []).append(row)
    return {
        name: aggregate([_rows(m, rows[name]) for m in matrices], **options)
        for name in sorted(rows)
    }


def evaluate_predictions(
    items: Sequence[Item],
    predictions: Predictions,
    *,
    repeats: int | None = None,
    missing: MissingPolicy = "worst",
    n_bootstrap: int = 1000,
    seed: int = 0,
    at: Sequence[int] = (),
    merge_groups: Mapping[str, str] | None = None,
) -> Evaluation:
    """Metrics of `predictions` (repeat -> item id -> candidate -> score) against `items`,
    with hit@K, recall@K, precision@K and ndcg@K for each K of `at`."""
    n_repeats = repeats if repeats is not None else max(predictions, default=0) + 1
    matrices = [build_matrix(items, predictions.get(r, {})) for r in range(n_repeats)]
    options: dict[str, Any] = {
        "missing": missing,
        "n_bootstrap": n_bootstrap,
        "seed": seed,
        "at": at,
    }
    result = aggregate(matrices, **options)
    groups = group_aggregates(items, matrices, merge_groups=merge_groups, **options)
    return Evaluation(result, matrices, predictions, groups)


def evaluate_records(
    items: Sequence[Item],
    records: Iterable[Record],
    *,
    repeats: int,
    missing: MissingPolicy = "worst",
    n_bootstrap: int = 1000,
    seed: int = 0,
    at: Sequence[int] = (),
    merge_groups: Mapping[str, str] | None = None,
) -> Evaluation:
    """Metrics of a run's records (a candidate scored by several calls gets their mean)."""
    return evaluate_predictions(
        items,
        predictions_from_records(records),
        repeats=repeats,
        missing=missing,
        n_bootstrap=n_bootstrap,
        seed=seed,
        at=at,
        merge_groups=merge_groups,
    )


def expected_score_records(records: list[Record]) -> list[Record] | None:
    """The records with each parsed pointwise score replaced by the judge's probability-
    weighted score (`extra.expected_score`, local judges with `expected_score: true`), for
    the second metrics block; None when no record carries one. An answer that failed to
    parse stays missing; one whose score start was not found keeps its greedy score."""
    swapped, found = [], False
    for record in records:
        value = record.extra.get("expected_score")
        if value is not None and len(record.candidates) == 1:
            (cid,) = record.candidates
            if record.scores.get(cid) is not None:
                record = record.model_copy(update={"scores": {cid: float(value)}})
                found = True
        swapped.append(record)
    return swapped if found else None
