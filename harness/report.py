"""Readable summaries of metrics: a markdown report per run, and `harness report`'s
comparison across finished runs (tables, paired statistics, agreement, position bias)."""

from __future__ import annotations

import csv
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from rich.table import Table

from harness.dataset import Dataset, load_dataset
from harness.errors import HarnessError
from harness.metrics import (
    METRIC_NAMES,
    Aggregate,
    FloatArray,
    ScoreMatrix,
    aggregate,
    build_matrix,
)
from harness.records import Record, predictions_from_records, read_records
from harness.stats import (
    Agreement,
    PairedDifference,
    PositionBias,
    agreement_matrix,
    paired_metrics,
    position_bias,
)

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
        if column == "run":
            table.add_column(column, overflow="fold", min_width=24)
        else:
            table.add_column(column, justify="right", no_wrap=True)
    for row in metric_rows(runs):
        # The CI goes under the mean so that run names keep their room.
        table.add_row(*(cell.replace(" [", "\n[") for cell in row))
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
    summaries = cost_line(stats.get("summaries_cost"))
    if summaries:
        lines.append("Summaries: " + summaries[0].lower() + summaries[1:])
    path.write_text("\n".join(lines) + "\n")


def write_comparison(path: Path, title: str, runs: Sequence[tuple[str, Mapping[str, Any]]]) -> None:
    body = [f"# {title}", "", markdown_table(HEADER, metric_rows(runs)), ""]
    path.write_text("\n".join(body))


# ---------------------------------------------------------------------------------------
# `harness report`: comparisons across finished runs, recomputed from their records.


@dataclass
class RunData:
    """A finished run folder, with its metrics recomputed from records.jsonl by the metric
    layer (so per-item values are available for paired statistics)."""

    path: Path
    label: str
    config: dict[str, Any]
    stats: dict[str, Any]
    records: list[Record]
    dataset: Dataset
    aggregate: Aggregate
    scores: dict[str, FloatArray]  # item id -> mean score over repeats, candidate order

    @property
    def provider(self) -> dict[str, Any]:
        provider: dict[str, Any] = self.config.get("provider") or {}
        return provider

    @property
    def prompt(self) -> str:
        """The prompt variant; "n/a" for scorers, which take no prompt."""
        from providers import REGISTRY

        entry = REGISTRY.get(str(self.provider.get("name")))
        return "n/a" if entry and entry.kind == "scorer" else str(self.config.get("prompt", "?"))

    @property
    def inputs(self) -> str:
        inputs = self.config.get("inputs") or {}
        return f"{inputs.get('dialogue', 'full')}/{inputs.get('music', 'audio')}"

    @property
    def parse_failures(self) -> int:
        return sum(r.parse_error is not None for r in self.records)

    @property
    def parse_failure_rate(self) -> float | None:
        return self.parse_failures / len(self.records) if self.records else None

    def per_item(self) -> dict[str, dict[str, float]]:
        """metric -> {item id: value (mean over repeats)}, as the metric layer computes it."""
        agg = self.aggregate
        return {
            name: dict(zip(agg.item_ids, map(float, values), strict=True))
            for name, values in agg.per_item.items()
        }


