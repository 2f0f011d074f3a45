"""The comparison across runs as table rows: markdown, CSV rows (plain numbers) and the
terminal, for the comparison itself, the paired statistics, agreement and position bias."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from harness.core.provenance import drifted_packages, unofficial_endpoints
from harness.reports.analysis import Analysis
from harness.reports.formatting import (
    TerminalTable,
    format_metric,
    group_rows,
    markdown_table,
    metric_header,
    metric_label,
    percent,
    shown_metrics,
    summary_columns,
)
from harness.reports.loading import RunData
from harness.reports.paired_tables import (
    agreement_table,
    paired_note,
    paired_title,
    statistics_tables,
)
from harness.reports.pivot import pivot_markdown
from harness.reports.protocol_tables import protocol_markdown
from harness.reports.run_report import HUMAN_NOTE
from harness.scoring import registry
from harness.scoring.human_ceiling import HUMAN_ROW
from harness.scoring.metrics import Aggregate


def _usd(block: Any, key: str) -> float | None:
    usd = block.get(key) if isinstance(block, dict) else None
    return float(usd) if isinstance(usd, int | float) and not isinstance(usd, bool) else None


def estimated_cost(stats: Mapping[str, Any]) -> float | None:
    """Estimated cost in USD of all the run's answers, generated summaries included (run.json
    `cost.usd` and `summaries_cost.usd`, written by harness.calls.pricing.run_cost); None when the
    run has no price for its model."""
    found = [
        usd for b in ("cost", "summaries_cost") if (usd := _usd(stats.get(b), "usd")) is not None
    ]
    return sum(found, 0.0) if found else None


def cost_discounts(stats: Mapping[str, Any]) -> dict[str, float]:
    """The batch and prompt-cache discounts in the run's cost (run.json `cost`), in USD."""
    keys = ("batch_discount", "cache_discount")
    return {k: usd for k in keys if (usd := _usd(stats.get("cost"), k)) is not None}


def cost_cell(stats: Mapping[str, Any]) -> str:
    """`$0.0123`, with what the batch and prompt-cache discounts saved when they did."""
    cost = estimated_cost(stats)
    if cost is None:
        return "n/a"
    saved = [
        f"{name} -${usd:.4f}"
        for key, name in (("batch_discount", "batch"), ("cache_discount", "cache"))
        if (usd := cost_discounts(stats).get(key, 0.0)) > 0
    ]
    return f"${cost:.4f}" + (f" ({', '.join(saved)})" if saved else "")


def _tokens(stats: Mapping[str, Any]) -> str:
    if "input_tokens" not in stats and "output_tokens" not in stats:
        return "n/a"
    return f"{stats.get('input_tokens', 0)}/{stats.get('output_tokens', 0)}"


def table_metrics(runs: Sequence[RunData], *, compact: bool = False) -> list[str]:
    return shown_metrics((run.aggregate.to_json() for run in runs), compact=compact)


UNOFFICIAL_MARK = " †"
DRIFTED_MARK = " ‡"


def run_marks(run: RunData) -> str:
    """A dagger when the run's endpoint is not the provider's official one, a double dagger
    when it was made in an environment that differs from the lock."""
    return (UNOFFICIAL_MARK if unofficial_endpoints(run.stats) else "") + (
        DRIFTED_MARK if drifted_packages(run.stats) else ""
    )


def marked(run: RunData) -> str:
    return run.label + run_marks(run)


def endpoint_notes(runs: Sequence[RunData]) -> list[str]:
    """One line per marked run: which endpoint it called, which packages had drifted."""
    notes = [
        f"† `{run.label}`: {'; '.join(marks)} is not the provider's official "
        "service; its numbers are not that provider's, and its cost is estimated at official prices."
        for run in runs
        if (marks := unofficial_endpoints(run.stats))
    ]
    notes += [
        f"‡ `{run.label}`: made in an environment that differs from the lock "
        f"({'; '.join(drift)}); it may not reproduce after `make install`."
        for run in runs
        if (drift := drifted_packages(run.stats))
    ]
    return notes


def comparison_header(runs: Sequence[RunData], *, compact: bool = False) -> list[str]:
    return [
        "run",
        "provider",
        "model",
        "prompt",
        "inputs",
        *map(metric_label, table_metrics(runs, compact=compact)),
        "items",
        "coverage",
        "tie rate",
        "parse failures",
        "calls",
        "tokens in/out",
        "est. cost",
    ]


def comparison_rows(runs: Sequence[RunData], *, compact: bool = False) -> list[list[str]]:
    names = table_metrics(runs, compact=compact)
    rows = []
    for run in runs:
        metrics = run.aggregate.to_json()
        summaries: dict[str, Any] = metrics["metrics"]  # type: ignore[assignment]
        rows.append(
            [
                marked(run),
                str(run.provider.get("name", "?")),
                str(run.provider.get("model") or "default"),
                run.prompt,
                run.inputs,
                *(format_metric(summaries.get(m)) for m in names),
                str(run.aggregate.n_items),
                percent(run.aggregate.coverage),
                percent(run.aggregate.tie_rate),
                percent(run.parse_failure_rate),
                str(run.stats.get("calls", len(run.records))),
                _tokens(run.stats),
                cost_cell(run.stats),
            ]
        )
    return rows


def human_row(human: Aggregate, names: Sequence[str]) -> list[str]:
    """The human ceiling as a comparison row of the metric columns `names` (cells that do
    not apply say so)."""
    metrics: dict[str, Any] = human.to_json()["metrics"]  # type: ignore[assignment]
    cells = [format_metric(metrics.get(m)) for m in names]
    tie = percent(human.tie_rate)
    return [
        HUMAN_ROW,
        "human",
        "annotators",
        "n/a",
        "n/a",
        *cells,
        str(human.n_items),
        "n/a",
        tie,
    ] + ["n/a"] * 4


