"""How metrics read in a table: a mean with its CI (or ± std across repeats), percentages,
and the one-row-per-run metric table as markdown or for the terminal."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from rich.table import Table

from harness.core.sanitize import terminal_text
from harness.scoring import registry
from harness.scoring.metrics import MetricSummary

metric_label = registry.label


def shown_metrics(blocks: Iterable[Mapping[str, Any]], *, compact: bool = False) -> list[str]:
    """The metric columns of a table over metrics.json blocks (`registry.shown`)."""
    present: set[str] = set()
    for block in blocks:
        present |= set(block.get("metrics") or {})
    return registry.shown(present, compact=compact)


def format_metric(summary: Mapping[str, Any] | None) -> str:
    """`0.583 [0.561, 0.604]`, or `0.583 ± 0.012` across repeats."""
    if not summary or summary.get("mean") is None:
        return "n/a"
    text = f"{summary['mean']:.3f}"
    if summary.get("std") is not None:
        text += f" ± {summary['std']:.3f}"
    if summary.get("ci95"):
        low, high = summary["ci95"]
        text += f" [{low:.3f}, {high:.3f}]"
    return text


def summary_columns(
    name: str, summary: MetricSummary | None, *, std: bool = True
) -> dict[str, float | None]:
    """A metric's CSV columns: `NAME_mean`, `NAME_ci_low`, `NAME_ci_high` (and `NAME_std`)."""
    summary = summary or MetricSummary(None, None)
    low, high = summary.ci95 or (None, None)
    out = {f"{name}_mean": summary.mean, f"{name}_ci_low": low, f"{name}_ci_high": high}
    return out | ({f"{name}_std": summary.std} if std else {})


def percent(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.1f}%"


def metric_header(names: Sequence[str], first: str = "run") -> list[str]:
    return [first, *map(metric_label, names), "items", "coverage", "tie rate"]


def metric_rows(
    runs: Sequence[tuple[str, Mapping[str, Any]]], names: Sequence[str] | None = None
) -> list[list[str]]:
    """One row per (label, metrics.json block): the metrics `names` (default: every
    block's `shown_metrics`), items, coverage and tie rate."""
    names = shown_metrics(m for _, m in runs) if names is None else names
    rows = []
    for name, metrics in runs:
        cells = [format_metric(metrics["metrics"].get(m)) for m in names]
        rows.append(
            [
                name,
                *cells,
                str(metrics["n_items"]),
                percent(metrics["coverage"]),
                percent(metrics["tie_rate"]),
            ]
        )
    return rows


def group_rows(
    runs: Sequence[tuple[str, Mapping[str, Any]]], names: Sequence[str] | None = None
) -> list[list[str]]:
    """The per-group breakdown (metrics.json `groups`) as rows `run / group`, or `group`
    alone for a single run."""
    names = shown_metrics(m for _, m in runs) if names is None else names
    blocks = []
    for run, metrics in runs:
        for group, block in (metrics.get("groups") or {}).items():
            blocks.append((group if len(runs) == 1 else f"{run} / {group}", block))
    return metric_rows(blocks, names)


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def rich_table(title: str, runs: Sequence[tuple[str, Mapping[str, Any]]]) -> Table:
    table = Table(title=terminal_text(title), title_justify="left")
    names = shown_metrics((m for _, m in runs), compact=True)
    for column in metric_header(names):
        if column == "run":
            table.add_column(column, overflow="fold", min_width=24)
        else:
            table.add_column(column, justify="right", no_wrap=True)
    for row in metric_rows(runs, names):
        # The CI goes under the mean so that run names keep their room.
        table.add_row(*(terminal_text(cell.replace(" [", "\n[")) for cell in row))
    return table
