"""Report figures (matplotlib, Agg backend), each drawn once as the page's PNG and saved as a
vector PDF for a paper. Figures grow with the number of runs up to a cap, their text shrinking
past it."""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from harness.reports.labels import shorten_unique
from harness.scoring import registry
from harness.scoring.metrics import FloatArray, MetricSummary
from harness.scoring.stats import Agreement, PositionBias

PAGE_DPI = 110  # 13 inches (the widest figure) make 1,430 px: the page is 1,400 px wide
MAX_HEIGHT = 12.0  # inches
# The heatmap writes its values in the cells up to this many rankers (beyond, they would not
# be legible; the report's agreement table has them all).
ANNOTATED = 12
MAX_HEATMAP = 7.5  # inches a side: with the colour bar, under 1,000 px


@dataclass(frozen=True)
class Figure:
    page_png: bytes  # for the HTML report
    files: dict[str, bytes]  # format -> bytes: "png" (the page's) and "pdf"


def _figure(**options: Any) -> Any:
    """A matplotlib Figure on its own Agg canvas (no pyplot: nothing to import for it, no
    figure registry to close); `options` as for Figure (figsize, layout)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(**options)
    FigureCanvasAgg(fig)
    return fig


def _png(fig: Any) -> bytes:
    """The figure as drawn on its Agg canvas (no second rendering), as PNG."""
    from PIL import Image

    canvas = fig.canvas
    width, height = canvas.get_width_height(physical=True)
    image = Image.frombuffer("RGBA", (width, height), canvas.buffer_rgba(), "raw", "RGBA", 0, 1)
    buffer = io.BytesIO()
    image.convert("RGB").save(buffer, format="PNG", dpi=(PAGE_DPI, PAGE_DPI))
    return buffer.getvalue()


def _render(fig: Any, files: bool) -> Figure:
    """The figure laid out and drawn once at PAGE_DPI (its PNG), then, with `files`, saved as
    a PDF with that layout (no creation date: the same runs give the same bytes)."""
    import matplotlib

    fig.set_dpi(PAGE_DPI)
    fig.canvas.draw()
    page = _png(fig)
    # No engine at all (not "none", a placeholder): with any engine, savefig draws the figure
    # a second time before drawing it; the layout just computed is kept either way.
    with matplotlib.rc_context(
        {"figure.autolayout": False, "figure.constrained_layout.use": False}
    ):
        fig.set_layout_engine(None)
    out = {"png": page}
    if files:
        buffer = io.BytesIO()
        fig.savefig(buffer, format="pdf", metadata={"CreationDate": None})
        out["pdf"] = buffer.getvalue()
    return Figure(page, out)


def metric_bars(
    runs: Sequence[tuple[str, Mapping[str, MetricSummary]]],
    chance: Mapping[str, float] | None = None,
    *,
    files: bool = True,
) -> Figure:
    """One panel per ranking metric, one horizontal bar per run, whiskers at the 95% CI,
    and a dashed line at the metric's chance level (a random ranking's expected value)."""
    names = registry.names("ranking")
    labels = shorten_unique([label for label, _ in runs], 40)
    height = min(1.0 + 0.35 * len(runs), MAX_HEIGHT)
    fig = _figure(figsize=(13, height), layout="constrained")
    axes = fig.subplots(1, len(names), squeeze=False)[0]
    font = min(10.0, 10.0 * (MAX_HEIGHT - 1.0) / (0.35 * len(runs)))  # the labels' size
    y = np.arange(len(runs))
    for ax, name in zip(axes, names, strict=True):
        summaries = [m.get(name) for _, m in runs]
        means = np.array([_or_nan(s.mean if s else None) for s in summaries])
        cis = [(s.ci95 if s else None) or (np.nan, np.nan) for s in summaries]
        lows = np.array([low for low, _ in cis])
        highs = np.array([high for _, high in cis])
        whiskers = np.vstack([np.clip(means - lows, 0, None), np.clip(highs - means, 0, None)])
        ax.barh(y, means, xerr=whiskers, color="#4c78a8", ecolor="#333333", capsize=3)
        ax.set_title(registry.label(name))
        ax.axvline(0, color="#999999", linewidth=0.8)
        if chance and name in chance:
            ax.axvline(chance[name], color="#c0392b", linestyle="--", linewidth=1, label="chance")
        ax.grid(axis="x", alpha=0.3)
    axes[0].set_yticks(y, labels, fontsize=font)
    for ax in axes:  # the same rows in every panel; only the first names them
        ax.set_ylim(len(runs) - 0.5, -0.5)
    for ax in axes[1:]:
        ax.set_yticks([])
    if chance:
        axes[-1].legend(fontsize=7, loc="lower right")
    return _render(fig, files)


def _or_nan(value: float | None) -> float:
    return np.nan if value is None else value


def agreement_heatmap(agreement: Agreement, *, files: bool = True) -> Figure:
    """Mean per-item Kendall tau-b between every pair of rankers (human included), the
    values in the cells up to ANNOTATED rankers."""
    k = len(agreement.labels)
    size = min(2.0 + 0.55 * k, MAX_HEATMAP)
    scale = min(1.0, (MAX_HEATMAP - 2.0) / (0.55 * k))  # text shrinks once the size is capped
    fig = _figure(figsize=(size + 1.2, size), layout="constrained")
    ax = fig.subplots()
    labels = shorten_unique(agreement.labels, 32)
    image = ax.imshow(np.ma.masked_invalid(agreement.tau), cmap="RdBu_r", vmin=-1, vmax=1)
    ax.set_xticks(range(k), labels, rotation=40, ha="right", fontsize=10 * scale)
    ax.set_yticks(range(k), labels, fontsize=10 * scale)
    if k <= ANNOTATED:
        for i in range(k):
            for j in range(k):
                value = agreement.tau[i, j]
                text = "n/a" if np.isnan(value) else f"{value:.2f}"
                dark = not np.isnan(value) and abs(value) > 0.6
                color = "white" if dark else "black"
                ax.text(j, i, text, ha="center", va="center", fontsize=8 * scale, color=color)
    fig.colorbar(image, ax=ax, label="Kendall tau-b (mean over items)")
    ax.set_title("Agreement between rankers")
    return _render(fig, files)


def position_bars(biases: Mapping[str, PositionBias], *, files: bool = True) -> Figure:
    """Top-1 rate per presentation position for each joint run, against the uniform rate."""
    n = max(b.n_positions for b in biases.values())
    height = min(3.2 + 0.15 * len(biases), MAX_HEIGHT)
    fig = _figure(figsize=(min(2.0 + 1.2 * n, 13.0), height), layout="constrained")
    ax = fig.subplots()
    width = 0.8 / len(biases)
    labels = shorten_unique(list(biases), 40)
    for index, (bias, label) in enumerate(zip(biases.values(), labels, strict=True)):
        rates: FloatArray = bias.rates
        x = np.arange(1, bias.n_positions + 1) + (index - (len(biases) - 1) / 2) * width
        ax.bar(x, rates, width=width, label=label)
        ax.hlines(bias.uniform, 0.5, bias.n_positions + 0.5, colors="#333333", linestyles="--")
    ax.set_xticks(range(1, n + 1) if n <= 30 else np.linspace(1, n, 11).round())
    ax.set_xlabel("presentation position")
    ax.set_ylabel("top-1 rate")
    ax.set_title("Position bias (dashed: uniform)")
    fig.legend(fontsize=7, loc="outside lower center", ncols=1)
    return _render(fig, files)