def comparison_table(
    runs: Sequence[RunData], human: Aggregate | None = None, *, compact: bool = False
) -> tuple[list[str], list[list[str]]]:
    """The comparison's header and rows, the human ceiling last where there is one."""
    rows = comparison_rows(runs, compact=compact)
    if human is not None:
        rows.append(human_row(human, table_metrics(runs, compact=compact)))
    return comparison_header(runs, compact=compact), rows


def comparison_csv_rows(runs: Sequence[RunData]) -> list[dict[str, Any]]:
    """The comparison table with plain numbers (for pandas, spreadsheets): every metric any
    run reports (empty where a run does not)."""
    names = list(dict.fromkeys(name for run in runs for name in run.aggregate.metrics))
    out = []
    for run in runs:
        row: dict[str, Any] = {
            "run": run.label,
            "path": str(run.path),
            "score": run.score,
            "official_endpoint": not unofficial_endpoints(run.stats),
            "provider": run.provider.get("name"),
            "model": run.provider.get("model"),
            "prompt": run.prompt,
            "dialogue": (run.config.get("inputs") or {}).get("dialogue"),
            "music": (run.config.get("inputs") or {}).get("music"),
            "repeats": run.aggregate.n_repeats,
            "n_items": run.aggregate.n_items,
        }
        for name in names:
            row |= summary_columns(name, run.aggregate.metrics.get(name))
        row |= {
            "coverage": round(run.aggregate.coverage, 6),
            "tie_rate": None
            if run.aggregate.tie_rate is None
            else round(run.aggregate.tie_rate, 6),
            "parse_failure_rate": run.parse_failure_rate,
            "calls": run.stats.get("calls", len(run.records)),
            "model_calls": run.stats.get("model_calls"),
            "cache_hits": run.stats.get("cache_hits"),
            "input_tokens": run.stats.get("input_tokens"),
            "output_tokens": run.stats.get("output_tokens"),
            "cost_usd": estimated_cost(run.stats),
            "batch_discount_usd": cost_discounts(run.stats).get("batch_discount"),
            "cache_discount_usd": cost_discounts(run.stats).get("cache_discount"),
        }
        out.append(row)
    return out


def human_csv_rows(human: Aggregate | None) -> list[dict[str, Any]]:
    if human is None:
        return []
    row: dict[str, Any] = {"run": HUMAN_ROW, "provider": "human", "n_items": human.n_items}
    for name in registry.names("ranking"):
        row |= summary_columns(name, human.metrics.get(name))
    return [row]


def comparison_markdown(analysis: Analysis, title: str = "comparison") -> str:
    repeats = any(run.aggregate.n_repeats > 1 for run in analysis.runs)
    lines = [
        f"# {title}",
        "",
        markdown_table(*comparison_table(analysis.runs, analysis.human)),
        "",
        "Means with 95% percentile-bootstrap CIs over items"
        + (" (± std across repeats where a run has several)." if repeats else ".")
        + " Parse failures: share of calls whose final answer could not be parsed."
        + " Tokens and cost as recorded in each run's run.json."
        + (HUMAN_NOTE if analysis.human is not None else ""),
    ]
    expected = [run.label for run in analysis.runs if run.score == "expected"]
    if expected:
        lines.append(
            "Scores: each judge's expected score (probability-weighted over the admissible "
            f"score strings) for {', '.join(expected)}; greedy scores for the other runs."
        )

    def section(title: str, *body: str) -> None:
        lines.extend(["", f"## {title}", "", *body])

    groups = [(run.label, run.metrics_json()) for run in analysis.runs]
    protocols = protocol_markdown(groups)
    if protocols:
        lines += ["", *protocols[:-1]]
    if any(run.groups for run in analysis.runs):
        names = table_metrics(analysis.runs)
        header = metric_header(names, "run / group")
        section("Per group", markdown_table(header, group_rows(groups, names)))
    notes = endpoint_notes(analysis.runs)
    if notes:
        lines += ["", *notes]
    pivot = pivot_markdown(analysis.runs)
    if pivot:
        section("Model x prompt", pivot)
    tables = statistics_tables(analysis)
    if analysis.paired or analysis.notes:
        lines += ["", f"## {paired_title(analysis)}", ""]
    if (paired := tables["paired"]) is not None:
        lines += [markdown_table(*paired), "", paired_note(analysis)]
    if analysis.notes:
        lines += ["", *(f"- no baseline: {note}" for note in analysis.notes)]
    agreement = markdown_table(*agreement_table(analysis))
    section("Agreement (Kendall's tau-b, per item, averaged)", agreement)
    if (position := tables["position"]) is not None:
        section(
            "Position bias of joint prompts",
            markdown_table(*position),
            "",
            "Share of joint calls whose top score sat at each presentation position (ties "
            "split evenly), and where the human's first was shown; chi-square test of the "
            "model's rates against the uniform rate.",
        )
    return "\n".join(lines) + "\n"


def comparison_rich_table(
    title: str, runs: Sequence[RunData], human: Aggregate | None = None
) -> TerminalTable:
    # The run name carries provider, model, prompt and inputs; comparison.md has every column.
    skip = {"provider", "model", "prompt", "inputs", "tie rate", "calls", "tokens in/out"}
    header, rows = comparison_table(runs, human, compact=True)
    keep = [i for i, column in enumerate(header) if column not in skip]
    return TerminalTable(title, [header[i] for i in keep], [[row[i] for i in keep] for row in rows])
