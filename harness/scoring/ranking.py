"""Tie-aware ranking metrics per item, from one sort per item (O(N log N), no N x N arrays).

A block of items is an (items x N) matrix of scores and a matching matrix of gains (relevance),
padded on the right: `lengths` holds each row's candidate count. Scores must already have
missing values replaced (policy `worst` uses -inf); gains of padding must be 0.

Each row is sorted by score, best first. A tie group then occupies the sorted positions
start .. end (0-based); a candidate in it has `p` = start + 1 and `g` = end - start + 1. Every
metric is the expectation over uniformly random tie-breaking, in closed form, and none depends
on the order the sort leaves within a tie:

- Hit@K, MRR: only the first tie group holding a candidate of maximal gain matters. With `c`
  such candidates among its `g`, their positions are a uniform random c-subset of the group,
  so P(none in its first m positions) = C(g-m, c) / C(g, c) (hypergeometric).
- Recall@K, Precision@K: a candidate of a group straddling K is in the top K with
  probability (K - start) / g.
- nDCG@K: each position of a group gets the group's mean gain (McSherry & Najork 2008).
- Kendall's tau-b (no tie-breaking): pairs counted from the same sort (`harness.scoring.tau_b`).

The sorted block itself is `harness.scoring.sorted_block`.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
from numpy.typing import NDArray

from harness.scoring.sorted_block import BoolArray, FloatArray, IntArray, SortedBlock, sort_block
from harness.scoring.tau_b import tau_b_of


# ------------------------------------------------------------------------ the other metrics
def survival(g: IntArray, c: IntArray, upto: int) -> FloatArray:
    """Per row, column m (0..upto): P(none of c marked members of a uniformly shuffled group
    of g lands in its first m positions) = C(g-m, c) / C(g, c) = prod_{j<m} (g-c-j) / (g-j),
    0 from m = g-c + 1 on; multiplied factor by factor (`cumprod`) so that the bits are the
    same on every CPU (numpy's `exp` is not)."""
    steps = np.arange(upto)
    free = np.maximum(g[:, None] - c[:, None] - steps, 0).astype(np.float64)
    total = (g[:, None] - steps).astype(np.float64)
    factors = np.divide(free, total, out=np.zeros_like(free), where=total > 0)
    out = np.ones((g.shape[0], upto + 1))
    np.cumprod(factors, axis=1, out=out[:, 1:])
    return out


def none_in_first(m: IntArray, g: IntArray, c: IntArray) -> FloatArray:
    """Per row, P(none of c marked members of a shuffled group of g in its first m places)."""
    table = survival(g, c, int(m.max(initial=0)))
    result: FloatArray = np.take_along_axis(table, m[:, None], axis=1)[:, 0]
    return result


def _expected_reciprocal_rank(p: IntArray, g: IntArray, c: IntArray) -> FloatArray:
    """E[1 / (p + J)], J the first offset of c marked members in a shuffled group of g."""
    span = int((g - c).max()) + 1
    table = survival(g, c, span)
    first_at = table[:, :-1] - table[:, 1:]
    result: FloatArray = (first_at / (p[:, None] + np.arange(span)[None, :])).sum(axis=1)
    return result


def _prefix_sums(values: NDArray[np.float64] | BoolArray) -> FloatArray:
    """Per row, the sum of the first j values at column j (one column more than `values`)."""
    out = np.zeros((values.shape[0], values.shape[1] + 1))
    np.cumsum(values, axis=1, out=out[:, 1:])
    return out


def _discounts(n: int) -> tuple[FloatArray, FloatArray]:
    """Cumulative sums (from 0 places) of 1/r and of the DCG discount 1/log2(r+1)."""
    ranks = np.arange(1, n + 1)
    harmonic = np.concatenate([[0.0], np.cumsum(1.0 / ranks)])
    discount = np.concatenate([[0.0], np.cumsum(1.0 / np.log2(ranks + 1))])
    return harmonic, discount


@dataclass(frozen=True)
class BestGroup:
    """Per row, the first tie group holding a candidate of maximal gain: it starts at place
    p, has g members, c of them of maximal gain. Rows without a relevant candidate are off."""

    p: IntArray
    g: IntArray
    c: IntArray
    has_relevant: BoolArray

    @classmethod
    def of(cls, block: SortedBlock) -> BestGroup:
        rows = np.arange(block.gains.shape[0])
        top = block.gains_desc[:, 0]
        has_relevant = top > 0
        is_best = block.valid & (block.gains == top[:, None]) & has_relevant[:, None]
        first = np.argmax(is_best, axis=1)
        start, end = block.start[rows, first], block.end[rows, first]
        c = (is_best & (block.start == start[:, None])).sum(axis=1)
        return cls(start + 1, end - start + 1, c, has_relevant)

    def hit(self, k: int) -> FloatArray:
        """P(a candidate of maximal gain in the top k)."""
        slots = np.clip(k - self.p + 1, 0, self.g)
        value = slots / self.g
        several = np.flatnonzero(self.c > 1)  # one gold (c = 1, most rows): slots / g
        if several.size:
            g, c = self.g[several], self.c[several]
            value[several] = 1.0 - none_in_first(slots[several], g, c)
        result: FloatArray = np.where(self.has_relevant, value, 0.0)
        return result

    def reciprocal_rank(self, harmonic: FloatArray) -> FloatArray:
        p, g, c = self.p, self.g, self.c
        mrr = (harmonic[p + g - 1] - harmonic[p - 1]) / g
        multi = np.flatnonzero(self.has_relevant & (c > 1))
        if multi.size:
            mrr[multi] = _expected_reciprocal_rank(p[multi], g[multi], c[multi])
        result: FloatArray = np.where(self.has_relevant, mrr, 0.0)
        return result


class RankedBlock:
    """One padded block of items (see the module docstring), sorted once: what the metrics of
    the metric table (`harness.scoring.registry`) read, and their closed forms."""

    def __init__(self, scores: FloatArray, gains: FloatArray, lengths: IntArray) -> None:
        m, n = scores.shape
        block = self.sorted = sort_block(scores, gains, lengths)
        self.gains = gains  # in candidate order
        self.best = BestGroup.of(block)
        self.harmonic, self.discount = _discounts(n)
        # per sorted place, the mean discount of its tie group; the ideal ranking's
        self.mean_discount: FloatArray = (
            self.discount[block.end + 1] - self.discount[block.start]
        ) / block.size
        self.ideal_gains: FloatArray = block.gains_desc / np.log2(np.arange(1, n + 1) + 1)
        self.relevant: BoolArray = block.valid & (block.gains > 0)
        self.n_relevant: IntArray = self.relevant.sum(axis=1)
        best = self.best  # the expected rank of a single relevant candidate
        self.gold_rank: FloatArray = np.where(
            self.n_relevant == 1, best.p + (best.g - 1) / 2, np.nan
        )
        self.top_tied: BoolArray = block.end[:, 0] > 0 if n else np.zeros(m, dtype=bool)
        self._top: dict[int, tuple[FloatArray, FloatArray, FloatArray]] = {}

    def ndcg(self) -> FloatArray:
        in_candidate_order = np.empty_like(self.mean_discount)
        np.put_along_axis(in_candidate_order, self.sorted.order, self.mean_discount, axis=1)
        dcg = (self.gains * in_candidate_order).sum(axis=1)
        return _ratio(dcg, self.ideal_gains.sum(axis=1))

    def tau_b(self) -> FloatArray:
        return tau_b_of(self.sorted)

    def recall(self, k: int) -> FloatArray:
        return _ratio(self.top(k)[0], self.n_relevant)

    def precision(self, k: int) -> FloatArray:
        return self.top(k)[0] / k

    def ndcg_at(self, k: int) -> FloatArray:
        _, dcg, ideal = self.top(k)
        return _ratio(dcg, ideal)

    @cached_property
    def mixed_tied(self) -> BoolArray:
        """A score tie anywhere between candidates of different gain: its order moves a
        gain-based metric."""
        block = self.sorted
        group_gain = np.take_along_axis(block.gains, block.start, axis=1)
        result: BoolArray = (block.valid & (block.gains != group_gain)).any(axis=1)
        return result

    @cached_property
    def _prefix(self) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
        block = self.sorted
        return (
            _prefix_sums(self.relevant),
            _prefix_sums(block.gains),
            _prefix_sums(block.gains * self.mean_discount),
            _prefix_sums(self.ideal_gains),
        )

    def top(self, k: int) -> tuple[FloatArray, FloatArray, FloatArray]:
        """The expected relevant candidates, DCG and ideal DCG of the top k, from prefix sums
        in sorted order: groups wholly in the top k count fully, the group holding the k-th
        place by its share of the top k."""
        if k not in self._top:
            block = self.sorted
            rows = np.arange(block.gains.shape[0])
            relevant_before, gain_before, dcg_before, ideal_before = self._prefix
            places = np.minimum(k, block.lengths)
            s, e = block.start[rows, places - 1], block.end[rows, places - 1] + 1
            share = (places - s) / (e - s)
            hits = relevant_before[rows, s] + share * (
                relevant_before[rows, e] - relevant_before[rows, s]
            )
            group_mean_gain = (gain_before[rows, e] - gain_before[rows, s]) / (e - s)
            dcg = dcg_before[rows, s] + group_mean_gain * (self.discount[places] - self.discount[s])
            self._top[k] = (hits, dcg, ideal_before[rows, places])
        return self._top[k]


def _ratio(numerator: FloatArray, denominator: NDArray[np.float64] | IntArray) -> FloatArray:
    """numerator / denominator, 0 where the denominator is 0."""
    m = numerator.shape[0]
    result: FloatArray = np.divide(numerator, denominator, out=np.zeros(m), where=denominator > 0)
    return result
