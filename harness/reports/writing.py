"""Writing `harness report`'s files: comparison.md/.csv/.tex, pivot.tex/.csv (several
prompts), paired.csv, agreement.csv, position_bias.csv, the figures (metrics, agreement,
position bias) as the page's PNG and a vector PDF, and report.html (with
report-candidates.js when items have more candidates than the page draws)."""

from __future__ import annotations

import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from harness.core.sanitize import write_csv
from harness.reports import plots
from harness.reports.analysis import Analysis
from harness.reports.latex import comparison_tex, pivot_tex
from harness.reports.media import data_uri
from harness.reports.pivot import pivot_csv_rows
from harness.reports.tables import (
    agreement_csv_rows,
    comparison_csv_rows,
    comparison_markdown,
    human_csv_rows,
    paired_csv_rows,
    position_bias_csv_rows,
    run_marks,
)
from harness.scoring.metrics import MetricSummary
from harness.scoring.stats import Agreement, PositionBias


@dataclass(frozen=True)
class FigureInputs:
    """What the report's figures are drawn from (small, and picklable for `FigureWorker`)."""

    metric_rows: list[tuple[str, Mapping[str, MetricSummary]]]
    chance: Mapping[str, float]
    agreement: Agreement
    position_bias: Mapping[str, PositionBias]

    @property
    def names(self) -> list[str]:
        return ["metrics", "agreement", *(["position_bias"] if self.position_bias else [])]


def figure_inputs(analysis: Analysis) -> FigureInputs:
    return FigureInputs(
        [(run.label, run.aggregate.metrics) for run in analysis.runs],
        analysis.chance,
        analysis.agreement,
        analysis.position_bias,
    )


def draw_figures(
    inputs: FigureInputs, *, files: bool = True, names: Sequence[str] | None = None
) -> dict[str, plots.Figure]:
    """The report's figures by name (metrics, agreement, position_bias for joint runs), or
    only those of `names`; `files=False` renders only the page PNGs (for `harness view`)."""
    draw = {
        "metrics": lambda: plots.metric_bars(inputs.metric_rows, inputs.chance, files=files),
        "agreement": lambda: plots.agreement_heatmap(inputs.agreement, files=files),
        "position_bias": lambda: plots.position_bars(inputs.position_bias, files=files),
    }
    return {name: draw[name]() for name in (inputs.names if names is None else names)}


def report_figures(analysis: Analysis, *, files: bool = True) -> dict[str, plots.Figure]:
    return draw_figures(figure_inputs(analysis), files=files)


class FigureSource(Protocol):
    """Draws the figures while the caller writes the rest (`FigureWorker`), or not."""

    def draw(self, inputs: FigureInputs) -> None: ...

    def figures(self, inputs: FigureInputs) -> dict[str, plots.Figure]: ...


def write_report(
    analysis: Analysis,
    out: Path,
    *,
    title: str = "comparison",
    html: bool = True,
    embed_audio: bool = False,
    warnings: Sequence[str] = (),
    drawer: FigureSource | None = None,
) -> list[Path]:
    """Write the report's files into `out` (see the module's docstring); returns their paths.
    With a `drawer` (`harness.reports.figure_worker.FigureWorker`), the figures are drawn by
    another process while this one writes the page, which takes them last."""
    out.mkdir(parents=True, exist_ok=True)
    runs = analysis.runs
    inputs = figure_inputs(analysis)
    if drawer is not None:
        drawer.draw(inputs)
    files: dict[str, str | bytes | list[dict[str, Any]]] = {
        "comparison.md": comparison_markdown(analysis, title),
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
    page, more = None, None
    if html:
        from harness.reports.html import SIDECAR, render_html  # jinja2 is only needed here

        # the page is written before its figures are drawn; each goes where its marker is
        token = secrets.token_hex(8)
        markers = {name: f"bgm-judge-figure-{name}-{token}" for name in inputs.names}
        page, more = render_html(
            analysis,
            markers,
            out,
            title=title,
            embed_audio=embed_audio,
            warnings=warnings,
            sidecar=True,
        )
    figures = drawer.figures(inputs) if drawer is not None else draw_figures(inputs)
    for key, figure in figures.items():
        files |= {f"{key}.{fmt}": data for fmt, data in figure.files.items()}
    if page is not None:
        for name, marker in markers.items():
            page = page.replace(marker, data_uri(figures[name].page_png, "image/png"))
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
