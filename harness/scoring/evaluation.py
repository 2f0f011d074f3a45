"""The one evaluation path: predictions (from a run's records or a file) -> one score matrix
per repeat (0..n-1; a repeat without predictions: every score missing) -> metrics with
bootstrap CIs, overall and per item `group`. A two-turn run (records with `extra.turn`) is
evaluated turn by turn: the last turn's metrics plus `success@K`, each turn's, and the turn
gain (last - first)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from harness.core.dataset import Item
from harness.core.predictions import Predictions, PredictionsBuilder
from harness.core.records import Record
from harness.scoring import registry
from harness.scoring.metrics import (
    Aggregate,
    FloatArray,
    MetricSummary,
    MissingPolicy,
    ScoreMatrix,
    aggregate,
    build_matrix,
    per_item_values,
    summarize,
)
from harness.scoring.stats import paired_bootstrap_ci


@dataclass(frozen=True)
class Evaluation:
    aggregate: Aggregate
    matrices: list[ScoreMatrix]  # one per repeat, items in dataset order
    predictions: Predictions
    groups: dict[str, Aggregate] = field(default_factory=dict)  # per item group, sorted
    turns: list[tuple[int, Aggregate]] = field(default_factory=list)  # (turn, metrics) if any
    turn_gain: dict[str, MetricSummary] = field(default_factory=dict)  # last - first turn
    blocks: dict[str, Any] = field(default_factory=dict)  # a protocol's own metrics.json blocks

    def mean_scores(self) -> dict[str, FloatArray]:
        """Per item, the mean of each candidate's usable scores over repeats (NaN if none)."""
        return mean_scores(self.matrices)

    def to_json(self) -> dict[str, Any]:
        """metrics.json: the aggregate, and groups, turns and protocol blocks where given."""
        out = self.aggregate.to_json()
        if self.groups:
            out["groups"] = {name: agg.to_json() for name, agg in self.groups.items()}
        if self.turns:
            out["turns"] = [{"turn": turn, **agg.to_json()} for turn, agg in self.turns]
            out["turn_gain"] = {name: gain.to_json() for name, gain in self.turn_gain.items()}
        out |= self.blocks
        return out


def mean_scores(matrices: Sequence[ScoreMatrix]) -> dict[str, FloatArray]:
    """Per item, each candidate's mean finite score over the repeats (NaN where none)."""
    ids = matrices[0].item_ids
    if not ids:
        return {}
    stacked = np.stack([np.concatenate(m.scores) for m in matrices])
    usable = np.isfinite(stacked)
    total = np.where(usable, stacked, 0.0).sum(axis=0)
    count = usable.sum(axis=0)
    means = np.divide(total, count, out=np.full(total.shape, np.nan), where=count > 0)
    ends = np.cumsum([len(row) for row in matrices[0].scores])[:-1]
    return dict(zip(ids, np.split(means, ends), strict=True))


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
    """The aggregate of each group (`Item.group`, renamed by `merge_groups`; `(none)`), by
    name; none when no item has a group."""
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


class RecordsPass:
    """`evaluate_records`' one pass over a run's records, a record at a time (a run feeds it
    the records as it writes them)."""

    def __init__(self) -> None:
        self.by_turn: dict[int | None, PredictionsBuilder] = {}  # None: records of no turn

    def add(self, record: Record) -> None:
        turn = record.extra.get("turn")
        key = turn if isinstance(turn, int) else None
        builder = self.by_turn.get(key)
        if builder is None:
            builder = self.by_turn[key] = PredictionsBuilder()
        builder.add(record)


def evaluation_options(config: Mapping[str, Any]) -> dict[str, Any]:
    """The keyword arguments of `evaluate_records` from a run's config.yaml (with defaults)."""
    metrics = config.get("metrics") or {}
    return {
        "repeats": int(config.get("repeats") or 1),
        "missing": config.get("missing", "worst"),
        "n_bootstrap": int(config.get("n_bootstrap") or 1000),
        "seed": int(config.get("seed") or 0),
        "at": tuple(metrics.get("at") or ()),
        "merge_groups": dict(metrics.get("merge_groups") or {}),
    }


def evaluate_records(
    items: Sequence[Item],
    records: Iterable[Record] | RecordsPass,
    *,
    repeats: int,
    missing: MissingPolicy = "worst",
    n_bootstrap: int = 1000,
    seed: int = 0,
    at: Sequence[int] = (),
    merge_groups: Mapping[str, str] | None = None,
) -> Evaluation:
    """Metrics of a run's records (read once; or a `RecordsPass` over them), turn by turn
    where they have turns; a candidate scored by several calls gets their mean."""
    if isinstance(records, RecordsPass):
        one_pass = records
    else:
        one_pass = RecordsPass()
        for record in records:
            one_pass.add(record)
    options: dict[str, Any] = {
        "repeats": repeats,
        "missing": missing,
        "n_bootstrap": n_bootstrap,
        "seed": seed,
        "at": at,
        "merge_groups": merge_groups,
    }
    merging = one_pass.by_turn
    turns = sorted(t for t in merging if t is not None)
    if not turns:
        merged = merging[None].predictions() if None in merging else {}
        return evaluate_predictions(items, merged, **options)
    by_turn = [evaluate_predictions(items, merging[t].predictions(), **options) for t in turns]
    return _over_turns(turns, by_turn, missing=missing, at=at, n_bootstrap=n_bootstrap, seed=seed)


