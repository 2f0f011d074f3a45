"""(5c) A 1,000,000-call run of the seeded `random` scorer completes on this machine: once,
whole process, its peak RSS against a 1,000-call run's (`bench.memory_series`)."""

from __future__ import annotations

from pathlib import Path

from bench.common import BenchResult, Size
from bench.memory_series import SERIES, measure


def run(size: Size, work: Path) -> BenchResult:
    series = SERIES["million"] if size == "full" else SERIES["tiny"]
    result = measure(series, 1, work, "memory_million", with_goal=False)
    result.goal = "completes" if size == "full" else ""
    result.met = True if size == "full" else None  # measure() raises when it does not
    return result
