"""Readable summaries of metrics: a markdown report per run, a comparison table across runs,
and the same table on the terminal."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
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


def _percent(value: float | None) -> str:
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
                _percent(metrics["coverage"]),
                _percent(metrics["tie_rate"]),
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
        table.add_column(column, justify="left" if column == "run" else "right")
    for row in metric_rows(runs):
        table.add_row(*row)
    return table


def write_run_report(
    path: Path, config: Any, metrics: Mapping[str, Any], stats: Mapping[str, Any]
) -> None:
    provider = config.provider
    lines = [
        f"# {config.name}",
        "",
        f"- provider: `{provider.name}`, model `{provider.model or 'default'}`",
        f"- prompt: `{config.prompt}`; inputs: dialogue `{config.inputs.dialogue}`, music `{config.inputs.music}`",
        f"- dataset: `{config.dataset}`; repeats: {config.repeats}; missing scores: `{metrics['missing_policy']}`",
        "",
        markdown_table(HEADER, metric_rows([(config.name, metrics)])),
        "",
        "Means with 95% percentile-bootstrap CIs over items"
        + (" (± std across repeats)." if config.repeats > 1 else "."),
        "",
        f"Calls: {stats['calls']} ({stats['cache_hits']} from cache, {stats['model_calls']} to the model, "
        f"{stats['retries']} retries); failed: {stats['errors']}; unparsable answers: "
        f"{stats['parse_failures']}; tokens in/out: {stats['input_tokens']}/{stats['output_tokens']}.",
    ]
    if stats.get("error_kinds"):
        kinds = ", ".join(f"{k}: {n}" for k, n in sorted(stats["error_kinds"].items()))
        lines.append(f"Failures by kind: {kinds}.")
    from harness.pricing import cost_line

    cost = cost_line(stats.get("cost"))
    if cost:
        lines.append(cost)
    path.write_text("\n".join(lines) + "\n")


def write_comparison(path: Path, title: str, runs: Sequence[tuple[str, Mapping[str, Any]]]) -> None:
    body = [f"# {title}", "", markdown_table(HEADER, metric_rows(runs)), ""]
    path.write_text("\n".join(body))
