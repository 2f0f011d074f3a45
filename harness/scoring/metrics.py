"""Aggregation of the tie-aware ranking metrics (docs/metrics.md) over items and repeats:
per-item values from the metric table (`registry`) on padded blocks (`ranking`), means with
percentile-bootstrap CIs. An item without a relevant candidate scores 0."""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from harness.core.dataset import RELEVANCE_FORMS, Item
from harness.core.errors import HarnessError
from harness.core.predictions import MissingPolicy, ScoreRow
from harness.scoring import registry
from harness.scoring.ranking import RankedBlock
from harness.scoring.sorted_block import FloatArray, IntArray
from harness.scoring.tau_b import kendall_tau_b

__all__ = [
    "MAX_BOOTSTRAP",
    "Aggregate",
    "FloatArray",
    "MetricSummary",
    "MissingPolicy",
    "ScoreMatrix",
    "aggregate",
    "build_matrix",
    "kendall_tau_b",
    "metric_names",
    "per_item_metrics",
    "per_item_values",
    "summarize",
]

BLOCK_ELEMENTS = 1 << 15  # rows x columns per block of items: small enough to stay in cache
BOOTSTRAP_ELEMENTS = 1 << 20  # resamples x items per block of bootstrap resamples
MAX_BOOTSTRAP = 100_000  # resamples a run or `harness evaluate` may ask for


def metric_names(at: Sequence[int] = (), *, single_gold: bool = False) -> tuple[str, ...]:
    """The names reported, in order, for cut-offs `at`."""
    at = _cutoffs(at)
    ranks = registry.names("single-gold") if single_gold else ()
    return registry.names("ranking") + registry.names("retrieval", at) + ranks


def block_metrics(
    scores: FloatArray, gains: FloatArray, lengths: IntArray, names: Sequence[str]
) -> tuple[dict[str, FloatArray], RankedBlock]:
    """The per-item values of `names` on one padded block (`harness.scoring.ranking`)."""
    block = RankedBlock(scores, gains, lengths)
    values = {}
    for name in names:
        metric = registry.find(name)
        assert metric is not None and metric.per_item is not None, name
        values[name] = metric.per_item(block, registry.cutoff_of(name) or 0)
    return values, block


def _cutoffs(at: Sequence[int]) -> tuple[int, ...]:
    for k in at:
        if isinstance(k, bool) or not isinstance(k, int | np.integer) or k < 1:
            raise HarnessError(f"metric cut-offs must be integers >= 1, not {k!r}")
    return tuple(sorted({int(k) for k in at}))


def per_item_metrics(
    scores: FloatArray, relevance: FloatArray, *, at: Sequence[int] = ()
) -> dict[str, FloatArray]:
    """Metric values per item of one unpadded block (missing scores already -inf)."""
    lengths = np.full(scores.shape[0], scores.shape[1], dtype=np.int64)
    values, _ = block_metrics(scores, relevance, lengths, metric_names(at))
    return values


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
    n_items_without_relevant: int = 0
    tie_rate_ranking: float | None = None  # ties anywhere between candidates of unequal gain

    def to_json(self) -> dict[str, object]:
        return {
            "n_items": self.n_items,
            "n_candidates": self.n_candidates,
            "coverage": _round(self.coverage),
            "tie_rate": _round(self.tie_rate),
            "tie_rate_ranking": _round(self.tie_rate_ranking),
            "missing_policy": self.missing_policy,
            "n_repeats": self.n_repeats,
            "n_items_without_relevant": self.n_items_without_relevant,
            "metrics": {name: summary.to_json() for name, summary in self.metrics.items()},
        }


def _round(value: float | None) -> float | None:
    return None if value is None else round(float(value), 6)


@dataclass
class ScoreMatrix:
    """Scores of one repeat per item (NaN where missing) and the items' gains."""

    item_ids: list[str]
    scores: list[FloatArray]
    relevance: list[FloatArray]


def build_matrix(
    items: Sequence[Item], predictions: Mapping[str, Mapping[str, float | None]]
) -> ScoreMatrix:
    """Predictions aligned to the items' candidate order (NaN where missing)."""
    scores, relevance = [], []
    scaled: dict[int, FloatArray] = {}  # by the gains array: items share equal ones
    for item in items:
        if item.relevance_form is None:
            raise HarnessError(
                f"item {item.id} has no relevance judgement ({RELEVANCE_FORMS}): annotate "
                "the dataset before evaluating"
            )
        given = predictions.get(item.id, {})
        if isinstance(given, ScoreRow) and given.candidates == item.candidates:
            scores.append(given.array)  # read from a file, already in this form
        else:  # None (no usable score) and absent candidates both become NaN.
            scores.append(np.array(list(map(given.get, item.candidates)), dtype=np.float64))
        gains = item.gains
        unit = scaled.get(id(gains))
        if unit is None:
            unit = scaled[id(gains)] = _unit_scale(gains)
            unit.flags.writeable = False  # shared by the items with these gains
        relevance.append(unit)
    return ScoreMatrix([item.id for item in items], scores, relevance)


