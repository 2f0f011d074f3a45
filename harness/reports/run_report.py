"""A run's own `report.md`, and a sweep's `comparison.md` of the runs just made."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from harness.calls.pricing import cost_line
from harness.config.protocols import get_protocol, resolve
from harness.core.provenance import drifted_packages, unofficial_endpoints
from harness.core.secrets import scrub
from harness.reports.formatting import (
    group_rows,
    markdown_table,
    metric_header,
    metric_rows,
    shown_metrics,
)
from harness.reports.protocol_tables import protocol_markdown
from harness.scoring.evaluation import no_scores_reason
from harness.scoring.human_ceiling import HUMAN_ROW

UNOFFICIAL_NOTE = (
    "not the provider's official service: the answers came from whatever serves that URL "
    "(a local stand-in, a proxy), and the cost is estimated at the official prices"
)


def write_run_report(
    path: Path,
    config: Any,
    metrics: Mapping[str, Any],
    stats: Mapping[str, Any],
    *,
    human: Mapping[str, Any] | None = None,
) -> None:
    provider = config.provider
    prompt = f"`{config.prompt}`" if config.kind == "judge" else "none (a scorer)"
    lines = [
        f"# {config.name}",
        "",
        f"- provider: `{provider.name}`, model `{provider.model or 'default'}`",
        f"- prompt: {prompt}; inputs: dialogue `{config.inputs.dialogue}`, music `{config.inputs.music}`"
        + (", the item's context audio" if config.inputs.context_audio else ""),
        f"- dataset: `{config.dataset}`; repeats: {config.repeats}; missing scores: `{metrics['missing_policy']}`",
        *(f"- endpoint {mark}: **{UNOFFICIAL_NOTE}**" for mark in unofficial_endpoints(stats)),
        *(
            [f"- environment: **differs from the lock**: {'; '.join(drift)}"]
            if (drift := drifted_packages(stats))
            else []
        ),
    ]
    if config.protocol != "rank":
        plan = resolve(get_protocol(config.protocol).plans[config.kind])
        settings = plan.settings(config)
        lines.append(f"- protocol: `{config.protocol}`" + (f" ({settings})" if settings else ""))
    lines.append("")
    failed = no_scores_reason(metrics, stats)
    if failed is not None:
        lines += [f"**No metrics: {failed}.** Chance-level numbers are not reported.", ""]
    else:
        names = shown_metrics([metrics])
        lines += [
            markdown_table(
                metric_header(names),
                metric_rows(_rows(config.name, metrics) + human_rows(human), names),
            ),
            "",
            "Means with 95% percentile-bootstrap CIs over items"
            + (" (± std across repeats)." if config.repeats > 1 else ".")
            + _without_relevant(metrics)
            + (HUMAN_NOTE if human is not None else ""),
            "",
            *_group_section([(config.name, metrics)], "group"),
            *protocol_markdown([(config.name, metrics)]),
        ]
    lines += [
        f"Calls: {stats['calls']} ({stats['cache_hits']} from cache, {stats['model_calls']} to the model, "
        f"{stats['retries']} retries); failed: {stats['errors']}; unparsable answers: "
        f"{stats['parse_failures']}; tokens in/out: {stats['input_tokens']}/{stats['output_tokens']}.",
    ]
    if stats.get("error_kinds"):
        kinds = ", ".join(f"{k}: {n}" for k, n in sorted(stats["error_kinds"].items()))
        lines.append(f"Failures by kind: {kinds}.")
    cost = cost_line(stats.get("cost"))
    if cost:
        lines.append(cost)
    summaries = cost_line(stats.get("summaries_cost"))
    if summaries:
        lines.append("Summaries: " + summaries[0].lower() + summaries[1:])
    path.write_text(scrub("\n".join(lines) + "\n"))  # a model name or a URL may hold a key


def _rows(name: str, metrics: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    """The run's row, and its expected-score row when the judge gave expected scores."""
    rows: list[tuple[str, Mapping[str, Any]]] = [(name, metrics)]
    if isinstance(metrics.get("expected_score"), Mapping):
        rows.append((f"{name} (expected score)", metrics["expected_score"]))
    return rows


HUMAN_NOTE = (
    f" `{HUMAN_ROW}`: each annotator's ranking against the consensus of the other annotators,"
    " on the same metrics (± std across annotators): the agreement a model would need to match"
    " the humans."
)


def human_rows(human: Mapping[str, Any] | None) -> list[tuple[str, Mapping[str, Any]]]:
    """The human-ceiling row, where the items carry annotations (coverage does not apply)."""
    if human is None:
        return []
    return [(HUMAN_ROW, {**human, "coverage": None})]


def _without_relevant(metrics: Mapping[str, Any]) -> str:
    n = metrics.get("n_items_without_relevant") or 0
    return f" {n} item(s) without any relevant candidate count as 0 on every metric." if n else ""


def _group_section(runs: Sequence[tuple[str, Mapping[str, Any]]], first: str) -> list[str]:
    """`## Per group` with one row per group (per run and group in a comparison)."""
    rows = group_rows(runs)
    if not rows:
        return []
    names = shown_metrics(m for _, m in runs)
    return ["## Per group", "", markdown_table(metric_header(names, first), rows), ""]


def write_comparison(
    path: Path,
    title: str,
    runs: Sequence[tuple[str, Mapping[str, Any]]],
    human: Mapping[str, Any] | None = None,
    *,
    failed: Sequence[tuple[str, str]] = (),
) -> None:
    """The sweep's table; `failed` lists (run, why) for runs without a usable score, which
    get a line instead of a row of chance-level numbers."""
    names = shown_metrics(m for _, m in runs)
    body = [f"# {title}", ""]
    if runs:
        rows = metric_rows([*runs, *human_rows(human)], names)
        body += [markdown_table(metric_header(names), rows), ""]
        if human is not None:
            body += [HUMAN_NOTE.strip(), ""]
    if any(name.endswith(" †") for name, _ in runs):
        body += ["† endpoint is not the provider's official service (see the run's report.md).", ""]
    body += [f"- `{name}`: no metrics, {reason}." for name, reason in failed]
    if failed:
        body.append("")
    body += _group_section(runs, "run / group")
    body += protocol_markdown(runs)
    path.write_text(scrub("\n".join(body)))
