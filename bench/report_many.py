"""(12b) The 20-run part of `report_scale` alone: `harness report` over 20 runs of 1,200
items x 4 candidates as a whole process (wall, CPU, peak RSS; three rounds, min and median),
without the 2-run browser reports and Chromium."""

from __future__ import annotations

from pathlib import Path

from bench.common import OUT, BenchResult, Size
from bench.report_scale import SCALES, many_runs


def run(size: Size, work: Path) -> BenchResult:
    scale = SCALES[size]
    figures, met, line = many_runs(scale, work, OUT / "report_data", 3 if size == "full" else 1)
    return BenchResult(
        name="report_many",
        summary=line,
        figures=figures,
        goal="20-run report < 3 s and < 300 MiB",
        met=all(met),
        tracked=(f"{scale.many_runs}-run report peak MiB (min)",),
    )
