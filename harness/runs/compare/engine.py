"""Is B better than A? Two designs on the items both sides answered (`harness.runs.compare.
inputs`), visited in a seeded random order:

- sequential: batch by batch, an anytime-valid confidence sequence for mean(B - A) of a
  per-item metric (`harness.scoring.sequential`) updated after each batch; stop as soon as it
  excludes 0 (decided), lies inside +-margin (equivalent), or the items or the budget run out
  (undecided);
- fixed: every item (or the first --max-items of the order) at once, then a paired test: the
  sign-flip p-value below alpha decides; else the (1 - 2 alpha) bootstrap CI inside +-margin
  is `equivalent` (two one-sided tests); else undecided."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from harness.core.errors import HarnessError
from harness.runs.compare.inputs import Coverage, MissingChoice
from harness.runs.compare.result import Comparison, Decision, Step
from harness.runs.compare.sources import PairSource, metric_spec
from harness.scoring.sequential import DifferenceCS, FloatArray
from harness.scoring.stats import paired_bootstrap_ci, paired_difference


def decide(low: float, high: float, margin: float | None) -> Decision | None:
    """What an interval [low, high] for mean(B - A) says, if anything yet."""
    if low > 0:
        return "B better"
    if high < 0:
        return "A better"
    if margin is not None and -margin < low and high < margin:
        return "equivalent"
    return None


def _visiting_order(coverage: Coverage, seed: int, max_items: int | None) -> list[str]:
    ids = coverage.compared
    order = [ids[i] for i in np.random.default_rng(seed).permutation(len(ids))]
    return order if max_items is None else order[:max_items]


def sequential_compare(
    source: PairSource,
    *,
    metric: str = "hit@1",
    alpha: float = 0.05,
    margin: float | None = None,
    batch_size: int = 50,
    max_items: int | None = None,
    budget_usd: float | None = None,
    finite: bool = False,
    seed: int = 0,
    missing: MissingChoice = "exclude",
    grid: int = 1000,
) -> Comparison:
    """Compare B with A sequentially (module docstring). `finite`: the mean over the compared
    items (sampling without replacement), else over items drawn like them (i.i.d.)."""
    _, width = metric_spec(metric)
    coverage = Coverage.of(
        source.item_ids, source.answered, missing, source.labels, source.unshared
    )
    order = _visiting_order(coverage, seed, max_items)
    total = len(coverage.compared)
    cs = DifferenceCS(width, alpha, population=total if finite else None, grid=grid)
    visited: list[str] = []
    a_all: dict[str, float] = {}
    b_all: dict[str, float] = {}
    path: list[Step] = []
    decision: Decision | None = None
    reason = "all items visited" if max_items is None else "--max-items reached"
    for start in range(0, len(order), batch_size):
        batch = order[start : start + batch_size]
        _, usd = source.spent()
        if _over_budget(budget_usd, usd, len(visited), len(batch)):
            reason = f"the next batch would pass the budget of ${budget_usd:g}"
            break
        a, b = source.values(visited + batch)
        # an item one side's own `missing: exclude` dropped cannot be paired
        paired = [i for i in batch if i in a and i in b]
        if finite and len(paired) < len(batch):
            raise HarnessError(
                f"--finite needs a value on both sides for every item, and "
                f"{len(batch) - len(paired)} item(s) of this batch have none (missing: "
                "exclude?): compare without --finite"
            )
        visited += batch
        if not paired:
            continue
        a_all.update({i: a[i] for i in paired})
        b_all.update({i: b[i] for i in paired})
        cs.update([b[i] - a[i] for i in paired])
        low, high = cs.bounds
        calls, usd = source.spent()
        mean = float(np.mean([b_all[i] - a_all[i] for i in a_all]))
        path.append(Step(len(a_all), mean, low, high, calls, usd))
        decision = decide(low, high, margin)
        if decision is not None:
            reason = "the sequence excludes 0" if decision != "equivalent" else "inside the margin"
            break
    a_values, b_values = (np.array([side[i] for i in a_all]) for side in (a_all, b_all))
    reference = paired_difference(b_values, a_values, n_permutations=1000, seed=seed)
    return Comparison(
        **_common(source, coverage, visited, a_values, b_values),
        decision=decision or "undecided",
        reason=reason,
        metric=metric,
        alpha=alpha,
        margin=margin,
        finite=finite,
        seed=seed,
        path=path,
        bootstrap={
            "note": "fixed-sample 95% paired bootstrap on the visited items; NOT valid "
            "after optional stopping, for reference only",
            "ci95": [round(v, 6) for v in reference.ci95],
            "mdd80": None if np.isnan(reference.mdd80) else round(reference.mdd80, 6),
        },
    )


def fixed_compare(
    source: PairSource,
    *,
    metric: str = "hit@1",
    alpha: float = 0.05,
    margin: float | None = None,
    max_items: int | None = None,
    seed: int = 0,
    missing: MissingChoice = "exclude",
    n_permutations: int = 10000,
) -> Comparison:
    """Compare B with A on every compared item (or `max_items`) at once, by a paired test."""
    metric_spec(metric)
    coverage = Coverage.of(
        source.item_ids, source.answered, missing, source.labels, source.unshared
    )
    visited = _visiting_order(coverage, seed, max_items)
    a, b = source.values(visited)
    paired = [i for i in visited if i in a and i in b]
    a_values, b_values = np.array([a[i] for i in paired]), np.array([b[i] for i in paired])
    test = paired_difference(b_values, a_values, n_permutations=n_permutations, seed=seed)
    decision: Decision = "undecided"
    reason = f"p = {test.p_value:.3g} >= alpha"
    if test.p_value < alpha:
        decision, reason = ("B better" if test.difference > 0 else "A better"), "p < alpha"
    elif margin is not None:
        low, high = paired_bootstrap_ci(b_values - a_values, seed=seed, tail=100 * alpha)
        if decide(low, high, margin) == "equivalent":
            decision = "equivalent"
            reason = f"the {1 - 2 * alpha:.0%} CI lies inside the margin"
    return Comparison(
        **_common(source, coverage, visited, a_values, b_values),
        decision=decision,
        reason=reason,
        metric=metric,
        alpha=alpha,
        margin=margin,
        finite=False,
        seed=seed,
        test=test,
    )


def _common(
    source: PairSource,
    coverage: Coverage,
    visited: list[str],
    a_values: FloatArray,
    b_values: FloatArray,
) -> dict[str, Any]:
    calls, usd = source.spent()
    calls_full, usd_full = source.full(len(visited))
    return {
        "labels": source.labels,
        "n_items_total": len(coverage.compared),
        "items": visited,
        "mean_a": float(a_values.mean()) if a_values.size else float("nan"),
        "mean_b": float(b_values.mean()) if b_values.size else float("nan"),
        "calls": calls,
        "calls_full": calls_full,
        "usd": usd,
        "usd_full": usd_full,
        "coverage": coverage.to_json(),
        "warning": coverage.warning(source.labels),
        "unofficial": source.unofficial,
    }


def _over_budget(budget: float | None, spent: float | None, visited: int, batch: int) -> bool:
    """Would the next batch, at the price per item so far, take the spend past the budget?"""
    if budget is None or spent is None or not visited:
        return False
    return spent + spent / visited * batch > budget


def write_comparison(comparison: Comparison, out: Path) -> list[Path]:
    """compare.json, and for a sequential comparison compare.png, in `out`."""
    from harness.runs.compare.figure import plot_sequence

    out.mkdir(parents=True, exist_ok=True)
    path = out / "compare.json"
    path.write_text(json.dumps(comparison.to_json(), indent=2, allow_nan=False) + "\n")
    if comparison.test is not None:
        return [path]
    return [path, plot_sequence(comparison, out / "compare.png")]
