"""How far a comparison's figures move with its runs' settings (docs/metrics.md#comparing-runs):
each headline metric's spread over the runs (min / median / max, as FormatSpread reports a
prompt format's; Sclar et al. 2024), and a decomposition of the item-level values y[r, i] of
the first metric (runs r x the items all runs share) into sums of squares of main effects
(Montgomery, "Design and Analysis of Experiments", ch. 5):

    SS_total = sum_ri (y_ri - m)^2,   SS_item = R sum_i (mean_r y_ri - m)^2,
    SS_F = I sum_l R_l (m_l - m)^2    for each setting F the runs differ in (judge, prompt,
                                      order, seed), m_l the mean of its R_l runs at level l,

each as a share of SS_total; `residual` is what is left (interactions, repeats' noise). In a
balanced sweep (every combination of the settings) the shares add up; in an unbalanced one
the effects overlap and the residual is floored at 0."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from harness.reports.formatting import metric_label
from harness.reports.loading import RunData
from harness.reports.protocol_tables import Section
from harness.reports.tables import table_metrics


def _provider(config: Mapping[str, Any]) -> str:
    block = config.get("provider") or {}
    return ":".join(str(block.get(key) or "") for key in ("name", "model", "label"))


FACTORS: dict[str, Callable[[Mapping[str, Any]], str]] = {
    "judge": _provider,
    "prompt": lambda config: str(config.get("prompt")),
    "order": lambda config: str((config.get("prompt_options") or {}).get("order", "fixed")),
    "seed": lambda config: str(config.get("seed", 0)),
}
NOTE = (
    "Spread: each metric's mean over the runs. Variance: shares of the sum of squares of the "
    "first metric's per-item values, main effects (docs/metrics.md#comparing-runs)."
)


def decomposition(runs: Sequence[RunData], metric: str) -> dict[str, float] | None:
    """Shares of SS_total of `metric`'s item-level values; None without variation."""
    per_run = [run.per_item().get(metric, {}) for run in runs]
    shared = sorted(set.intersection(*(set(values) for values in per_run)))
    y = np.array([[values[item] for item in shared] for values in per_run])
    if y.size == 0 or not np.isfinite(y).all():
        return None
    grand = y.mean()
    total = float(((y - grand) ** 2).sum())
    if total <= 0:
        return None
    sums = {"item": len(runs) * float(((y.mean(axis=0) - grand) ** 2).sum())}
    run_means = y.mean(axis=1)
    for factor, level_of in FACTORS.items():
        levels = np.array([level_of(run.config) for run in runs])
        if len(set(levels)) > 1:
            sums[factor] = len(shared) * sum(
                float((levels == level).sum() * (run_means[levels == level].mean() - grand) ** 2)
                for level in set(levels)
            )
    sums["residual"] = max(total - sum(sums.values()), 0.0)
    return {name: value / total for name, value in sums.items()}


def sensitivity_section(runs: Sequence[RunData]) -> list[Section]:
    """`Sensitivity across runs` for two runs or more."""
    if len(runs) < 2:
        return []
    spread = []
    for name in table_metrics(runs):
        means = [run.aggregate.metrics[name].mean for run in runs if name in run.aggregate.metrics]
        values = [float(mean) for mean in means if mean is not None]
        if len(values) >= 2:
            low, mid, high = np.percentile(values, [0, 50, 100])
            cells = [f"{v:.3f}" for v in (low, mid, high, high - low)]
            spread.append([metric_label(name), *cells, str(len(values))])
    tables = [(["metric", "min", "median", "max", "max - min", "runs"], spread)]
    names = table_metrics(runs)
    shares = decomposition(runs, names[0]) if names else None
    if shares:
        rows = [[part, f"{share:.1%}"] for part, share in shares.items()]
        tables.append((["component", f"share of {metric_label(names[0])}'s variance"], rows))
    return [Section("Sensitivity across runs", tables, NOTE)] if spread else []
