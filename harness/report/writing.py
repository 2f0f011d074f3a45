"""Writing `harness report`'s files: comparison.md/.csv, paired.csv, agreement.csv/.png,
position_bias.csv/.png, metrics.png and report.html."""

from __future__ import annotations

import csv
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from harness.report import plots
from harness.report.analysis import Analysis
from harness.report.tables import (
    agreement_csv_rows,
    comparison_csv_rows,
    comparison_markdown,
    human_csv_rows,
    paired_csv_rows,
    position_bias_csv_rows,
)


def write_csv(path: Path, rows: Sequence[Mapping[str, Any]]) -> None:
    if not rows:
        return
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


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
    out.mkdir(parents=True, exist_ok=True)
    files: dict[str, str | bytes | list[dict[str, Any]]] = {
        "comparison.md": comparison_markdown(analysis, title),
        "comparison.csv": comparison_csv_rows(analysis.runs) + human_csv_rows(analysis.human),
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
        from harness.report.html import render_html  # jinja2 is only needed here

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
