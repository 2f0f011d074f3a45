"""The model x prompt pivot of a prompting ablation (the layout of the paper's tables): one
row per model (and inputs, where they vary), one group of metric columns per prompt."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from harness.reports.formatting import format_metric, markdown_table, summary_columns
from harness.reports.loading import RunData
from harness.scoring import registry


@dataclass(frozen=True)
class Pivot:
    rows: list[str]
    prompts: list[str]
    cells: dict[tuple[str, str], RunData]  # (row, prompt) -> run; the first where several

    def summary(self, row: str, prompt: str, metric: str) -> dict[str, Any] | None:
        run = self.cells.get((row, prompt))
        if run is None:
            return None
        summary = run.aggregate.metrics.get(metric)
        return None if summary is None else summary.to_json()


def _row_key(run: RunData, with_inputs: bool) -> str:
    model = str(run.provider.get("label") or run.provider.get("model") or run.name)
    return f"{model} ({run.inputs})" if with_inputs else model


def build_pivot(runs: Sequence[RunData]) -> Pivot | None:
    """The pivot of `runs` when they use at least two prompts; None otherwise."""
    prompted = [run for run in runs if run.prompt != "n/a"]
    prompts = list(dict.fromkeys(run.prompt for run in prompted))
    if len(prompts) < 2:
        return None
    with_inputs = len({run.inputs for run in prompted}) > 1
    rows: list[str] = []
    cells: dict[tuple[str, str], RunData] = {}
    for run in prompted:
        row = _row_key(run, with_inputs)
        if row not in rows:
            rows.append(row)
        cells.setdefault((row, run.prompt), run)
    return Pivot(rows, prompts, cells)


def pivot_markdown(runs: Sequence[RunData]) -> str | None:
    pivot = build_pivot(runs)
    if pivot is None:
        return None
    cells = [(prompt, m) for prompt in pivot.prompts for m in registry.names("ranking")]
    header = ["model", *(f"{prompt}: {registry.label(m)}" for prompt, m in cells)]
    rows = [
        [row, *(format_metric(pivot.summary(row, prompt, m)) for prompt, m in cells)]
        for row in pivot.rows
    ]
    return markdown_table(header, rows)


def pivot_csv_rows(runs: Sequence[RunData]) -> list[dict[str, Any]]:
    """One row per (model, prompt) cell with plain numbers."""
    pivot = build_pivot(runs)
    if pivot is None:
        return []
    out = []
    for (row, prompt), run in pivot.cells.items():
        line: dict[str, Any] = {"model": row, "prompt": prompt, "run": run.label}
        for name in registry.names("ranking"):
            line |= summary_columns(name, run.aggregate.metrics.get(name), std=False)
        out.append(line)
    return out
