"""Krippendorff's alpha for ordinal data, with a percentile bootstrap over items.

A unit is one candidate of one item; a rater's value for it is the candidate's rank in the
rater's ranking of the item (1 = best, tied candidates sharing their mean rank), so an item's
units are resampled together. From the coincidence matrix o (each unit adds its ordered pairs
of values, each over m_u - 1 where m_u is its number of values), its margins n_c and their sum
n (Krippendorff 2011, "Computing Krippendorff's Alpha-Reliability"):

    alpha = 1 - (n - 1) sum_ck o_ck d_ck / sum_ck n_c n_k d_ck,
    d_ck = (sum_{g = c..k} n_g - (n_c + n_k) / 2) ** 2   (ordinal distance).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from harness.scoring.metrics import resample_counts
from harness.scoring.sorted_block import FloatArray, IntArray


def ranks(scores: FloatArray) -> FloatArray:
    """Rank of each score, 1 for the highest, tied scores sharing their mean rank; a missing
    score (NaN) ties below every other."""
    filled = np.where(np.isnan(scores), -np.inf, scores)
    higher = (filled[None, :] > filled[:, None]).sum(axis=1)
    tied = (filled[None, :] == filled[:, None]).sum(axis=1)
    out: FloatArray = 1.0 + higher + (tied - 1) / 2.0
    return out


def item_coincidences(
    ratings: FloatArray, unit_item: IntArray, n_items: int, values: FloatArray
) -> FloatArray:
    """Each item's coincidence matrix (items x V x V) of `ratings` (raters x units, NaN where a
    rater gave none) over the value domain `values` (sorted)."""
    v = len(values)
    present = ~np.isnan(ratings)
    codes = np.searchsorted(values, np.where(present, ratings, values[0]))
    counts = np.zeros((ratings.shape[1], v))
    for rater in range(ratings.shape[0]):
        units = np.flatnonzero(present[rater])
        np.add.at(counts, (units, codes[rater, units]), 1.0)
    m = counts.sum(axis=1)
    pairable = m >= 2
    c = counts[pairable]
    per_unit = (c[:, :, None] * c[:, None, :] - c[:, :, None] * np.eye(v)) / (m[pairable] - 1)[
        :, None, None
    ]
    out = np.zeros((n_items, v * v))
    np.add.at(out, unit_item[pairable], per_unit.reshape(-1, v * v))
    return out.reshape(n_items, v, v)


def alpha_of(coincidence: FloatArray) -> FloatArray:
    """Ordinal alpha of each coincidence matrix (... x V x V); NaN where there is no
    variation to disagree on (every value the same) or no pairable value."""
    n_c = coincidence.sum(axis=-1)
    n = n_c.sum(axis=-1)
    cum = np.cumsum(n_c, axis=-1)
    # sum_{g=c..k} n_g - (n_c + n_k)/2 = cum_k - cum_c + (n_c - n_k)/2, for c <= k and by
    # symmetry (the sign flips) for c > k
    d = (cum[..., None, :] - cum[..., :, None] + (n_c[..., :, None] - n_c[..., None, :]) / 2) ** 2
    observed = (coincidence * d).sum(axis=(-2, -1))
    expected = (n_c[..., :, None] * n_c[..., None, :] * d).sum(axis=(-2, -1))
    with np.errstate(divide="ignore", invalid="ignore"):
        alpha: FloatArray = np.where(expected > 0, 1.0 - (n - 1) * observed / expected, np.nan)
    return alpha


def pairwise_alphas(
    ratings: FloatArray,
    unit_item: IntArray,
    n_items: int,
    pairs: Sequence[tuple[int, int]],
    *,
    n_bootstrap: int,
    seed: int,
) -> tuple[FloatArray, FloatArray]:
    """Ordinal alpha of each pair of raters (rows of `ratings`) on all items, and on each
    bootstrap resample of the items (resamples x pairs); every pair on the same resamples."""
    values = np.unique(ratings[~np.isnan(ratings)])
    v = len(values)
    per_pair = [
        item_coincidences(ratings[list(pair)], unit_item, n_items, values).reshape(n_items, -1)
        for pair in pairs
    ]
    whole = np.array([alpha_of(o.sum(axis=0).reshape(v, v)) for o in per_pair])
    boot = np.empty((n_bootstrap, len(pairs)))
    for rows, counts in resample_counts(n_bootstrap, n_items, np.random.default_rng(seed)):
        for column, o in enumerate(per_pair):
            boot[rows, column] = alpha_of((counts @ o).reshape(-1, v, v))
    return whole, boot
