"""Report figures (matplotlib, Agg backend): metric bars with CI whiskers and the chance
level, the agreement heatmap, and position-bias bars; each as a PNG for the HTML page and
as PNG, PDF and SVG files at 300 dpi for a paper. Run labels are shortened to fit, never to
the same text."""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from harness.report.labels import shorten_unique
from harness.scoring.metrics import METRIC_NAMES, FloatArray, MetricSummary
from harness.scoring.stats import Agreement, PositionBias

FILE_FORMATS = ("png", "pdf", "svg")
FILE_DPI = 300
PAGE_DPI = 110
# No creation dates: the same runs give byte-identical figure files.
_NO_DATES = {"pdf": {"CreationDate": None}, "svg": {"Date": None}, "png": {}}


@dataclass(frozen=True)
class Figure:
    page_png: bytes  # for the HTML report
    files: dict[str, bytes]  # format -> bytes at FILE_DPI


METRIC_TITLES = {"hit@1": "Hit@1", "mrr": "MRR", "ndcg": "nDCG@N", "kendall_tau_b": "Kendall tau-b"}


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig: Any, fmt: str, dpi: int, bbox: Any) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format=fmt, dpi=dpi, bbox_inches=bbox, metadata=_NO_DATES[fmt])
    return buffer.getvalue()


def _render(fig: Any, files: bool) -> Figure:
    """The figure laid out and cropped once, then saved in every format (a layout engine
    and a tight crop would otherwise redo the layout on each save)."""
    try:
        fig.canvas.draw()
        bbox = fig.get_tightbbox(fig.canvas.get_renderer()).padded(0.1)
        fig.set_layout_engine("none")
        formats = FILE_FORMATS if files else ()
        return Figure(
            _save(fig, "png", PAGE_DPI, bbox),
            {fmt: _save(fig, fmt, FILE_DPI, bbox) for fmt in formats},
        )
    finally:
        _pyplot().close(fig)


def metric_bars(
    runs: Sequence[tuple[str, Mapping[str, MetricSummary]]],
    chance: Mapping[str, float] | None = None,
    *,
    files: bool = True,
) -> Figure:
    """One panel per metric, one horizontal bar per run, whiskers at the 95% CI, and a
    dashed line at the metric's chance level (a random ranking's expected value)."""
    plt = _pyplot()
    labels = shorten_unique([label for label, _ in runs], 40)
    height = 1.0 + 0.35 * len(runs)
    fig, axes = plt.subplots(
        1, len(METRIC_NAMES), figsize=(13, height), sharey=True, layout="constrained"
    )
    y = np.arange(len(runs))
    for ax, name in zip(axes, METRIC_NAMES, strict=True):
        means = np.array([_or_nan(m[name].mean) for _, m in runs])
        cis = [m[name].ci95 or (np.nan, np.nan) for _, m in runs]
        lows = np.array([low for low, _ in cis])
        highs = np.array([high for _, high in cis])
        whiskers = np.vstack([np.clip(means - lows, 0, None), np.clip(highs - means, 0, None)])
        ax.barh(y, means, xerr=whiskers, color="#4c78a8", ecolor="#333333", capsize=3)
        ax.set_title(METRIC_TITLES[name])
        ax.axvline(0, color="#999999", linewidth=0.8)
        if chance and name in chance:
            ax.axvline(chance[name], color="#c0392b", linestyle="--", linewidth=1, label="chance")
        ax.grid(axis="x", alpha=0.3)
    axes[0].set_yticks(y, labels)
    axes[0].invert_yaxis()
    if chance:
        axes[-1].legend(fontsize=7, loc="lower right")
    return _render(fig, files)


def _or_nan(value: float | None) -> float:
    return np.nan if value is None else value


def agreement_heatmap(agreement: Agreement, *, files: bool = True) -> Figure:
    """Mean per-item Kendall tau-b between every pair of rankers (human included)."""
    plt = _pyplot()
    k = len(agreement.labels)
    size = 2.0 + 0.55 * k
    fig, ax = plt.subplots(figsize=(size + 1.2, size))
    labels = shorten_unique(agreement.labels, 32)
    image = ax.imshow(np.ma.masked_invalid(agreement.tau), cmap="RdBu_r", vmin=-1, vmax=1)
    ax.set_xticks(range(k), labels, rotation=40, ha="right")
    ax.set_yticks(range(k), labels)
    for i in range(k):
        for j in range(k):
            value = agreement.tau[i, j]
            text = "n/a" if np.isnan(value) else f"{value:.2f}"
            dark = not np.isnan(value) and abs(value) > 0.6
            ax.text(
                j, i, text, ha="center", va="center", fontsize=8, color="white" if dark else "black"
            )
    fig.colorbar(image, ax=ax, label="Kendall tau-b (mean over items)")
    ax.set_title("Agreement between rankers")
    return _render(fig, files)


def position_bars(biases: Mapping[str, PositionBias], *, files: bool = True) -> Figure:
    """Top-1 rate per presentation position for each joint run, against the uniform rate."""
    plt = _pyplot()
    n = max(b.n_positions for b in biases.values())
    fig, ax = plt.subplots(figsize=(2.0 + 1.2 * n, 3.2), layout="constrained")
    width = 0.8 / len(biases)
    labels = shorten_unique(list(biases), 40)
    for index, (bias, label) in enumerate(zip(biases.values(), labels, strict=True)):
        rates: FloatArray = bias.rates
        x = np.arange(1, bias.n_positions + 1) + (index - (len(biases) - 1) / 2) * width
        ax.bar(x, rates, width=width, label=label)
        ax.hlines(bias.uniform, 0.5, bias.n_positions + 0.5, colors="#333333", linestyles="--")
    ax.set_xticks(range(1, n + 1))
    ax.set_xlabel("presentation position")
    ax.set_ylabel("top-1 rate")
    ax.set_title("Position bias (dashed: uniform)")
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.22), ncols=1)
    return _render(fig, files)
