"""Ordinal Krippendorff's alpha (`harness.scoring.alpha`) equals the `krippendorff` package's to
1e-9 on random reliability data, and its vectorised bootstrap equals alpha recomputed on each
resample's items."""

from __future__ import annotations

import krippendorff
import numpy as np
import pytest
from scipy.stats import rankdata

from harness.scoring.alpha import (
    alpha_of,
    item_coincidences,
    pairwise_alphas,
    ranks,
)
from harness.scoring.metrics import resample_counts


def ordinal_alpha(ratings: np.ndarray) -> float:
    """Alpha of all the raters together: every unit in one item."""
    values = np.unique(ratings[~np.isnan(ratings)])
    units = ratings.shape[1]
    return float(alpha_of(item_coincidences(ratings, np.zeros(units, dtype=int), 1, values))[0])


def random_ratings(rng: np.random.Generator) -> np.ndarray:
    raters, units = int(rng.integers(2, 6)), int(rng.integers(3, 40))
    values = rng.choice([1.0, 1.5, 2.0, 3.0, 3.5, 4.0, 7.0], size=int(rng.integers(2, 7)))
    ratings = rng.choice(values, size=(raters, units))
    ratings[rng.random(ratings.shape) < 0.25] = np.nan
    return ratings


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")
@pytest.mark.parametrize("seed", range(200))
def test_ordinal_alpha_equals_the_krippendorff_package(seed: int) -> None:
    """NaN where there is nothing to disagree on (one value), as the package gives or refuses."""
    ratings = random_ratings(np.random.default_rng(seed))
    try:
        expected = float(
            krippendorff.alpha(reliability_data=ratings, level_of_measurement="ordinal")
        )
    except ValueError:  # one value only: the package refuses
        expected = float("nan")
    assert ordinal_alpha(ratings) == pytest.approx(expected, abs=1e-9, nan_ok=True)


def test_pairwise_alphas_on_all_items_and_on_each_resample() -> None:
    rng = np.random.default_rng(3)
    n_items, width = 12, 4
    ratings = np.stack(
        [np.concatenate([rng.permutation(width) + 1.0 for _ in range(n_items)]) for _ in range(3)]
    )
    ratings[0, :width] = [1.5, 1.5, 3.0, 4.0]  # a tie in the first rater's first item
    unit_item = np.repeat(np.arange(n_items), width)
    pairs = [(0, 1), (0, 2), (1, 2)]
    whole, boot = pairwise_alphas(ratings, unit_item, n_items, pairs, n_bootstrap=50, seed=7)
    for column, pair in enumerate(pairs):
        reference = krippendorff.alpha(
            reliability_data=ratings[list(pair)], level_of_measurement="ordinal"
        )
        assert abs(whole[column] - reference) <= 1e-9
    _, counts = next(resample_counts(50, n_items, np.random.default_rng(7)))
    for row in range(5):
        drawn = np.repeat(np.arange(n_items), counts[row].astype(int))
        units = np.concatenate([np.flatnonzero(unit_item == i) for i in drawn])
        for column, pair in enumerate(pairs):
            assert abs(boot[row, column] - ordinal_alpha(ratings[list(pair)][:, units])) <= 1e-9


@pytest.mark.parametrize("seed", range(20))
def test_ranks_are_scipys_average_ranks_best_first(seed: int) -> None:
    scores = np.random.default_rng(seed).integers(0, 4, size=6).astype(float)
    assert ranks(scores) == pytest.approx(rankdata(-scores, method="average"))


def test_a_missing_score_ties_last() -> None:
    assert list(ranks(np.array([2.0, np.nan, 5.0, np.nan]))) == [2.0, 3.5, 1.0, 3.5]
