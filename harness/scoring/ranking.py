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
- Kendall's tau-b (no tie-breaking): with few distinct gains, pairs are counted level by level
  from running counts across tie groups; with many, by Knight's algorithm (ties ordered by
  gain, discordant pairs from a Fenwick tree over the levels, one step per column).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
from numpy.typing import NDArray

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]
BoolArray = NDArray[np.bool_]

CORE_NAMES = ("hit@1", "mrr", "ndcg", "kendall_tau_b")
CUTOFF_KINDS = ("hit", "recall", "precision", "ndcg")


def cutoff_names(at: Sequence[int]) -> tuple[str, ...]:
    """`hit@K`, `recall@K`, `precision@K`, `ndcg@K` for each K, grouped by kind."""
    return tuple(f"{kind}@{k}" for kind in CUTOFF_KINDS for k in at)


FEW_LEVELS = 8  # up to this many distinct gains in a block, count pairs level by level


@dataclass(frozen=True)
class SortedBlock:
    """A block of rows sorted by score (best first), padding last. Within a score tie the order
    is by gain (highest first) only when `knight_order` (more than FEW_LEVELS distinct gains,
    where Kendall's tau-b needs it); nothing else depends on the order within a tie.

    Every (rows x N) array is in sorted order except `order`, which maps back.
    """

    order: IntArray  # candidate index at each sorted position
    valid: BoolArray  # a real candidate, not padding
    gains: FloatArray
    start: IntArray  # first position of the score tie group
    end: IntArray  # last position of the score tie group
    n_levels: int  # distinct gains, at most, in a row of the block
    knight_order: bool
    gains_desc: FloatArray  # the row's gains sorted high to low (the ideal ranking)
    score_tied_pairs: IntArray  # per row
    gain_tied_pairs: IntArray  # per row
    lengths: IntArray
    level_of: Callable[[], IntArray] = field(repr=False)  # computes `level`

    @cached_property
    def level(self) -> IntArray:
        """The dense rank of each gain within its row, 1 = lowest, 0 for padding; computed
        when first asked for (the pair counts of single-gold rows do without it)."""
        return self.level_of()

    @property
    def size(self) -> IntArray:
        size: IntArray = self.end - self.start + 1
        return size


def _new_runs(values: FloatArray, valid: BoolArray) -> BoolArray:
    new = np.ones(values.shape, dtype=bool)
    new[:, 1:] = values[:, 1:] != values[:, :-1]
    result: BoolArray = new | ~valid
    return result


def _fill_forward(values: IntArray, at: BoolArray) -> IntArray:
    """Each position takes the value at the last marked position up to it; `values` must be
    non-decreasing along the row (so a running maximum carries it)."""
    filled: IntArray = np.maximum.accumulate(np.where(at, values, 0), axis=1)
    return filled


def _fill_backward(values: IntArray, at: BoolArray, beyond: int) -> IntArray:
    """Each position takes the value at the next marked position from it (non-decreasing
    `values`, `beyond` larger than all of them)."""
    reverse = np.where(at, values, beyond)[:, ::-1]
    filled: IntArray = np.minimum.accumulate(reverse, axis=1)[:, ::-1]
    return filled


GainSide = tuple[FloatArray, BoolArray, IntArray, IntArray]


def gain_side(gains: FloatArray, valid: BoolArray) -> GainSide:
    """Per row: the gains sorted high to low (padding 0), where a run of equal gains starts,
    the pairs tied in gain, and each sorted position's dense level (1: the highest gain)."""
    columns = np.broadcast_to(np.arange(gains.shape[1]), gains.shape)
    gains_desc = np.where(valid, -np.sort(np.where(valid, -gains, np.inf), axis=1), 0.0)
    new_gain = _new_runs(gains_desc, valid)
    gain_tied: IntArray = (columns - _fill_forward(columns, new_gain)).sum(axis=1)
    dense = np.cumsum(new_gain & valid, axis=1, dtype=np.int64)
    return gains_desc, new_gain, gain_tied, dense


