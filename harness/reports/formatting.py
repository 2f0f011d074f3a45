"""How metrics read in a table: a mean with its CI (or ± std across repeats), percentages,
and the one-row-per-run metric table as markdown or for the terminal."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, RenderResult
from rich.table import Table
from rich.text import Text

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
    for label, block in runs:
        cells = [format_metric(block["metrics"].get(m)) for m in names]
        counts = [str(block["n_items"]), percent(block["coverage"]), percent(block["tie_rate"])]
        rows.append([label, *cells, *counts])
    return rows


def group_rows(
    runs: Sequence[tuple[str, Mapping[str, Any]]], names: Sequence[str] | None = None
) -> list[list[str]]:
    """The per-group breakdown (metrics.json `groups`) as rows `run / group`, or `group`
    alone for a single run."""
    blocks = [
        (group if len(runs) == 1 else f"{run} / {group}", block)
        for run, metrics in runs
        for group, block in (metrics.get("groups") or {}).items()
    ]
    return metric_rows(blocks, shown_metrics(m for _, m in runs) if names is None else names)


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A table whose cells may hold `|` or line breaks (a label's): escaped, not new cells."""

    def line(cells: Sequence[str]) -> str:
        escaped = (re.sub(r"[\r\n]+", " ", cell.replace("|", "\\|")) for cell in cells)
        return "| " + " | ".join(escaped) + " |"

    return "\n".join([line(header), "|" + "---|" * len(header), *map(line, rows)])


def rich_table(title: str, runs: Sequence[tuple[str, Mapping[str, Any]]]) -> TerminalTable:
    names = shown_metrics((m for _, m in runs), compact=True)
    return TerminalTable(title, metric_header(names), metric_rows(runs, names))


class TerminalTable:
    """Rows for the terminal whose first column names the run. The other columns go over as
    many tables as the width needs, each with the run names: squeezed into one, rich gave the
    run column no width at all in a log or a narrow terminal, and cut the figures."""

    def __init__(self, title: str, header: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
        self.title = title
        # Cells as the terminal shows them (control characters escaped), measured as such.
        self.header = [Text.from_markup(terminal_text(cell)) for cell in header]
        # The CI goes under the mean so that the columns stay narrow.
        self.rows = [
            [Text.from_markup(terminal_text(c.replace(" [", "\n["))) for c in r] for r in rows
        ]

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        cells = zip(self.header, *self.rows, strict=True)
        widths = [
            max(cell_len(line) for c in column for line in c.plain.split("\n")) for column in cells
        ]
        # A column takes its text, a space either side and a rule; the table one more rule.
        width = options.max_width
        first = min(widths[0], max(24, width // 3), max(width - max(widths[1:]) - 7, 1))
        groups: list[list[int]] = [[]]
        room = width - first - 4
        for i, column_width in enumerate(widths[1:], 1):
            if groups[-1] and room < column_width + 3:
                groups.append([])
                room = width - first - 4
            groups[-1].append(i)
            room -= column_width + 3
        for n, group in enumerate(groups):
            table = Table(title=terminal_text(self.title) if n == 0 else None, title_justify="left")
            table.add_column(self.header[0], width=first, overflow="fold")
            for i in group:
                table.add_column(self.header[i], justify="right", no_wrap=True)
            for row in self.rows:
                table.add_row(*(row[i] for i in [0, *group]))
            yield table