def _read_json(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise HarnessError(f"{path}: not valid JSON ({exc.msg})") from None
    return value if isinstance(value, dict) else {}


def _mean_scores(matrices: Sequence[ScoreMatrix]) -> dict[str, FloatArray]:
    """Per item, the mean of each candidate's usable scores over repeats (NaN if none)."""
    out: dict[str, FloatArray] = {}
    for i, item_id in enumerate(matrices[0].item_ids):
        stacked = np.stack([m.scores[i] for m in matrices])
        usable = np.isfinite(stacked)
        total = np.where(usable, stacked, 0.0).sum(axis=0)
        count = usable.sum(axis=0)
        out[item_id] = np.divide(total, count, out=np.full(total.shape, np.nan), where=count > 0)
    return out


def load_run(
    path: Path, *, dataset: Path | None = None, datasets: dict[Path, Dataset] | None = None
) -> RunData:
    """Read a run folder and recompute its aggregate from records.jsonl.

    `dataset` overrides the dataset folder named in the run's config.yaml; `datasets` is a
    cache shared across runs of the same dataset.
    """
    config_path = path / "config.yaml"
    if not config_path.is_file():
        raise HarnessError(f"{path}: no config.yaml (is this a finished run folder?)")
    config = yaml.safe_load(config_path.read_text(encoding="utf-8")) or {}
    records_path = path / "records.jsonl"
    if not records_path.is_file():
        raise HarnessError(f"{path}: no records.jsonl")
    records = list(read_records(records_path))
    root = Path(dataset or config.get("dataset", ""))
    if not root.is_dir():
        raise HarnessError(
            f"{path}: dataset folder {str(root)!r} of this run not found; run from the folder "
            "the run was made in, or pass --dataset DIR"
        )
    cache = datasets if datasets is not None else {}
    key = root.resolve()
    if key not in cache:
        cache[key] = load_dataset(root, check_audio=False)
    data = cache[key]
    if config.get("limit"):
        data = data.subset([item.id for item in data.items[: int(config["limit"])]])
    predictions = predictions_from_records(records)
    repeats = int(config.get("repeats") or 1)
    matrices = [build_matrix(data.items, predictions.get(r, {})) for r in range(repeats)]
    result = aggregate(
        matrices,
        missing=config.get("missing", "worst"),
        n_bootstrap=int(config.get("n_bootstrap") or 1000),
        seed=int(config.get("seed") or 0),
    )
    return RunData(
        path=path,
        label=str(config.get("name") or path.name),
        config=config,
        stats=_read_json(path / "run.json"),
        records=records,
        dataset=data,
        aggregate=result,
        scores=_mean_scores(matrices),
    )


def load_runs(paths: Sequence[Path], *, dataset: Path | None = None) -> list[RunData]:
    datasets: dict[Path, Dataset] = {}
    runs = [load_run(path, dataset=dataset, datasets=datasets) for path in paths]
    labels = [run.label for run in runs]
    for run in runs:  # two runs of the same name (different sweeps): label by folder
        if labels.count(run.label) > 1:
            run.label = str(run.path)
    return runs


def estimated_cost(stats: Mapping[str, Any]) -> float | None:
    """Estimated cost in USD of all the run's answers, generated summaries included (run.json
    `cost.usd` and `summaries_cost.usd`, written by harness.pricing.run_cost); None when the
    run has no price for its model."""
    total = None
    for block in ("cost", "summaries_cost"):
        cost = stats.get(block)
        usd = cost.get("usd") if isinstance(cost, dict) else None
        if isinstance(usd, int | float) and not isinstance(usd, bool):
            total = (total or 0.0) + float(usd)
    return total


def _tokens(stats: Mapping[str, Any]) -> str:
    if "input_tokens" not in stats and "output_tokens" not in stats:
        return "n/a"
    return f"{stats.get('input_tokens', 0)}/{stats.get('output_tokens', 0)}"


COMPARISON_HEADER = [
    "run",
    "provider",
    "model",
    "prompt",
    "inputs",
    *(METRIC_LABELS[m] for m in METRIC_NAMES),
    "items",
    "coverage",
    "tie rate",
    "parse failures",
    "calls",
    "tokens in/out",
    "est. cost",
]


def comparison_rows(runs: Sequence[RunData]) -> list[list[str]]:
    rows = []
    for run in runs:
        metrics = run.aggregate.to_json()
        summaries: dict[str, Any] = metrics["metrics"]  # type: ignore[assignment]
        cost = estimated_cost(run.stats)
        rows.append(
            [
                run.label,
                str(run.provider.get("name", "?")),
                str(run.provider.get("model") or "default"),
                run.prompt,
                run.inputs,
                *(format_metric(summaries.get(m)) for m in METRIC_NAMES),
                str(run.aggregate.n_items),
                _percent(run.aggregate.coverage),
                _percent(run.aggregate.tie_rate),
                _percent(run.parse_failure_rate),
                str(run.stats.get("calls", len(run.records))),
                _tokens(run.stats),
                "n/a" if cost is None else f"${cost:.4f}",
            ]
        )
    return rows


def comparison_csv_rows(runs: Sequence[RunData]) -> list[dict[str, Any]]:
    """The comparison table with plain numbers (for pandas, spreadsheets)."""
    out = []
    for run in runs:
        row: dict[str, Any] = {
            "run": run.label,
            "path": str(run.path),
            "provider": run.provider.get("name"),
            "model": run.provider.get("model"),
            "prompt": run.prompt,
            "dialogue": (run.config.get("inputs") or {}).get("dialogue"),
            "music": (run.config.get("inputs") or {}).get("music"),
            "repeats": run.aggregate.n_repeats,
            "n_items": run.aggregate.n_items,
        }
        for name in METRIC_NAMES:
            summary = run.aggregate.metrics[name]
            low, high = summary.ci95 or (None, None)
            row |= {
                f"{name}_mean": summary.mean,
                f"{name}_ci_low": low,
                f"{name}_ci_high": high,
                f"{name}_std": summary.std,
            }
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
        }
        out.append(row)
    return out


def write_csv(path: Path, rows: Sequence[Mapping[str, Any]]) -> None:
    if not rows:
        return
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


# ------------------------------------------------------------------------ analysis
HUMAN = "human"


