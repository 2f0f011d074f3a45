"""The betting confidence sequence: equal to the reference implementation (confseq's
hedged_cs), the same whether fed item by item or in batches, and valid by simulation (it
covers the true mean at every step in >= 1 - alpha of runs, with and without replacement)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.scoring.sequential import BettingCS, DifferenceCS, confidence_sequence

REFERENCE = Path(__file__).parent / "data" / "confseq_reference.json"


@pytest.mark.parametrize(
    "case", json.loads(REFERENCE.read_text())["cases"], ids=lambda c: c["name"]
)
def test_equals_confseq_hedged_cs(case: dict[str, object]) -> None:
    x = np.array(case["x"])
    low, high = confidence_sequence(x, alpha=float(case["alpha"]), population=case["N"])  # type: ignore[arg-type]
    np.testing.assert_allclose(low, case["lower"], atol=1e-9)
    np.testing.assert_allclose(high, case["upper"], atol=1e-9)
    assert (high - low)[-1] < (high - low)[9]  # it did narrow


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.floats(0, 1), min_size=1, max_size=60),
    st.lists(st.integers(1, 7), min_size=1, max_size=10),
    st.booleans(),
)
def test_batches_equal_one_at_a_time(values: list[float], sizes: list[int], finite: bool) -> None:
    population = len(values) + 3 if finite else None
    one_low, one_high = BettingCS(population=population).update(values)
    cs = BettingCS(population=population)
    lows, highs, start = [], [], 0
    while start < len(values):
        size = sizes[len(lows) % len(sizes)]
        low, high = cs.update(values[start : start + size])
        lows.append(low)
        highs.append(high)
        start += size
    np.testing.assert_allclose(np.concatenate(lows), one_low, atol=1e-12)
    np.testing.assert_allclose(np.concatenate(highs), one_high, atol=1e-12)
    # nested intervals inside [0, 1]
    assert np.all(np.diff(one_low) >= 0) and np.all(np.diff(one_high) <= 0)
    assert np.all((one_low >= 0) & (one_low <= one_high) & (one_high <= 1))


def _miss_rate(runs: int, draw: object, truth: float, *, population: int | None = None) -> float:
    missed = 0
    for r in range(runs):
        rng = np.random.default_rng(r)
        x = draw(rng)  # type: ignore[operator]
        low, high = confidence_sequence(x, alpha=0.1, population=population, grid=200)
        missed += bool(np.any((low > truth + 1e-9) | (high < truth - 1e-9)))
    return missed / runs


def test_covers_the_mean_at_every_step_iid() -> None:
    # Three-point paired differences of Hit@1, rescaled: mean 0.5 + 0.05
    p = np.array([0.2, 0.5, 0.3])
    truth = float(p @ np.array([0.0, 0.5, 1.0]))
    rate = _miss_rate(200, lambda rng: rng.choice([0.0, 0.5, 1.0], size=400, p=p), truth)
    assert rate <= 0.1


def test_covers_the_population_mean_at_every_step_without_replacement() -> None:
    population = np.random.default_rng(99).beta(0.5, 0.5, size=300)
    truth = float(population.mean())
    rate = _miss_rate(
        200, lambda rng: rng.permutation(population), truth, population=population.size
    )
    assert rate <= 0.1


def test_without_replacement_ends_at_the_population_mean() -> None:
    values = np.random.default_rng(3).random(50)
    low, high = confidence_sequence(values, population=50)
    assert low[-1] == pytest.approx(values.mean()) and high[-1] == pytest.approx(values.mean())
    iid_low, iid_high = confidence_sequence(values)
    assert np.all(high - low <= iid_high - iid_low + 1e-12)


def test_difference_scale() -> None:
    cs = DifferenceCS(2.0)  # kendall_tau_b: differences in [-2, 2]
    low, high = cs.update(np.full(200, 1.0))
    assert -2 <= low[-1] < 1.0 < high[-1] <= 2 + 1e-12
    assert cs.bounds == (low[-1], high[-1])


def test_bad_input() -> None:
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        BettingCS().update([1.5])
    with pytest.raises(ValueError, match="population"):
        BettingCS(population=2).update([0.1, 0.2, 0.3])
    with pytest.raises(ValueError, match="alpha"):
        BettingCS(alpha=1.0)
