"""Statistics for comparing runs: paired differences (bootstrap CI, sign-flip p-value),
agreement between rankers (per-item Kendall's tau-b, averaged), position bias of joint
prompts."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

from harness.core.dataset import Item
from harness.core.records import Record
from harness.scoring.metrics import FloatArray, kendall_tau_b, resample_blocks
from harness.scoring.power import minimum_detectable_difference

# Below this many items every sign pattern is enumerated (2**n <= this), so p is exact.
EXACT_SIGN_FLIP_LIMIT = 1 << 16


@dataclass(frozen=True)
class PairedDifference:
    """Mean of (run - baseline) over shared items, its paired-bootstrap CI, the two-sided
    sign-flip p-value and the difference detectable at 80% power (`harness.scoring.power`)."""

    n_items: int
    run_mean: float
    baseline_mean: float
    difference: float
    ci95: tuple[float, float]
    p_value: float
    exact: bool
    mdd80: float = float("nan")

    def to_json(self) -> dict[str, object]:
        return {
            "n_items": self.n_items,
            "run_mean": round(self.run_mean, 6),
            "baseline_mean": round(self.baseline_mean, 6),
            "difference": round(self.difference, 6),
            "ci_low": round(self.ci95[0], 6),
            "ci_high": round(self.ci95[1], 6),
            "p_value": self.p_value,
            "exact": self.exact,
            "mdd80": None if np.isnan(self.mdd80) else round(self.mdd80, 6),
        }


def _all_sign_patterns(n: int) -> NDArray[np.float64]:
    bits = (np.arange(1 << n)[:, None] >> np.arange(n)[None, :]) & 1
    signs: NDArray[np.float64] = (1 - 2 * bits).astype(np.float64)
    return signs


def sign_flip_p_value(
    differences: FloatArray, *, n_permutations: int = 10000, seed: int = 0
) -> tuple[float, bool]:
    """(p, exact): the two-sided p-value of the mean paired difference under random sign
    flips, exact over all 2**n patterns when few enough, else Monte Carlo with the +1
    correction (never 0)."""
    d = np.asarray(differences, dtype=np.float64)
    n = d.size
    if n == 0:
        return 1.0, True
    observed = abs(d.mean())
    # Float noise must not turn "as extreme" into "less extreme" (identical runs: p = 1).
    tolerance = 1e-12 * max(1.0, float(np.abs(d).max()))
    if (1 << min(n, 62)) <= max(n_permutations, EXACT_SIGN_FLIP_LIMIT) and n < 62:
        means = np.abs(_all_sign_patterns(n) @ d) / n
        return float(np.mean(means >= observed - tolerance)), True
    rng = np.random.default_rng(seed)
    extreme = 0
    chunk = max(1, min(n_permutations, 4_000_000 // n))
    for start in range(0, n_permutations, chunk):
        size = min(chunk, n_permutations - start)
        signs = rng.choice(np.array([-1.0, 1.0]), size=(size, n))
        extreme += int(np.count_nonzero(np.abs(signs @ d) / n >= observed - tolerance))
    return (extreme + 1) / (n_permutations + 1), False


def paired_bootstrap_ci(
    differences: FloatArray, *, n_bootstrap: int = 1000, seed: int = 0, tail: float = 2.5
) -> tuple[float, float]:
    """Percentile-bootstrap CI of the mean difference over items, `tail` percent each side."""
    d = np.asarray(differences, dtype=np.float64)
    if d.size == 0:
        return (float("nan"), float("nan"))
    means = np.empty(n_bootstrap)
    for rows, drawn in resample_blocks(n_bootstrap, d.size, np.random.default_rng(seed)):
        means[rows] = d[drawn].mean(axis=1)
    low, high = np.percentile(means, [tail, 100 - tail])
    return float(low), float(high)


def paired_difference(
    run: FloatArray,
    baseline: FloatArray,
    *,
    n_bootstrap: int = 1000,
    n_permutations: int = 10000,
    seed: int = 0,
) -> PairedDifference:
    """Compare two runs' per-item values of one metric on the same items (same order)."""
    a, b = np.asarray(run, dtype=np.float64), np.asarray(baseline, dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError(f"paired values differ in shape: {a.shape} vs {b.shape}")
    d = a - b
    p, exact = sign_flip_p_value(d, n_permutations=n_permutations, seed=seed)
    empty = d.size == 0
    return PairedDifference(
        n_items=int(d.size),
        run_mean=float("nan") if empty else float(a.mean()),
        baseline_mean=float("nan") if empty else float(b.mean()),
        difference=float("nan") if empty else float(d.mean()),
        ci95=paired_bootstrap_ci(d, n_bootstrap=n_bootstrap, seed=seed),
        p_value=p,
        exact=exact,
        mdd80=minimum_detectable_difference(d),
    )


def paired_metrics(
    run: Mapping[str, Mapping[str, float]],
    baseline: Mapping[str, Mapping[str, float]],
    *,
    n_bootstrap: int = 1000,
    n_permutations: int = 10000,
    seed: int = 0,
) -> dict[str, PairedDifference]:
    """Per metric ({item id: value} each side), the paired comparison on the shared items."""
    out = {}
    for name, values in run.items():
        base = baseline.get(name, {})
        shared = [item for item in values if item in base]
        out[name] = paired_difference(
            np.array([values[i] for i in shared]),
            np.array([base[i] for i in shared]),
            n_bootstrap=n_bootstrap,
            n_permutations=n_permutations,
            seed=seed,
        )
    return out


# ------------------------------------------------------------------------ many p-values
Correction = Literal["holm", "bh", "none"]
CORRECTION_NAMES: dict[str, str] = {"holm": "Holm", "bh": "Benjamini-Hochberg", "none": "none"}


def adjust_p_values(p_values: Sequence[float], method: Correction = "holm") -> FloatArray:
    """p-values adjusted for several at once: Holm's step-down (family-wise error rate) or
    Benjamini-Hochberg (false discovery rate; scipy); "none" leaves them."""
    p = np.asarray(p_values, dtype=np.float64)
    if method == "none" or p.size <= 1:
        return p.copy()
    if method == "bh":
        from scipy.stats import false_discovery_control

        adjusted: FloatArray = np.asarray(false_discovery_control(p, method="bh"))
        return adjusted
    if method != "holm":
        raise ValueError(f"unknown correction {method!r} (holm, bh or none)")
    order = np.argsort(p, kind="stable")
    m = p.size
    stepped = np.maximum.accumulate((m - np.arange(m)) * p[order])
    holm: FloatArray = np.empty(m)
    holm[order] = np.minimum(stepped, 1.0)
    return holm


# ------------------------------------------------------------------------ agreement
ScoreVectors = Mapping[str, FloatArray]  # item id -> scores in the item's candidate order


@dataclass(frozen=True)
class Agreement:
    labels: list[str]
    tau: FloatArray  # (runs x runs) mean per-item tau-b over the items both have
    n_items: NDArray[np.int64]


def agreement_matrix(vectors: Sequence[tuple[str, ScoreVectors]]) -> Agreement:
    """Pairwise Kendall's tau-b between score vectors, per item, averaged over the items both
    scored (same length, a score each); a missing score (NaN) ties below every scored one."""
    k = len(vectors)
    tau = np.full((k, k), np.nan)
    counts = np.zeros((k, k), dtype=np.int64)
    scored = [
        {item: np.where(np.isnan(v), -np.inf, v) for item, v in given.items() if _any_score(v)}
        for _, given in vectors
    ]
    for i, left in enumerate(scored):
        for j in range(i, k):
            right = scored[j]
            by_width: dict[int, list[str]] = {}
            for item, x in left.items():
                if item in right and len(right[item]) == len(x):
                    by_width.setdefault(len(x), []).append(item)
            found = [
                kendall_tau_b(np.stack([left[t] for t in ids]), np.stack([right[t] for t in ids]))
                for _, ids in sorted(by_width.items())
            ]
            values = np.concatenate(found) if found else np.empty(0)
            counts[i, j] = counts[j, i] = values.size
            if values.size:
                tau[i, j] = tau[j, i] = float(values.mean())
    return Agreement([label for label, _ in vectors], tau, counts)


def _any_score(vector: FloatArray) -> bool:
    return not np.isnan(np.asarray(vector, dtype=np.float64)).all()


# ------------------------------------------------------------------------ position bias
@dataclass(frozen=True)
class PositionBias:
    """Top-1 rates (ties split) of the model and the human per position of a joint prompt."""

    n_calls: int
    rates: FloatArray
    human_rates: FloatArray
    p_value: float  # chi-square goodness of fit of the model's top-1 counts to uniform 1/N

    @property
    def n_positions(self) -> int:
        return len(self.rates)

    @property
    def uniform(self) -> float:
        return 1.0 / self.n_positions if self.n_positions else float("nan")


def position_bias(records: Iterable[Record], items: Iterable[Item] = ()) -> PositionBias | None:
    """`position_top1_rates` of the answered, parsed joint calls with a chi-square test
    against 1/N; None without such calls."""
    joint = [r for r in records if r.raw is not None and not (r.error or r.parse_error)]
    top1 = position_top1_rates(joint, items)
    calls = int(top1["calls"])
    if not calls:
        return None
    rates = np.array(top1["model"], dtype=np.float64)
    p_value = uniform_p_value(rates * calls)
    return PositionBias(calls, rates, np.array(top1["human"], dtype=np.float64), p_value)


def uniform_p_value(observed: FloatArray) -> float:
    """Chi-square goodness-of-fit p-value of counts per position against equal counts."""
    from scipy.special import chdtrc  # chi-square survival function; slow-ish to import

    n = len(observed)
    expected = observed.sum() / n
    if n < 2 or expected <= 0:
        return 1.0
    statistic = float(((observed - expected) ** 2 / expected).sum())
    return float(chdtrc(n - 1, statistic))


def _top_shares(scores: Sequence[float | None]) -> list[float] | None:
    """Share of the top-1 at each position (1/k each for a k-way tie); None if nothing scored."""
    usable = [s for s in scores if s is not None]
    if not usable:
        return None
    best = max(usable)
    tied = [i for i, s in enumerate(scores) if s == best]
    return [1.0 / len(tied) if i in tied else 0.0 for i in range(len(scores))]


def position_top1_rates(records: Iterable[Record], items: Iterable[Item]) -> dict[str, Any]:
    """How often the model's top clip, and the human's, sat at each position of the joint
    records with a usable score (candidates in presentation order)."""
    human_best: Mapping[str, str] = {
        item.id: item.human_ranking[0] for item in items if item.human_ranking
    }
    model: list[float] = []
    human: list[float] = []
    counted = 0
    for record in records:
        if len(record.candidates) < 2:
            continue
        shares = _top_shares([record.scores.get(cid) for cid in record.candidates])
        if shares is None:
            continue
        if len(model) < len(shares):
            model += [0.0] * (len(shares) - len(model))
            human += [0.0] * (len(shares) - len(human))
        counted += 1
        for position, share in enumerate(shares):
            model[position] += share
        best = human_best.get(record.item_id)
        if best in record.candidates:
            human[record.candidates.index(best)] += 1.0
    if not counted:
        return {"calls": 0, "model": [], "human": []}
    return {
        "calls": counted,
        "model": [round(v / counted, 6) for v in model],
        "human": [round(v / counted, 6) for v in human],
    }