@dataclass
class Analysis:
    runs: list[RunData]
    baseline: RunData | None
    paired: dict[str, dict[str, PairedDifference]]  # run label -> metric -> difference
    agreement: Agreement
    position_bias: dict[str, PositionBias]  # run label -> bias, joint runs only


def human_vectors(runs: Sequence[RunData]) -> dict[str, FloatArray]:
    """The human ranking as scores (relevance, N-1 .. 0) for every item of the runs."""
    out: dict[str, FloatArray] = {}
    for run in runs:
        for item in run.dataset.items:
            if item.id not in out and item.human_ranking:
                rel = item.relevance
                out[item.id] = np.array([rel[c] for c in item.candidates], dtype=np.float64)
    return out


def analyse(
    runs: Sequence[RunData],
    baseline: RunData | None = None,
    *,
    n_bootstrap: int = 1000,
    n_permutations: int = 10000,
    seed: int = 0,
) -> Analysis:
    paired = {}
    if baseline is not None:
        base = baseline.per_item()
        for run in runs:
            if run is not baseline:
                paired[run.label] = paired_metrics(
                    run.per_item(),
                    base,
                    n_bootstrap=n_bootstrap,
                    n_permutations=n_permutations,
                    seed=seed,
                )
    vectors = [(HUMAN, human_vectors(runs)), *((run.label, run.scores) for run in runs)]
    bias = {
        run.label: b
        for run in runs
        if (b := position_bias(run.records, run.dataset.items)) is not None
    }
    return Analysis(list(runs), baseline, paired, agreement_matrix(vectors), bias)


PAIRED_HEADER = ["run", "metric", "items", "run mean", "baseline mean", "difference", "95% CI", "p"]


def _p_text(diff: PairedDifference) -> str:
    return f"{diff.p_value:.4f}" + ("" if diff.exact else " (MC)")


def paired_rows(analysis: Analysis) -> list[list[str]]:
    rows = []
    for label, metrics in analysis.paired.items():
        for name, diff in metrics.items():
            empty = diff.n_items == 0
            rows.append(
                [
                    label,
                    METRIC_LABELS[name],
                    str(diff.n_items),
                    "n/a" if empty else f"{diff.run_mean:.3f}",
                    "n/a" if empty else f"{diff.baseline_mean:.3f}",
                    "n/a" if empty else f"{diff.difference:+.3f}",
                    "n/a" if empty else f"[{diff.ci95[0]:+.3f}, {diff.ci95[1]:+.3f}]",
                    _p_text(diff),
                ]
            )
    return rows


def paired_csv_rows(analysis: Analysis) -> list[dict[str, Any]]:
    assert analysis.baseline is not None or not analysis.paired
    base = analysis.baseline.label if analysis.baseline else None
    return [
        {"run": label, "baseline": base, "metric": name, **diff.to_json()}
        for label, metrics in analysis.paired.items()
        for name, diff in metrics.items()
    ]


def agreement_rows(analysis: Analysis) -> list[list[str]]:
    agreement = analysis.agreement
    return [
        [label, *("n/a" if np.isnan(v) else f"{v:.3f}" for v in agreement.tau[i])]
        for i, label in enumerate(agreement.labels)
    ]


def agreement_csv_rows(analysis: Analysis) -> list[dict[str, Any]]:
    agreement = analysis.agreement
    return [
        {
            "": label,
            **{
                other: None if np.isnan(v) else round(float(v), 6)
                for other, v in zip(agreement.labels, agreement.tau[i], strict=True)
            },
        }
        for i, label in enumerate(agreement.labels)
    ]


def position_bias_rows(analysis: Analysis) -> list[list[str]]:
    rows = []
    for label, bias in analysis.position_bias.items():
        rows.append(
            [
                label,
                str(bias.n_calls),
                " / ".join(f"{100 * r:.1f}%" for r in bias.rates),
                " / ".join(f"{100 * r:.1f}%" for r in bias.human_rates),
                f"{100 * bias.uniform:.1f}%",
                f"{bias.p_value:.4f}",
            ]
        )
    return rows


POSITION_HEADER = [
    "run",
    "joint calls",
    "model top-1 by position",
    "human first by position",
    "uniform",
    "chi-square p",
]


def position_bias_csv_rows(analysis: Analysis) -> list[dict[str, Any]]:
    return [
        {
            "run": label,
            "position": position + 1,
            "top1_rate": round(float(rate), 6),
            "human_top1_rate": round(float(human), 6),
            "uniform": round(bias.uniform, 6),
            "n_calls": bias.n_calls,
            "p_value": round(bias.p_value, 6),
        }
        for label, bias in analysis.position_bias.items()
        for position, (rate, human) in enumerate(zip(bias.rates, bias.human_rates, strict=True))
    ]


