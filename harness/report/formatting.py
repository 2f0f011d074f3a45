"""How metrics read in a table: a mean with its CI (or ± std across repeats), percentages,
and the one-row-per-run metric table as markdown or for the terminal."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rich.table import Table

from harness.metrics import METRIC_NAMES

METRIC_LABELS = {"hit@1": "Hit@1", "mrr": "MRR", "ndcg": "nDCG", "kendall_tau_b": "tau-b"}


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


def percent(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.1f}%"


def metric_rows(runs: Sequence[tuple[str, Mapping[str, Any]]]) -> list[list[str]]:
    rows = []
    for name, metrics in runs:
        cells = [format_metric(metrics["metrics"].get(m)) for m in METRIC_NAMES]
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


HEADER = ["run", *(METRIC_LABELS[m] for m in METRIC_NAMES), "items", "coverage", "tie rate"]


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def rich_table(title: str, runs: Sequence[tuple[str, Mapping[str, Any]]]) -> Table:
    table = Table(title=title, title_justify="left")
    for column in HEADER:
        if column == "run":
            table.add_column(column, overflow="fold", min_width=24)
        else:
            table.add_column(column, justify="right", no_wrap=True)
    for row in metric_rows(runs):
        # The CI goes under the mean so that run names keep their room.
        table.add_row(*(cell.replace(" [", "\n[") for cell in row))
    return table
