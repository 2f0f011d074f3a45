"""Writing `harness report`'s files: comparison.md/.csv/.tex, pivot.tex/.csv, paired.csv,
agreement.csv, position_bias.csv, the figures (PNG and PDF) and report.html."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harness.core.sanitize import write_csv
from harness.reports import plots
from harness.reports.analysis import Analysis
from harness.reports.latex import comparison_tex, pivot_tex
from harness.reports.paired_tables import (
    agreement_csv_rows,
    paired_csv_rows,
    position_bias_csv_rows,
)
from harness.reports.pivot import pivot_csv_rows
from harness.reports.sensitivity import sensitivity_section
from harness.reports.tables import (
    comparison_csv_rows,
    comparison_markdown,
    human_csv_rows,
    run_marks,
)


def report_figures(analysis: Analysis, *, files: bool = True) -> dict[str, plots.Figure]:
    """The report's figures by name (metrics, agreement, position_bias for joint runs);
    `files=False` renders only the page PNGs (for `harness view`)."""
    metric_rows = [(run.label, run.aggregate.metrics) for run in analysis.runs]
    figures = {
        "metrics": plots.metric_bars(metric_rows, analysis.chance, files=files),
        "agreement": plots.agreement_heatmap(analysis.agreement, files=files),
    }
    if analysis.position_bias:
        figures["position_bias"] = plots.position_bars(analysis.position_bias, files=files)
    return figures


def write_report(
    analysis: Analysis,
    out: Path,
    *,
    title: str = "comparison",
    html: bool = True,
    embed_audio: bool = False,
    warnings: Sequence[str] = (),
) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    runs = analysis.runs
    figures = report_figures(analysis)
    files: dict[str, str | bytes | list[dict[str, Any]]] = {
        "comparison.md": "\n".join(
            [comparison_markdown(analysis, title)]
            + [line for section in sensitivity_section(runs) for line in section.markdown()]
        ),
        "comparison.csv": comparison_csv_rows(runs) + human_csv_rows(analysis.human),
        "comparison.tex": comparison_tex(runs, marks=[run_marks(run) for run in runs]),
        "agreement.csv": agreement_csv_rows(analysis),
    }
    pivot = pivot_tex(runs)
    if pivot is not None:
        files["pivot.tex"] = pivot
        files["pivot.csv"] = pivot_csv_rows(runs)
    if analysis.paired:
        files["paired.csv"] = paired_csv_rows(analysis)
    if analysis.position_bias:
        files["position_bias.csv"] = position_bias_csv_rows(analysis)
    for key, figure in figures.items():
        files |= {f"{key}.{fmt}": data for fmt, data in figure.files.items()}
    if html:
        from harness.reports.html import SIDECAR, render_html  # jinja2 is only needed here

        page, more = render_html(
            analysis,
            figures,
            out,
            title=title,
            embed_audio=embed_audio,
            warnings=warnings,
            sidecar=True,
        )
        files["report.html"] = page
        if more is not None:
            files[SIDECAR] = more
        else:
            (out / SIDECAR).unlink(missing_ok=True)  # an earlier report's
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
