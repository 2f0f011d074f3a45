"""Kendall's tau-b per row of a sorted block (scores against gains), and row-wise between
two score matrices (`kendall_tau_b`, the agreement between two rankers): with few distinct
gains, pairs are counted level by level from running counts across tie groups; with many, by
Knight's algorithm (ties ordered by gain, discordant pairs from a Fenwick tree over the
levels, one step per column)."""

from __future__ import annotations

import numpy as np

from harness.scoring.sorted_block import (
    FloatArray,
    IntArray,
    SortedBlock,
    fill_backward,
    fill_forward,
    new_runs,
    sort_block,
)


def pair_counts(block: SortedBlock) -> tuple[IntArray, IntArray]:
    """Per row: pairs ranked strictly above-below by score and below-above by gain
    (discordant), and pairs tied in both score and gain."""
    if block.knight_order:
        return discordant_by_tree(block.level, block.n_levels), _tied_in_runs(block)
    return counts_by_level(block)


def counts_by_level(block: SortedBlock) -> tuple[IntArray, IntArray]:
    """From the highest gain level down: a candidate of level l is discordant with the
    lower-level candidates before its score tie group, and tied in both with the other
    level-l candidates of its group. Any order within a tie will do."""
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
        before_group = fill_forward(up_to - here, first)
        in_group = fill_backward(up_to, last, n + 1) - before_group
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
    new = (block.start == columns) | new_runs(block.gains, block.valid)
    tied: IntArray = (columns - fill_forward(columns, new)).sum(axis=1)
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


def kendall_tau_b(x: FloatArray, y: FloatArray) -> FloatArray:
    """Row-wise Kendall's tau-b between two (items x N) matrices; 0 where a row is all tied."""
    lengths = np.full(x.shape[0], x.shape[1], dtype=np.int64)
    return tau_b_of(sort_block(x, y, lengths))
