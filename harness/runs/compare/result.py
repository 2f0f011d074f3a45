"""What a sequential comparison found: its decision, the confidence sequence after each
batch, and what it cost (compare.json)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

Decision = Literal["A better", "B better", "equivalent", "undecided"]


@dataclass
class Step:
    n: int
    mean: float
    lo: float
    hi: float
    calls: int | None
    usd: float | None

    def to_json(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "mean": round(self.mean, 6),
            "lo": round(self.lo, 6),
            "hi": round(self.hi, 6),
            "calls": self.calls,
            "usd": None if self.usd is None else round(self.usd, 6),
        }


@dataclass
class Comparison:
    labels: tuple[str, str]
    decision: Decision
    reason: str  # why it stopped
    metric: str
    alpha: float
    margin: float | None
    finite: bool
    seed: int
    n_items_total: int
    items: list[str]  # visited, in order
    mean_a: float
    mean_b: float
    path: list[Step] = field(default_factory=list)
    calls: int | None = None
    calls_full: int | None = None
    usd: float | None = None
    usd_full: float | None = None
    bootstrap: dict[str, Any] = field(default_factory=dict)

    @property
    def n_items(self) -> int:
        return len(self.items)

    @property
    def cs(self) -> tuple[float, float]:
        last = self.path[-1] if self.path else None
        return (last.lo, last.hi) if last else (float("nan"), float("nan"))

    def to_json(self) -> dict[str, Any]:
        return {
            "decision": self.decision,
            "reason": self.reason,
            "a": self.labels[0],
            "b": self.labels[1],
            "metric": self.metric,
            "alpha": self.alpha,
            "margin": self.margin,
            "target": "mean over these items (finite population)"
            if self.finite
            else "mean over items like these (i.i.d. items)",
            "seed": self.seed,
            "n_items": self.n_items,
            "n_items_total": self.n_items_total,
            "calls": self.calls,
            "calls_full": self.calls_full,
            "usd": None if self.usd is None else round(self.usd, 6),
            "usd_full": self.usd_full,
            "mean_a": round(self.mean_a, 6),
            "mean_b": round(self.mean_b, 6),
            "difference": round(self.mean_b - self.mean_a, 6),
            "cs": [round(v, 6) for v in self.cs],
            "path": [step.to_json() for step in self.path],
            "bootstrap_reference": self.bootstrap,
            "items": self.items,
        }

    def line(self) -> str:
        """The one terminal line."""
        lo, hi = self.cs
        calls = ""
        if self.calls is not None and self.calls_full:
            calls = f", {self.calls} model calls of {self.calls_full} for two full runs"
        margin = "" if self.margin is None else f", margin ±{self.margin:g}"
        return (
            f"{self.decision}: {self.metric} B - A = {self.mean_b - self.mean_a:+.3f}, "
            f"{100 * (1 - self.alpha):g}% confidence sequence [{lo:+.3f}, {hi:+.3f}] after "
            f"{self.n_items} of {self.n_items_total} items{margin}{calls} ({self.reason})"
        )
