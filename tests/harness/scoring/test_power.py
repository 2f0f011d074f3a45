"""Power before paying: the minimum detectable difference and the items needed agree with
each other and with a simulated fixed-sample test; the tilt keeps the pilot's support."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.scoring.power import (
    items_needed,
    minimum_detectable_difference,
    simulate_sequential,
    tilted,
)
from harness.scoring.stats import paired_difference


def test_mdd_and_items_needed_invert_each_other() -> None:
    d = np.random.default_rng(0).choice([-1.0, 0.0, 1.0], size=400, p=[0.2, 0.5, 0.3])
    mdd = minimum_detectable_difference(d)
    n = items_needed(d, mdd)
    assert n is not None and abs(n - d.size) <= 2
    # 2.8 standard errors: z(0.975) + z(0.8)
    assert mdd == pytest.approx(2.8016 * d.std(ddof=1) / np.sqrt(d.size), rel=1e-3)
    assert np.isnan(minimum_detectable_difference([0.5]))


def test_items_needed_gives_about_80_percent_power() -> None:
    p = np.array([0.2, 0.5, 0.3])  # mean difference 0.1
    pilot = np.random.default_rng(1).choice([-1.0, 0.0, 1.0], size=2000, p=p)
    n = items_needed(pilot, 0.1)
    assert n is not None
    rng = np.random.default_rng(2)
    rejected = 0
    for _ in range(400):
        d = rng.choice([-1.0, 0.0, 1.0], size=n, p=p)
        se = d.std(ddof=1) / np.sqrt(n)
        rejected += abs(d.mean()) > 1.96 * se
    assert 0.72 <= rejected / 400 <= 0.88


@settings(max_examples=20, deadline=None)
@given(
    st.lists(st.sampled_from([-1.0, -0.5, 0.0, 0.5, 1.0]), min_size=3, max_size=50),
    st.floats(-0.9, 0.9),
)
def test_tilt_hits_the_effect_on_the_pilots_support(values: list[float], effect: float) -> None:
    d = np.array(values)
    if not d.min() < effect < d.max():
        with pytest.raises(ValueError, match="outside"):
            tilted(d, effect)
        return
    w = tilted(d, effect)
    assert w.sum() == pytest.approx(1.0) and np.all(w >= 0)
    assert float(w @ d) == pytest.approx(effect, abs=1e-8)


def test_sequential_simulation_stops_and_decides_the_right_way() -> None:
    pilot = np.random.default_rng(3).choice([-1.0, 0.0, 1.0], size=100, p=[0.25, 0.5, 0.25])
    plan = simulate_sequential(pilot, 0.2, width=1.0, runs=20, seed=0)
    assert plan.decided == 1.0
    assert 50 <= plan.quantile(0.5) <= plan.quantile(0.8) < plan.max_items


def test_paired_difference_carries_the_mdd() -> None:
    rng = np.random.default_rng(4)
    a, b = rng.random(50), rng.random(50)
    diff = paired_difference(b, a)
    assert diff.mdd80 == pytest.approx(minimum_detectable_difference(b - a), rel=1e-12)
    assert diff.to_json()["mdd80"] == round(diff.mdd80, 6)
    assert paired_difference(a + 0.1, a).mdd80 == pytest.approx(0.0, abs=1e-9)  # no spread