def comparison_markdown(analysis: Analysis, title: str = "comparison") -> str:
    repeats = any(run.aggregate.n_repeats > 1 for run in analysis.runs)
    lines = [
        f"# {title}",
        "",
        markdown_table(COMPARISON_HEADER, comparison_rows(analysis.runs)),
        "",
        "Means with 95% percentile-bootstrap CIs over items"
        + (" (± std across repeats where a run has several)." if repeats else ".")
        + " Parse failures: share of calls whose final answer could not be parsed."
        + " Tokens and cost as recorded in each run's run.json.",
    ]
    if analysis.baseline is not None:
        lines += [
            "",
            f"## Paired comparison against `{analysis.baseline.label}`",
            "",
            markdown_table(PAIRED_HEADER, paired_rows(analysis)),
            "",
            "Difference = run - baseline on the items both runs scored; 95% paired-bootstrap "
            "CI; two-sided sign-flip permutation p (exact, or Monte Carlo where marked MC).",
        ]
    agreement = analysis.agreement
    lines += [
        "",
        "## Agreement (Kendall's tau-b, per item, averaged)",
        "",
        markdown_table(["", *agreement.labels], agreement_rows(analysis)),
    ]
    if analysis.position_bias:
        lines += [
            "",
            "## Position bias of joint prompts",
            "",
            markdown_table(POSITION_HEADER, position_bias_rows(analysis)),
            "",
            "Share of joint calls whose top score sat at each presentation position (ties "
            "split evenly), and where the human's first was shown; chi-square test of the "
            "model's rates against the uniform rate.",
        ]
    return "\n".join(lines) + "\n"


def write_report(
    analysis: Analysis,
    out: Path,
    *,
    title: str = "comparison",
    html: bool = True,
    embed_audio: bool = False,
) -> list[Path]:
    """Write comparison.md/.csv, paired.csv (with a baseline), agreement.csv/.png,
    position_bias.csv/.png (joint runs), metrics.png and report.html into `out`."""
    from harness import plots

    out.mkdir(parents=True, exist_ok=True)
    files: dict[str, str | bytes | list[dict[str, Any]]] = {
        "comparison.md": comparison_markdown(analysis, title),
        "comparison.csv": comparison_csv_rows(analysis.runs),
        "agreement.csv": agreement_csv_rows(analysis),
    }
    if analysis.baseline is not None:
        files["paired.csv"] = paired_csv_rows(analysis)
    figures = {
        "metrics": plots.metric_bars([(run.label, run.aggregate.metrics) for run in analysis.runs]),
        "agreement": plots.agreement_heatmap(analysis.agreement),
    }
    if analysis.position_bias:
        files["position_bias.csv"] = position_bias_csv_rows(analysis)
        figures["position"] = plots.position_bars(analysis.position_bias)
    names = {
        "metrics": "metrics.png",
        "agreement": "agreement.png",
        "position": "position_bias.png",
    }
    files |= {names[key]: png for key, png in figures.items()}
    if html:
        from harness.html_report import render_html

        files["report.html"] = render_html(
            analysis, figures, out, title=title, embed_audio=embed_audio
        )
    written = []
    for name, content in files.items():
        path = out / name
        if isinstance(content, bytes):
            path.write_bytes(content)
        elif isinstance(content, str):
            path.write_text(content, encoding="utf-8")
        else:
            write_csv(path, content)
        written.append(path)
    return written


def comparison_rich_table(title: str, runs: Sequence[RunData]) -> Table:
    table = Table(title=title, title_justify="left")
    # The run name carries provider, model, prompt and inputs; comparison.md has every column.
    skip = {"provider", "model", "prompt", "inputs", "tie rate", "calls", "tokens in/out"}
    keep = [i for i, column in enumerate(COMPARISON_HEADER) if column not in skip]
    for i in keep:
        first = i == 0
        table.add_column(
            COMPARISON_HEADER[i],
            justify="left" if first else "right",
            no_wrap=not first,
            overflow="fold" if first else "ellipsis",
            min_width=24 if first else None,
        )
    for row in comparison_rows(runs):
        # The CI goes under the mean so that run names keep their room.
        table.add_row(*(row[i].replace(" [", "\n[") for i in keep))
    return table


def paired_rich_table(analysis: Analysis) -> Table:
    assert analysis.baseline is not None
    table = Table(
        title=f"paired comparison against {analysis.baseline.label}", title_justify="left"
    )
    for column in PAIRED_HEADER:
        table.add_column(column, justify="left" if column in ("run", "metric") else "right")
    for row in paired_rows(analysis):
        table.add_row(*row)
    return table