def one_gold_gain_side(gains: FloatArray, lengths: IntArray) -> GainSide | None:
    """`gain_side` of unpadded rows with one positive gain each (a single-gold pool's),
    without sorting: [g, 0, ..., 0], runs at 0 and 1, C(N-1, 2) pairs tied, levels
    1, 2, ..., 2. None for any other block."""
    m, n = gains.shape
    if n < 2 or not (lengths == n).all() or not (np.count_nonzero(gains, axis=1) == 1).all():
        return None
    top = gains.max(axis=1)
    if not (top > 0).all():  # (the one nonzero gain must be the highest)
        return None
    gains_desc = np.zeros((m, n))
    gains_desc[:, 0] = top
    new_gain = np.zeros((m, n), dtype=bool)
    new_gain[:, :2] = True
    dense = np.full((m, n), 2, dtype=np.int64)
    dense[:, 0] = 1
    return gains_desc, new_gain, np.full(m, (n - 1) * (n - 2) // 2, dtype=np.int64), dense


def sort_block(scores: FloatArray, gains: FloatArray, lengths: IntArray) -> SortedBlock:
    """Sort each row by score; NaN sort keys put the padding last."""
    m, n = scores.shape
    columns = np.broadcast_to(np.arange(n), (m, n))
    valid = columns < lengths[:, None]
    side = one_gold_gain_side(gains, lengths)
    gains_desc, new_gain, gain_tied, dense = side if side else gain_side(gains, valid)
    n_levels = int(dense[:, -1].max()) if m and n else 0
    keys = np.where(valid, -scores, np.nan)
    knight_order = n_levels > FEW_LEVELS
    if knight_order:  # score ties ordered by gain: sort by gain, then stably by score
        by_gain = np.argsort(np.where(valid, -gains, np.nan), axis=1)
        level_by_gain = np.where(valid, dense[:, -1:] - dense + 1, 0)
        keys = np.take_along_axis(keys, by_gain, axis=1)
        within = np.argsort(keys, axis=1, kind="stable")
        order = np.take_along_axis(by_gain, within, axis=1)
        sorted_gains = np.take_along_axis(gains_desc, within, axis=1)
        level = np.take_along_axis(level_by_gain, within, axis=1)
        keys = np.take_along_axis(keys, within, axis=1)

        def level_of() -> IntArray:
            return level

    else:
        order = np.argsort(keys, axis=1)
        sorted_gains = np.take_along_axis(gains, order, axis=1)
        keys = np.take_along_axis(keys, order, axis=1)

        def level_of() -> IntArray:
            levels = _few_levels(gains, gains_desc, dense, new_gain & valid, valid, n_levels)
            return np.take_along_axis(levels, order, axis=1)

    new_score = _new_runs(keys, valid)
    start = _fill_forward(columns, new_score)
    last = np.ones((m, n), dtype=bool)
    last[:, :-1] = new_score[:, 1:]
    return SortedBlock(
        order=order,
        valid=valid,
        gains=sorted_gains,
        start=start,
        end=_fill_backward(columns, last, n),
        n_levels=n_levels,
        knight_order=knight_order,
        gains_desc=gains_desc,
        score_tied_pairs=(columns - start).sum(axis=1),
        gain_tied_pairs=gain_tied,
        lengths=lengths,
        level_of=level_of,
    )


def _few_levels(
    gains: FloatArray,
    gains_desc: FloatArray,
    dense: IntArray,
    distinct_at: BoolArray,
    valid: BoolArray,
    n_levels: int,
) -> IntArray:
    """Each candidate's gain level (1 = the row's lowest gain, 0 for padding), in candidate
    order, by comparing with each of the row's few distinct gains."""
    rows, columns = np.nonzero(distinct_at)
    distinct = np.full((gains.shape[0], n_levels), np.inf)  # highest first
    distinct[rows, dense[rows, columns] - 1] = gains_desc[rows, columns]
    level = np.zeros(gains.shape, dtype=np.int64)
    for value in distinct.T:
        level += gains >= value[:, None]
    result: IntArray = np.where(valid, level, 0)
    return result


# ------------------------------------------------------------------------ Kendall's tau-b
def pair_counts(block: SortedBlock) -> tuple[IntArray, IntArray]:
    """Per row: pairs ranked strictly above-below by score and below-above by gain
    (discordant), and pairs tied in both score and gain."""
    if block.knight_order:
        return discordant_by_tree(block.level, block.n_levels), _tied_in_runs(block)
    counts = one_top_counts(block)
    return counts if counts is not None else counts_by_level(block)


def one_top_counts(block: SortedBlock) -> tuple[IntArray, IntArray] | None:
    """The pair counts when every row has one candidate above all its others (a single-gold
    pool), in closed form; None otherwise. The discordant pairs are the candidates before
    its score tie group (its start), and the pairs tied in both are the row's score-tied
    pairs less the g - 1 its own group of g holds with it."""
    if block.n_levels != 2:
        return None
    top = block.valid & (block.gains == block.gains_desc[:, :1])  # its level-2 candidate
    if not (top.sum(axis=1) == 1).all():
        return None
    rows = np.arange(top.shape[0])
    at = np.argmax(top, axis=1)
    start, end = block.start[rows, at], block.end[rows, at]
    both_tied: IntArray = block.score_tied_pairs - (end - start)
    return start, both_tied


def counts_by_level(block: SortedBlock) -> tuple[IntArray, IntArray]:
    """From the highest gain level down, with running counts filled across score tie groups:
    a candidate of level l is discordant with the lower-level candidates before its group
    (its group's start minus those of level >= l), and tied in both with the other level-l
    candidates of its group (for the lowest level: the rest of its group). Any order within
    a tie will do."""
    m, n = block.level.shape
    columns = np.arange(n)
    first = block.start == columns
    last = block.end == columns
    higher_before_group = np.zeros((m, n), dtype=np.int64)
    higher_in_group = np.zeros((m, n), dtype=np.int64)
    discordant = np.zeros(m, dtype=np.int64)
    tied_twice = np.zeros(m, dtype=np.int64)  # ordered pairs: each unordered one twice
    for current in range(block.n_levels, 1, -1):
        here = block.level == current
        up_to = np.cumsum(here, axis=1)
        before_group = _fill_forward(up_to - here, first)
        in_group = _fill_backward(up_to, last, n + 1) - before_group
        higher_before_group += before_group
        higher_in_group += in_group
        discordant += np.where(here, block.start - higher_before_group, 0).sum(axis=1)
        tied_twice += np.where(here, in_group - 1, 0).sum(axis=1)
    lowest = block.level == 1
    tied_twice += np.where(lowest, block.size - higher_in_group - 1, 0).sum(axis=1)
    return discordant, tied_twice // 2


def _tied_in_runs(block: SortedBlock) -> IntArray:
    """Pairs tied in score and gain, when ties are ordered by gain (runs of equal pairs)."""
    columns = np.broadcast_to(np.arange(block.level.shape[1]), block.level.shape)
    new = (block.start == columns) | _new_runs(block.gains, block.valid)
    tied: IntArray = (columns - _fill_forward(columns, new)).sum(axis=1)
    return tied


def discordant_by_tree(level: IntArray, n_levels: int) -> IntArray:
    """Pairs (i before j) with level_i < level_j: a Fenwick tree over the levels per row,
    one query and one insertion per column (Knight's algorithm: ties are ordered by gain,
    so no pair tied in score is counted). Level 0 (padding) is never counted."""
    m = level.shape[0]
    rows = np.arange(m)
    tree = np.zeros((m, n_levels + 2), dtype=np.int64)  # column 0 stays 0; the last is a sink
    sink = n_levels + 1
    steps = max(n_levels, 1).bit_length()
    total = np.zeros(m, dtype=np.int64)
    for current in np.ascontiguousarray(level.T):
        index = np.maximum(current - 1, 0)
        for _ in range(steps):
            total += tree[rows, index]
            index &= index - 1
        index = np.where(current > 0, current, sink)
        for _ in range(steps):
            tree[rows, index] += 1
            index = np.minimum(index + (index & -index), sink)
    return total


def tau_b_of(block: SortedBlock) -> FloatArray:
    """Kendall's tau-b of scores against gains per row; 0 where either side is all tied."""
    rows = block.valid.shape[0]
    if rows == 0:
        return np.zeros(0)
    discordant, both_tied = pair_counts(block)
    pairs = block.lengths * (block.lengths - 1) // 2
    difference = pairs - block.score_tied_pairs - block.gain_tied_pairs + both_tied - 2 * discordant
    untied_x = (pairs - block.score_tied_pairs).astype(np.float64)
    untied_y = (pairs - block.gain_tied_pairs).astype(np.float64)
    denominator = np.sqrt(untied_x * untied_y)
    tau: FloatArray = np.divide(
        difference.astype(np.float64), denominator, out=np.zeros(rows), where=denominator > 0
    )
    return tau


PAIRWISE_WIDTH = 8  # rows at most this wide: tau-b from their N(N-1)/2 pairs directly


def kendall_tau_b(x: FloatArray, y: FloatArray) -> FloatArray:
    """Row-wise Kendall's tau-b between two (items x N) matrices; 0 where a row is all tied.
    Narrow rows without NaN (a DialBGM item has 4 candidates) count their pairs one by one
    (`_tau_b_by_pairs`): the same counts as the sort's, so the same values, in a tenth of
    its time (a 20-run report's agreement matrix is 190 x 1,200 rows)."""
    if x.shape[1] <= PAIRWISE_WIDTH and not (np.isnan(x).any() or np.isnan(y).any()):
        return _tau_b_by_pairs(x, y)
    lengths = np.full(x.shape[0], x.shape[1], dtype=np.int64)
    return tau_b_of(sort_block(x, y, lengths))


def _tau_b_by_pairs(x: FloatArray, y: FloatArray) -> FloatArray:
    """tau-b = (C - D) / sqrt((P - Tx) (P - Ty)) per row, over its P = N(N-1)/2 pairs i < j:
    C - D = sum of sign(x_i - x_j) sign(y_i - y_j), Tx (Ty) the pairs tied in x (y); the
    signs from comparisons, so that -inf ties with -inf. 0 where a side is all tied."""
    rows, n = x.shape
    i, j = np.triu_indices(n, 1)
    sign_x = (x[:, i] > x[:, j]).astype(np.int64) - (x[:, i] < x[:, j])
    sign_y = (y[:, i] > y[:, j]).astype(np.int64) - (y[:, i] < y[:, j])
    difference = (sign_x * sign_y).sum(axis=1)
    pairs = n * (n - 1) // 2
    untied_x = (pairs - (sign_x == 0).sum(axis=1)).astype(np.float64)
    untied_y = (pairs - (sign_y == 0).sum(axis=1)).astype(np.float64)
    denominator = np.sqrt(untied_x * untied_y)
    tau: FloatArray = np.divide(
        difference.astype(np.float64), denominator, out=np.zeros(rows), where=denominator > 0
    )
    return tau


# ------------------------------------------------------------------------ the other metrics
def survival(g: IntArray, c: IntArray, upto: int) -> FloatArray:
    """Per row, column m (0..upto): P(none of c marked members of a uniformly shuffled group
    of g lands in its first m positions) = C(g-m, c) / C(g, c) = prod_{j<m} (g-c-j) / (g-j),
    0 from m = g-c + 1 on.

    The product is accumulated factor by factor (`cumprod` multiplies in order), so every
    step is one correctly rounded IEEE operation: the figures are the same bits on every
    CPU. A closed form through log-gamma and `exp` is not: numpy's `exp` takes a different
    code path on AVX-512 machines and moves the last bit."""
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


@dataclass(frozen=True)
class BlockResult:
    metrics: dict[str, FloatArray]
    gold_rank: FloatArray  # expected rank of the single relevant candidate; NaN otherwise
    n_relevant: IntArray
    top_tied: BoolArray


def block_metrics(
    scores: FloatArray, gains: FloatArray, lengths: IntArray, at: Sequence[int] = ()
) -> BlockResult:
    """Every metric per row of one padded block (see the module docstring)."""
    m, n = scores.shape
    block = sort_block(scores, gains, lengths)
    harmonic, discount = _discounts(n)
    best = BestGroup.of(block)

    mean_discount = (discount[block.end + 1] - discount[block.start]) / block.size
    in_candidate_order = np.empty_like(mean_discount)
    np.put_along_axis(in_candidate_order, block.order, mean_discount, axis=1)
    dcg = (gains * in_candidate_order).sum(axis=1)
    ideal_gains = block.gains_desc / np.log2(np.arange(1, n + 1) + 1)
    ideal = ideal_gains.sum(axis=1)

    metrics = {
        "hit@1": best.hit(1),
        "mrr": best.reciprocal_rank(harmonic),
        "ndcg": np.divide(dcg, ideal, out=np.zeros(m), where=ideal > 0),
        "kendall_tau_b": tau_b_of(block),
    }
    relevant = block.valid & (block.gains > 0)
    n_relevant = relevant.sum(axis=1)
    if at:
        metrics |= _cutoff_metrics(block, best, at, relevant, mean_discount, ideal_gains)
    ordered = {name: metrics[name] for name in (*CORE_NAMES, *cutoff_names(at))}
    gold_rank = np.where(n_relevant == 1, best.p + (best.g - 1) / 2, np.nan)
    top_tied = block.end[:, 0] > 0 if n else np.zeros(m, dtype=bool)
    return BlockResult(ordered, gold_rank, n_relevant, top_tied)


def _cutoff_metrics(
    block: SortedBlock,
    best: BestGroup,
    at: Sequence[int],
    relevant: BoolArray,
    mean_discount: FloatArray,
    ideal_gains: FloatArray,
) -> dict[str, FloatArray]:
    """hit/recall/precision/nDCG at each K from prefix sums in sorted order: groups wholly
    in the top K count fully, the group holding the K-th place by its share of the top K."""
    m, n = block.gains.shape
    rows = np.arange(m)
    _, discount = _discounts(n)
    n_relevant = relevant.sum(axis=1)
    relevant_before = _prefix_sums(relevant)
    gain_before = _prefix_sums(block.gains)
    dcg_before = _prefix_sums(block.gains * mean_discount)
    ideal_before = _prefix_sums(ideal_gains)
    out = {}
    for k in at:
        places = np.minimum(k, block.lengths)
        s, e = block.start[rows, places - 1], block.end[rows, places - 1] + 1
        share = (places - s) / (e - s)
        hits = relevant_before[rows, s] + share * (
            relevant_before[rows, e] - relevant_before[rows, s]
        )
        group_mean_gain = (gain_before[rows, e] - gain_before[rows, s]) / (e - s)
        dcg = dcg_before[rows, s] + group_mean_gain * (discount[places] - discount[s])
        ideal = ideal_before[rows, places]
        out[f"hit@{k}"] = best.hit(k)
        out[f"recall@{k}"] = np.divide(hits, n_relevant, out=np.zeros(m), where=n_relevant > 0)
        out[f"precision@{k}"] = hits / k
        out[f"ndcg@{k}"] = np.divide(dcg, ideal, out=np.zeros(m), where=ideal > 0)
    return out