def _unit_scale(gains: FloatArray) -> FloatArray:
    """`gains` scaled exactly by a power of two into [0, 1) (gains near 1e308 overflow)."""
    top = float(gains.max(initial=0.0))
    if top <= 0.0:
        return gains
    return np.ldexp(gains, -math.frexp(top)[1])


@dataclass(frozen=True)
class _Repeat:
    values: dict[str, FloatArray]  # NaN for excluded items
    n_relevant: NDArray[np.int64]  # -1 for excluded items
    tied: FloatArray  # 1.0 where the top score is shared, NaN for excluded items
    mixed: FloatArray  # 1.0 where candidates of unequal gain share a score


def _padded(rows: Sequence[FloatArray], width: int) -> FloatArray:
    if all(len(row) == width for row in rows):
        return np.array(rows, dtype=np.float64).reshape(len(rows), width)
    out = np.zeros((len(rows), width))
    for i, row in enumerate(rows):
        out[i, : len(row)] = row
    return out


def _blocks(lengths: NDArray[np.int64]) -> list[NDArray[np.int64]]:
    """Row indices in blocks of similar candidate counts, at most BLOCK_ELEMENTS padded."""
    by_length = np.argsort(lengths, kind="stable")
    sorted_lengths = lengths[by_length]
    blocks, first = [], 0
    while first < len(by_length):
        most = min(BLOCK_ELEMENTS // max(int(sorted_lengths[first]), 1), len(by_length) - first)
        padded_size = np.arange(1, most + 1) * sorted_lengths[first : first + most]
        rows = max(1, int(np.searchsorted(padded_size, BLOCK_ELEMENTS, side="right")))
        blocks.append(by_length[first : first + rows])
        first += rows
    return blocks


def _per_item(matrix: ScoreMatrix, missing: MissingPolicy, at: tuple[int, ...]) -> _Repeat:
    """Per-item metrics (NaN for excluded items) and per-item tie indicators."""
    m = len(matrix.item_ids)
    names = metric_names(at, single_gold=True)  # all that `aggregate` may report
    values = {name: np.full(m, np.nan) for name in names}
    tied, mixed = np.full(m, np.nan), np.full(m, np.nan)
    n_relevant = np.full(m, -1, dtype=np.int64)
    lengths = np.array([len(row) for row in matrix.scores], dtype=np.int64)
    keep = np.arange(m)
    if missing == "exclude":
        keep = np.array([i for i in keep if not np.isnan(matrix.scores[i]).any()], dtype=np.int64)
    for rows in _blocks(lengths[keep]):
        index = keep[rows]
        width = int(lengths[index].max())
        scores = _padded([matrix.scores[i] for i in index], width)
        gains = _padded([matrix.relevance[i] for i in index], width)
        scores = np.where(np.isnan(scores), -np.inf, scores)
        computed, block = block_metrics(scores, gains, lengths[index], names)
        for name in names:
            values[name][index] = computed[name]
        n_relevant[index] = block.n_relevant
        tied[index], mixed[index] = block.top_tied, block.mixed_tied
    return _Repeat(values, n_relevant, tied, mixed)


def per_item_values(
    matrix: ScoreMatrix, *, missing: MissingPolicy = "worst", at: Sequence[int] = ()
) -> dict[str, FloatArray]:
    """Every metric's value per item of one repeat (NaN for an item `exclude` drops)."""
    return _per_item(matrix, missing, _cutoffs(at)).values


def resample_blocks(
    n_resamples: int, n_items: int, rng: np.random.Generator
) -> Iterator[tuple[slice, NDArray[np.int64]]]:
    """Every bootstrap's resamples of items, a block of rows at a time (bounded memory): one
    generator's stream, so together they equal `rng.integers(0, n_items, size=(n_resamples,
    n_items))` drawn at once, as earlier releases did (their intervals reproduce)."""
    step = max(1, BOOTSTRAP_ELEMENTS // max(n_items, 1))
    for first in range(0, n_resamples, step):
        size = min(step, n_resamples - first)
        yield slice(first, first + size), rng.integers(0, n_items, size=(size, n_items))


def resample_counts(
    n_resamples: int, n_items: int, rng: np.random.Generator
) -> Iterator[tuple[slice, FloatArray]]:
    """How often each item is drawn in each resample of `resample_blocks` (rows x items)."""
    for rows, drawn in resample_blocks(n_resamples, n_items, rng):
        offsets = n_items * np.arange(len(drawn))[:, None]
        counts = np.bincount((drawn + offsets).ravel(), minlength=drawn.size)
        yield rows, counts.reshape(len(drawn), n_items).astype(np.float64)


def summarize(
    name: str, per_repeat: FloatArray, *, n_bootstrap: int = 1000, seed: int = 0
) -> MetricSummary:
    """A metric's summary from its values per repeat and item (NaN where an item has none),
    as `aggregate` summarises."""
    values = np.atleast_2d(np.asarray(per_repeat, dtype=np.float64))
    present = np.isfinite(values).any(axis=0)
    if not present.any():
        return MetricSummary(mean=None, ci95=None)
    values = values[:, present]
    per_item = np.nanmean(values, axis=0)
    boot = np.empty(n_bootstrap)
    for rows, drawn in resample_blocks(n_bootstrap, per_item.size, np.random.default_rng(seed)):
        if _median(name):
            boot[rows] = np.median(per_item[drawn], axis=1)
        else:
            boot[rows] = per_item[drawn].mean(axis=1)
    return _summary(name, boot, values)


def _bootstrap(
    reported: Sequence[str],
    per_item: Mapping[str, FloatArray],
    n_boot: int,
    rng: np.random.Generator,
) -> dict[str, FloatArray]:
    """Each metric's statistic on every resample; the ranking metrics averaged as earlier
    releases did (their CIs reproduce bit for bit), the other means by resample counts."""
    n = len(next(iter(per_item.values())))
    out = {name: np.empty(n_boot) for name in reported}
    direct = set(registry.names("ranking"))
    others = [name for name in reported if name not in direct and not _median(name)]
    table = np.stack([per_item[name] for name in others], axis=1) if others else None
    for rows, drawn in resample_blocks(n_boot, n, rng):
        for name in reported:
            if name in direct:
                out[name][rows] = per_item[name][drawn].mean(axis=1)
            elif _median(name):
                out[name][rows] = np.median(per_item[name][drawn], axis=1)
        if table is not None:
            offsets = n * np.arange(len(drawn))[:, None]
            counts = np.bincount((drawn + offsets).ravel(), minlength=drawn.size)
            means = counts.reshape(len(drawn), n) @ table / n
            for column, name in enumerate(others):
                out[name][rows] = means[:, column]
    return out


def _median(name: str) -> bool:
    metric = registry.find(name)
    return metric is not None and metric.statistic == "median"


def _summary(name: str, boot: FloatArray, per_repeat: FloatArray) -> MetricSummary:
    """The statistic, its CI and, with several repeats, each repeat's and their std."""
    statistic = np.nanmedian if _median(name) else np.nanmean
    repeat_stats = [float(statistic(v)) for v in per_repeat if np.isfinite(v).any()]
    low, high = np.percentile(boot, [2.5, 97.5])
    multi = len(per_repeat) > 1
    return MetricSummary(
        mean=round(float(np.mean(repeat_stats)), 6),
        ci95=(round(float(low), 6), round(float(high), 6)),
        repeats=[round(x, 6) for x in repeat_stats] if multi else None,
        std=round(float(np.std(repeat_stats, ddof=1)), 6) if multi else None,
    )


def aggregate(
    repeats: Sequence[ScoreMatrix],
    *,
    missing: MissingPolicy = "worst",
    n_bootstrap: int = 1000,
    seed: int = 0,
    at: Sequence[int] = (),
) -> Aggregate:
    """Mean metrics with seeded percentile-bootstrap 95% CIs over items (and per-repeat
    means with several repeats); `at`: the cut-offs K of the retrieval families."""
    if not repeats:
        raise ValueError("no predictions to aggregate")
    cutoffs = _cutoffs(at)
    item_ids = repeats[0].item_ids
    per_repeat = [_per_item(matrix, missing, cutoffs) for matrix in repeats]
    all_scores = np.concatenate([np.concatenate(m.scores) for m in repeats])
    coverage = float(np.mean(~np.isnan(all_scores))) if all_scores.size else 0.0
    tied, mixed = (np.stack([getattr(r, name) for r in per_repeat]) for name in ("tied", "mixed"))
    tie_rate = float(np.nanmean(tied)) if np.isfinite(tied).any() else None
    tie_rate_ranking = float(np.nanmean(mixed)) if np.isfinite(mixed).any() else None

    n_relevant = np.max(np.stack([r.n_relevant for r in per_repeat]), axis=0)
    present = n_relevant >= 0  # not excluded in every repeat
    n_items = int(present.sum())
    n_relevant = n_relevant[present]
    single_gold = n_items > 0 and bool((n_relevant == 1).all())
    reported = metric_names(cutoffs, single_gold=single_gold)
    stacked = {name: np.stack([r.values[name] for r in per_repeat]) for name in reported}
    per_item = {name: np.nanmean(stacked[name][:, present], axis=0) for name in reported}
    summaries: dict[str, MetricSummary] = {}
    if n_items:
        boot = _bootstrap(reported, per_item, n_bootstrap, np.random.default_rng(seed))
        for name in reported:
            summaries[name] = _summary(name, boot[name], stacked[name])
    else:
        summaries = {name: MetricSummary(mean=None, ci95=None) for name in reported}
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
        n_items_without_relevant=int((n_relevant == 0).sum()),
        tie_rate_ranking=tie_rate_ranking,
    )
