"""Power of paired comparisons, before paying for them.

For a paired comparison of n items whose per-item differences d have standard deviation s,
the two-sided test at level alpha detects a true mean difference delta with probability
`power` when (normal approximation, the bootstrap CI's and sign-flip test's large-n form)

    delta >= (z_{1 - alpha/2} + z_{power}) * s / sqrt(n)      (minimum detectable difference)
    n     >= ((z_{1 - alpha/2} + z_{power}) * s / delta)^2     (items needed)

The sequential comparison (`harness.scoring.sequential`) has no such closed form: its
stopping time is simulated, drawing differences from the pilot's exponentially tilted to
mean delta (weights proportional to exp(eta * d_i), eta solved so the weighted mean is
delta), which keeps the pilot's support and shape."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from harness.scoring.sequential import DifferenceCS, FloatArray

POWER = 0.8


def _z(p: float) -> float:
    from scipy.special import ndtri

    return float(ndtri(p))


def minimum_detectable_difference(
    differences: ArrayLike, *, alpha: float = 0.05, power: float = POWER
) -> float:
    """The smallest true mean difference detected with probability `power` (module
    docstring); NaN with fewer than two items."""
    d = np.asarray(differences, dtype=np.float64)
    if d.size < 2:
        return float("nan")
    spread = float(d.std(ddof=1))
    return (_z(1 - alpha / 2) + _z(power)) * spread / math.sqrt(d.size)


def items_needed(
    differences: ArrayLike, effect: float, *, alpha: float = 0.05, power: float = POWER
) -> int | None:
    """Items a fixed-sample paired test needs (module docstring); None for a pilot of < 2."""
    d = np.asarray(differences, dtype=np.float64)
    if d.size < 2 or effect == 0:
        return None
    spread = float(d.std(ddof=1))
    return max(2, math.ceil(((_z(1 - alpha / 2) + _z(power)) * spread / abs(effect)) ** 2))


def tilted(differences: ArrayLike, effect: float) -> FloatArray:
    """The exponential tilt of the pilot's differences to mean `effect` (weights summing to
    1); ValueError when `effect` is outside (min, max)."""
    d = np.asarray(differences, dtype=np.float64)
    if d.size == 0 or not d.min() < effect < d.max():
        raise ValueError(
            f"an effect of {effect:+g} lies outside the pilot's paired differences "
            f"[{d.min() if d.size else 0:+g}, {d.max() if d.size else 0:+g}]"
        )
    from scipy.optimize import brentq

    centred = d - effect

    def mean_at(eta: float) -> float:
        w = np.exp(eta * centred - np.max(eta * centred))
        return float((w * centred).sum() / w.sum())

    bound = 1.0
    while mean_at(bound) < 0:
        bound *= 2
    low = -1.0
    while mean_at(low) > 0:
        low *= 2
    eta = brentq(mean_at, low, bound, xtol=1e-12)
    weights = np.exp(eta * centred - np.max(eta * centred))
    out: FloatArray = weights / weights.sum()
    return out


@dataclass(frozen=True)
class SequentialPlan:
    """Items each simulated sequential comparison visited until it decided (else max_items)."""

    stops: FloatArray
    decided: float  # share of comparisons that decided the right way within max_items
    max_items: int

    @property
    def mean(self) -> float:
        return float(self.stops.mean())

    def quantile(self, q: float) -> float:
        return float(np.quantile(self.stops, q))


def simulate_sequential(
    differences: ArrayLike,
    effect: float,
    *,
    width: float,
    alpha: float = 0.05,
    batch: int = 50,
    max_items: int = 20_000,
    runs: int = 200,
    seed: int = 0,
    grid: int = 250,
) -> SequentialPlan:
    """The sequential comparison run `runs` times on draws from the pilot's differences tilted
    to mean `effect` (`width`: the metric's range); the coarser grid is conservative."""
    d = np.asarray(differences, dtype=np.float64)
    weights = tilted(d, effect)
    rng = np.random.default_rng(seed)
    stops = np.full(runs, float(max_items))
    right = 0
    for r in range(runs):
        cs = DifferenceCS(width, alpha, grid=grid)
        seen = 0
        while seen < max_items:
            size = min(batch, max_items - seen)
            draws = rng.choice(d, size=size, p=weights)
            cs.update(draws)
            seen += size
            low, high = cs.bounds
            if low > 0 or high < 0:
                stops[r] = seen
                right += (low > 0) == (effect > 0)
                break
    return SequentialPlan(stops, right / runs, max_items)
