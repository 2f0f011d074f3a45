"""What a comparison found: its decision, the items it compared (and those it could not),
the confidence sequence after each batch or the fixed-sample test, and what it cost
(compare.json)."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from harness.scoring.stats import PairedDifference

if TYPE_CHECKING:
    import pandas as pd

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
        return {k: round(v, 6) if isinstance(v, float) else v for k, v in asdict(self).items()}


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
    coverage: dict[str, Any] = field(default_factory=dict)  # `inputs.Coverage.to_json`
    warning: str | None = None  # what the coverage means for the result
    unofficial: dict[str, list[str]] = field(default_factory=dict)  # label -> stand-in endpoints
    test: PairedDifference | None = None  # the fixed-sample design's test
    files: list[Path] = field(default_factory=list)  # compare.json (and compare.png) written

    @property
    def steps(self) -> pd.DataFrame:
        """The confidence sequence after each look (n, mean of B - A, lo, hi, calls, usd), or
        the fixed-sample test's one row (n, mean, lo, hi, p_value), as a DataFrame."""
        import pandas as pd

        if self.test is None:
            return pd.DataFrame([step.to_json() for step in self.path])
        (lo, hi), diff = self.test.ci95, self.mean_b - self.mean_a
        return pd.DataFrame([{"n": self.n_items, "mean": diff, "lo": lo, "hi": hi}]).assign(
            p_value=self.test.p_value
        )

    @property
    def n_items(self) -> int:
        return len(self.items)

    @property
    def cs(self) -> tuple[float, float]:
        last = self.path[-1] if self.path else None
        return (last.lo, last.hi) if last else (float("nan"), float("nan"))

    def to_json(self) -> dict[str, Any]:
        design: dict[str, Any]
        if self.test is None:
            design = {
                "design": "sequential",
                "cs": [_finite(v) for v in self.cs],
                "path": [step.to_json() for step in self.path],
                "bootstrap_reference": self.bootstrap,
            }
        else:
            design = {"design": "fixed", "test": self.test.to_json()}
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
            "coverage": self.coverage,
            "mean_a": _finite(self.mean_a),
            "mean_b": _finite(self.mean_b),
            "difference": _finite(self.mean_b - self.mean_a),
            **design,
            "items": self.items,
        }

    def line(self) -> str:
        calls = ""
        if self.calls is not None and self.calls_full:
            calls = f", {self.calls} model calls of {self.calls_full} for two full runs"
        margin = "" if self.margin is None else f", margin ±{self.margin:g}"
        if self.test is None:
            (lo, hi), level = self.cs, f"{100 * (1 - self.alpha):g}% confidence sequence"
            found = f"{level} [{lo:+.3f}, {hi:+.3f}] after {self.n_items} of {self.n_items_total}"
        else:
            (lo, hi), p = self.test.ci95, self.test.p_value
            found = f"paired test p = {p:.3g}, 95% CI [{lo:+.3f}, {hi:+.3f}], on {self.n_items}"
            found += "" if self.n_items == self.n_items_total else f" of {self.n_items_total}"
        return (
            f"{self.decision}: {self.metric} B - A = {self.mean_b - self.mean_a:+.3f}, "
            f"{found} items{margin}{calls} ({self.reason})"
        )


def _finite(value: float) -> float | None:
    """A figure for JSON, which has no NaN or infinity: rounded, or None."""
    return round(value, 6) if math.isfinite(value) else None
