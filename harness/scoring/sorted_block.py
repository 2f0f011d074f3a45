"""A block of items sorted by score, which every ranking metric reads (`harness.scoring.
ranking`, `harness.scoring.tau_b`): each row's tie groups, and the gains' side of it (their
levels, and which candidates tie in gain)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]
BoolArray = NDArray[np.bool_]

FEW_LEVELS = 8  # up to this many distinct gains in a block, count pairs level by level


@dataclass(frozen=True)
class SortedBlock:
    """A block of rows sorted by score (best first), padding last; score ties ordered by gain
    only when `knight_order` (tau-b's Fenwick count needs it). Every (rows x N) array is in
    sorted order except `order`, which maps back."""

    order: IntArray  # candidate index at each sorted position
    valid: BoolArray  # a real candidate, not padding
    gains: FloatArray
    level: IntArray  # dense rank of the gain within its row, 1 = lowest, 0 for padding
    start: IntArray  # first position of the score tie group
    end: IntArray  # last position of the score tie group
    n_levels: int  # distinct gains, at most, in a row of the block
    knight_order: bool
    gains_desc: FloatArray  # the row's gains sorted high to low (the ideal ranking)
    score_tied_pairs: IntArray  # per row
    gain_tied_pairs: IntArray  # per row
    lengths: IntArray

    @property
    def size(self) -> IntArray:
        size: IntArray = self.end - self.start + 1
        return size


def new_runs(values: FloatArray, valid: BoolArray) -> BoolArray:
    new = np.ones(values.shape, dtype=bool)
    new[:, 1:] = values[:, 1:] != values[:, :-1]
    result: BoolArray = new | ~valid
    return result


def fill_forward(values: IntArray, at: BoolArray) -> IntArray:
    """Each position takes the value at the last marked position up to it; `values` must be
    non-decreasing along the row (so a running maximum carries it)."""
    filled: IntArray = np.maximum.accumulate(np.where(at, values, 0), axis=1)
    return filled


def fill_backward(values: IntArray, at: BoolArray, beyond: int) -> IntArray:
    """Each position takes the value at the next marked position from it (non-decreasing
    `values`, `beyond` larger than all of them)."""
    reverse = np.where(at, values, beyond)[:, ::-1]
    filled: IntArray = np.minimum.accumulate(reverse, axis=1)[:, ::-1]
    return filled


def sort_block(scores: FloatArray, gains: FloatArray, lengths: IntArray) -> SortedBlock:
    """Sort each row by score; NaN sort keys put the padding last."""
    m, n = scores.shape
    columns = np.broadcast_to(np.arange(n), (m, n))
    valid = columns < lengths[:, None]
    # the gains high to low (padding 0), where a run of equal gains starts, its dense level
    gains_desc = np.where(valid, -np.sort(np.where(valid, -gains, np.inf), axis=1), 0.0)
    new_gain = new_runs(gains_desc, valid)
    gain_tied = (columns - fill_forward(columns, new_gain)).sum(axis=1)
    dense = np.cumsum(new_gain & valid, axis=1, dtype=np.int64)  # 1: the highest gain
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
    else:
        order = np.argsort(keys, axis=1)
        sorted_gains = np.take_along_axis(gains, order, axis=1)
        keys = np.take_along_axis(keys, order, axis=1)
        levels = _few_levels(gains, gains_desc, dense, new_gain & valid, valid, n_levels)
        level = np.take_along_axis(levels, order, axis=1)
    new_score = new_runs(keys, valid)
    start = fill_forward(columns, new_score)
    last = np.ones((m, n), dtype=bool)
    last[:, :-1] = new_score[:, 1:]
    return SortedBlock(
        order=order,
        valid=valid,
        gains=sorted_gains,
        level=level,
        start=start,
        end=fill_backward(columns, last, n),
        n_levels=n_levels,
        knight_order=knight_order,
        gains_desc=gains_desc,
        score_tied_pairs=(columns - start).sum(axis=1),
        gain_tied_pairs=gain_tied,
        lengths=lengths,
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
