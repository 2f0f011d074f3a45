"""Anytime-valid confidence sequences for a bounded mean: the hedged-capital betting
confidence sequence of Waudby-Smith & Ramdas (2024, "Estimating means of bounded random
variables by betting", JRSS-B), with its refinement for sampling without replacement from a
finite set of N values. Written here because the reference package (`confseq` on PyPI)
ships only as a source archive that needs the Boost C++ headers to build; the tests check
this module against values computed with that package's pure-Python `hedged_cs`
(tests/harness/scoring/data/confseq_reference.json).

Observations x_1, x_2, ... lie in [0, 1] with (conditional) mean m. For each candidate m on a
grid of [0, 1], two gamblers bet on "the mean is above m" and "below m":

    mu_hat_t   = (1/2 + sum_{i<=t} x_i) / (t + 1)
    var_hat_t  = (1/4 + sum_{i<=t} (x_i - mu_hat_i)^2) / (t + 1)          (var_hat_0 = 1/4)
    lambda_t   = sqrt(2 log(2 / alpha) / (var_hat_{t-1} * t * log(1 + t)))   (predictable)
    m_t        = m                                       (sampling with replacement), or
    m_t        = (N m - sum_{i<t} x_i) / (N - t + 1)     (without replacement: the mean of
                                                          the values not yet drawn)
    K+_t(m)    = prod_{i<=t} (1 + min(lambda_i, c / m_i) (x_i - m_i))
    K-_t(m)    = prod_{i<=t} (1 - min(lambda_i, c / (1 - m_i)) (x_i - m_i))
    K_t(m)     = max(theta K+_t(m), (1 - theta) K-_t(m))       theta = 1/2, c = 1/2

K_t(m) <= theta K+_t + (1 - theta) K-_t, a nonnegative martingale from 1 under the null, so by
Ville's inequality C_t = {m : K_t(m) <= 1/alpha} (intersected with C_{t-1}, and without
replacement with [S_t / N, (S_t + N - t) / N]) covers the mean at every t at once with
probability >= 1 - alpha. K+ falls and K- rises in m, so the rejected m are a prefix and a
suffix of the grid: the bounds are conservative by at most one grid step (1 / grid).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike, NDArray

FloatArray = NDArray[np.float64]


@dataclass
class BettingCS:
    """The hedged-capital confidence sequence for the mean of [0, 1] values, updated batch by
    batch; `population` = N for sampling without replacement (None: i.i.d.)."""

    alpha: float = 0.05
    population: int | None = None
    grid: int = 1000
    theta: float = 0.5
    truncation: float = 0.5
    t: int = field(default=0, init=False)
    lower: float = field(default=0.0, init=False)
    upper: float = field(default=1.0, init=False)
    _m: FloatArray = field(init=False, repr=False)
    _log_plus: FloatArray = field(init=False, repr=False)
    _log_minus: FloatArray = field(init=False, repr=False)
    _sum: float = field(default=0.0, init=False, repr=False)
    _sq: float = field(default=0.0, init=False, repr=False)

    def __post_init__(self) -> None:
        if not 0 < self.alpha < 1:
            raise ValueError(f"alpha must lie in (0, 1), not {self.alpha}")
        if not 0 < self.theta < 1 or not 0 < self.truncation < 1:
            raise ValueError("theta and truncation must lie in (0, 1)")
        if self.population is not None and self.population < 1:
            raise ValueError(f"population must be >= 1, not {self.population}")
        self._m = np.linspace(0.0, 1.0, self.grid + 1)
        self._log_plus = np.zeros(self.grid + 1)
        self._log_minus = np.zeros(self.grid + 1)

    def update(self, values: ArrayLike) -> tuple[FloatArray, FloatArray]:
        """The lower and upper bounds after each of the next observations."""
        x = np.asarray(values, dtype=np.float64).ravel()
        if x.size == 0:
            return np.empty(0), np.empty(0)
        if not np.all((x >= 0.0) & (x <= 1.0)):
            raise ValueError("observations must lie in [0, 1]")
        if self.population is not None and self.t + x.size > self.population:
            raise ValueError(f"more than population={self.population} observations")
        t = self.t + np.arange(1, x.size + 1, dtype=np.float64)
        sums = self._sum + np.cumsum(x)
        mu_hat = (0.5 + sums) / (t + 1)
        squares = self._sq + np.cumsum((x - mu_hat) ** 2)
        var_hat = (0.25 + squares) / (t + 1)
        var_before = np.concatenate([[(0.25 + self._sq) / (self.t + 1)], var_hat[:-1]])
        bets = np.sqrt(2 * math.log(2 / self.alpha) / (var_before * t * np.log1p(t)))

        m = self._m[:, None]
        if self.population is None:
            m_t = np.broadcast_to(m, (m.size, x.size))
        else:
            n = float(self.population)
            sums_before = sums - x
            m_t = np.clip((n * m - sums_before) / (n - t + 1), 0.0, 1.0)
        tiny = np.finfo(np.float64).tiny
        bet_plus = np.minimum(bets, self.truncation / np.maximum(m_t, tiny))
        bet_minus = np.minimum(bets, self.truncation / np.maximum(1.0 - m_t, tiny))
        gain = x - m_t
        log_plus = self._log_plus[:, None] + np.cumsum(np.log1p(bet_plus * gain), axis=1)
        log_minus = self._log_minus[:, None] + np.cumsum(np.log1p(-bet_minus * gain), axis=1)
        self._log_plus, self._log_minus = log_plus[:, -1].copy(), log_minus[:, -1].copy()
        self._sum, self._sq = float(sums[-1]), float(squares[-1])

        threshold = math.log(1 / self.alpha)
        low = self._lower_bounds(log_plus + math.log(self.theta) > threshold)
        high = self._upper_bounds(log_minus + math.log(1 - self.theta) > threshold)
        if self.population is not None:
            low = np.maximum(low, sums / self.population)
            high = np.minimum(high, (sums + self.population - t) / self.population)
        lows = np.maximum.accumulate(np.concatenate([[self.lower], low]))[1:]
        highs = np.minimum.accumulate(np.concatenate([[self.upper], high]))[1:]
        if np.any(lows > highs):  # only on the <= alpha event of missing the mean
            lows, highs = self._crossed(low, high)
        self.lower, self.upper = float(lows[-1]), float(highs[-1])
        self.t += x.size
        return lows, highs

    def _crossed(self, low: FloatArray, high: FloatArray) -> tuple[FloatArray, FloatArray]:
        """The running intersection, kept non-empty (the point between crossed bounds)."""
        lows, highs = np.empty(low.size), np.empty(low.size)
        lower, upper = self.lower, self.upper
        for j in range(low.size):
            lower, upper = max(lower, low[j]), min(upper, high[j])
            if lower > upper:
                lower = upper = (lower + upper) / 2
            lows[j], highs[j] = lower, upper
        return lows, highs

    def _lower_bounds(self, rejected: NDArray[np.bool_]) -> FloatArray:
        """Per column, the last rejected grid point (rejections form a prefix), else 0."""
        last = rejected.shape[0] - 1 - np.argmax(rejected[::-1], axis=0)
        out: FloatArray = np.where(rejected.any(axis=0), self._m[last], 0.0)
        return out

    def _upper_bounds(self, rejected: NDArray[np.bool_]) -> FloatArray:
        """Per column, the first rejected grid point (rejections form a suffix), else 1."""
        first = np.argmax(rejected, axis=0)
        out: FloatArray = np.where(rejected.any(axis=0), self._m[first], 1.0)
        return out


def confidence_sequence(
    values: ArrayLike,
    *,
    alpha: float = 0.05,
    population: int | None = None,
    grid: int = 1000,
) -> tuple[FloatArray, FloatArray]:
    """The betting confidence sequence's (lower, upper) after each of `values` (in [0, 1])."""
    return BettingCS(alpha, population, grid).update(values)


@dataclass
class DifferenceCS:
    """A confidence sequence for the mean of paired differences d in [-w, w] (w: the metric's
    range), rescaled to (d + w) / (2 w) for `BettingCS`; bounds on the scale of d."""

    width: float
    alpha: float = 0.05
    population: int | None = None
    grid: int = 1000
    cs: BettingCS = field(init=False)

    def __post_init__(self) -> None:
        if not self.width > 0:
            raise ValueError(f"the metric's range must be positive, not {self.width}")
        self.cs = BettingCS(self.alpha, self.population, self.grid)

    def update(self, differences: ArrayLike) -> tuple[FloatArray, FloatArray]:
        d = np.asarray(differences, dtype=np.float64)
        w = self.width
        x = np.clip((d + w) / (2 * w), 0.0, 1.0)  # float noise at the edges
        low, high = self.cs.update(x)
        return 2 * w * low - w, 2 * w * high - w

    @property
    def bounds(self) -> tuple[float, float]:
        w = self.width
        return 2 * w * self.cs.lower - w, 2 * w * self.cs.upper - w