def success_at(
    by_turn: Sequence[Evaluation], *, missing: MissingPolicy, at: Sequence[int]
) -> dict[str, FloatArray]:
    """`success@K` per repeat and item: P(the gold in the top K at one turn or more), ties
    broken independently per turn: 1 - prod over turns of (1 - hit@K)."""
    out: dict[str, FloatArray] = {}
    for k in sorted({1, *at}):  # hit@1 is always reported, so is success@1
        missed = None
        for evaluation in by_turn:
            hits = np.stack(
                [
                    per_item_values(m, missing=missing, at=at)[f"hit@{k}"]
                    for m in evaluation.matrices
                ]
            )
            missed = 1.0 - hits if missed is None else missed * (1.0 - hits)
        assert missed is not None
        out[f"success@{k}"] = 1.0 - missed
    return out


def _over_turns(
    turns: list[int],
    by_turn: list[Evaluation],
    *,
    missing: MissingPolicy,
    at: Sequence[int],
    n_bootstrap: int,
    seed: int,
) -> Evaluation:
    """The last turn's evaluation with `success@K` among its metrics, and every turn's."""
    last, first = by_turn[-1], by_turn[0]
    success = success_at(by_turn, missing=missing, at=at)
    extra = {
        name: summarize(name, values, n_bootstrap=n_bootstrap, seed=seed)
        for name, values in success.items()
    }
    per_item = {name: _mean_over_repeats(values) for name, values in success.items()}
    final = replace(
        last.aggregate,
        metrics={**last.aggregate.metrics, **extra},
        per_item={**last.aggregate.per_item, **_present(per_item, last)},
    )
    return Evaluation(
        final,
        last.matrices,
        last.predictions,
        last.groups,
        turns=[(t, e.aggregate) for t, e in zip(turns, by_turn, strict=True)],
        turn_gain=turn_gain(first.aggregate, last.aggregate, n_bootstrap=n_bootstrap, seed=seed),
    )


def _mean_over_repeats(values: FloatArray) -> FloatArray:
    """Each item's mean over repeats (repeats x items), NaN where it has no value."""
    usable = np.isfinite(values)
    count = usable.sum(axis=0)
    total = np.where(usable, values, 0.0).sum(axis=0)
    mean: FloatArray = np.divide(total, count, out=np.full(total.shape, np.nan), where=count > 0)
    return mean


def _present(per_item: dict[str, FloatArray], evaluation: Evaluation) -> dict[str, FloatArray]:
    """Per-item values restricted to the items the aggregate counts (in its order)."""
    ids = evaluation.matrices[0].item_ids
    rows = [ids.index(item_id) for item_id in evaluation.aggregate.item_ids]
    return {name: values[rows] for name, values in per_item.items()}


def turn_gain(
    first: Aggregate, last: Aggregate, *, n_bootstrap: int = 1000, seed: int = 0
) -> dict[str, MetricSummary]:
    """Per metric (not a median), the mean of (last turn - first) over the shared items with
    a paired-bootstrap CI."""
    shared = [item for item in last.item_ids if item in set(first.item_ids)]
    row_first = {item: i for i, item in enumerate(first.item_ids)}
    row_last = {item: i for i, item in enumerate(last.item_ids)}
    gains: dict[str, MetricSummary] = {}
    for name, values in last.per_item.items():
        metric = registry.find(name)
        if (metric and metric.statistic == "median") or name not in first.per_item:
            continue
        before = first.per_item[name][[row_first[i] for i in shared]]
        after = values[[row_last[i] for i in shared]]
        difference = after - before
        if difference.size == 0:
            gains[name] = MetricSummary(mean=None, ci95=None)
            continue
        low, high = paired_bootstrap_ci(difference, n_bootstrap=n_bootstrap, seed=seed)
        gains[name] = MetricSummary(
            mean=round(float(difference.mean()), 6), ci95=(round(low, 6), round(high, 6))
        )
    return gains


def expected_score_records(records: list[Record]) -> list[Record] | None:
    """The records with each parsed pointwise score replaced by `extra.expected_score` (local
    judges' probability-weighted score); None when no record carries one."""
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


def no_scores_reason(metrics: Mapping[str, Any], stats: Mapping[str, Any]) -> str | None:
    """Why a run without one usable score has no metrics worth a table (else None)."""
    if metrics.get("coverage") not in (0, 0.0) or not stats.get("calls"):
        return None
    calls, errors = stats["calls"], stats.get("errors", 0)
    if errors == calls:
        return f"every call failed ({errors} of {calls})"
    return f"no usable score in {calls} call(s) ({errors} failed, the rest unparsable)"


class CoverageWarning(UserWarning):
    """Predictions that do not cover the dataset (`harness.evaluate` warns with it)."""


def coverage_warnings(
    items: Sequence[Item], predictions: Predictions, aggregate: Aggregate
) -> list[str]:
    """Items without a prediction and candidates without a score, as warnings."""
    given: set[str] = set()
    for by_item in predictions.values():
        given.update(by_item)
    absent = [item.id for item in items if item.id not in given]
    lines = []
    if absent:
        shown = ", ".join(absent[:5]) + (", ..." if len(absent) > 5 else "")
        treated = (
            "left out (missing: exclude)"
            if aggregate.missing_policy == "exclude"
            else "counted with every candidate unscored, at chance level (missing: worst; "
            "--missing exclude leaves them out)"
        )
        lines.append(f"no prediction for {len(absent)} of {len(items)} items ({shown}): {treated}")
    if aggregate.coverage < 1.0:
        lines.append(
            f"coverage {100 * aggregate.coverage:.1f}%: {100 - 100 * aggregate.coverage:.1f}% "
            "of the candidates have no score"
        )
    return lines
