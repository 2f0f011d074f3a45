"""The sequential comparison: visit items in a seeded random order, batch by batch, update
an anytime-valid confidence sequence for mean(B - A) of a per-item metric after each batch
(`harness.scoring.sequential`), and stop as soon as it excludes 0 (decided), lies inside
+-margin (equivalent), or the items or the budget run out (undecided)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from harness.core.errors import HarnessError
from harness.runs.compare.result import Comparison, Decision, Step
from harness.runs.compare.sources import PairSource, metric_spec
from harness.scoring.sequential import DifferenceCS
from harness.scoring.stats import paired_difference


def decide(low: float, high: float, margin: float | None) -> Decision | None:
    """What a confidence sequence [low, high] for mean(B - A) says, if anything yet."""
    if low > 0:
        return "B better"
    if high < 0:
        return "A better"
    if margin is not None and -margin < low and high < margin:
        return "equivalent"
    return None


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
    grid: int = 1000,
) -> Comparison:
    """Compare B with A on `source` sequentially (see the module docstring). `finite`: the
    sequence covers the mean over the source's items (sampling without replacement);
    otherwise the mean over items drawn like them (i.i.d.)."""
    _, width = metric_spec(metric)
    ids = source.item_ids
    order = [ids[i] for i in np.random.default_rng(seed).permutation(len(ids))]
    if max_items is not None:
        order = order[:max_items]
    cs = DifferenceCS(width, alpha, population=len(ids) if finite else None, grid=grid)
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
        # an item scored on one side only (`missing: exclude`) cannot be paired
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
    pairs = list(a_all)
    a_values = np.array([a_all[i] for i in pairs])
    b_values = np.array([b_all[i] for i in pairs])
    reference = paired_difference(b_values, a_values, n_permutations=1000, seed=seed)
    calls, usd = source.spent()
    calls_full, usd_full = source.full(len(visited))
    return Comparison(
        labels=source.labels,
        decision=decision or "undecided",
        reason=reason,
        metric=metric,
        alpha=alpha,
        margin=margin,
        finite=finite,
        seed=seed,
        n_items_total=len(ids),
        items=visited,
        mean_a=float(a_values.mean()) if pairs else float("nan"),
        mean_b=float(b_values.mean()) if pairs else float("nan"),
        path=path,
        calls=calls,
        calls_full=calls_full,
        usd=usd,
        usd_full=usd_full,
        bootstrap={
            "note": "fixed-sample 95% paired bootstrap on the visited items; NOT valid "
            "after optional stopping, for reference only",
            "ci95": [round(v, 6) for v in reference.ci95],
            "mdd80": None if np.isnan(reference.mdd80) else round(reference.mdd80, 6),
        },
    )


def _over_budget(budget: float | None, spent: float | None, visited: int, batch: int) -> bool:
    """Would the next batch, at the price per item so far, take the spend past the budget?"""
    if budget is None or spent is None or not visited:
        return False
    return spent + spent / visited * batch > budget


def write_comparison(comparison: Comparison, out: Path) -> list[Path]:
    """compare.json and compare.png in `out`."""
    from harness.runs.compare.figure import plot_sequence

    out.mkdir(parents=True, exist_ok=True)
    path = out / "compare.json"
    path.write_text(json.dumps(comparison.to_json(), indent=2) + "\n")
    figure = plot_sequence(comparison, out / "compare.png")
    return [path, figure]
