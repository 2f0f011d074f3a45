"""Report figures as PNG bytes (matplotlib, Agg backend): metric bars with CI whiskers,
the agreement heatmap, and position-bias bars."""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from harness.metrics import METRIC_NAMES, FloatArray, MetricSummary
from harness.stats import Agreement, PositionBias

METRIC_TITLES = {"hit@1": "Hit@1", "mrr": "MRR", "ndcg": "nDCG@N", "kendall_tau_b": "Kendall tau-b"}


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def short(label: str, width: int = 40) -> str:
    """A label cut in the middle so that long run names still fit beside a plot."""
    if len(label) <= width:
        return label
    keep = (width - 1) // 2
    return label[:keep] + "…" + label[-keep:]


def _png(fig: Any) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110, bbox_inches="tight")
    _pyplot().close(fig)
    return buffer.getvalue()


def metric_bars(runs: Sequence[tuple[str, Mapping[str, MetricSummary]]]) -> bytes:
    """One panel per metric, one horizontal bar per run, whiskers at the 95% CI."""
    plt = _pyplot()
    labels = [short(label) for label, _ in runs]
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
        ax.grid(axis="x", alpha=0.3)
    axes[0].set_yticks(y, labels)
    axes[0].invert_yaxis()
    return _png(fig)


def _or_nan(value: float | None) -> float:
    return np.nan if value is None else value


def agreement_heatmap(agreement: Agreement) -> bytes:
    """Mean per-item Kendall tau-b between every pair of rankers (human included)."""
    plt = _pyplot()
    k = len(agreement.labels)
    size = 2.0 + 0.55 * k
    fig, ax = plt.subplots(figsize=(size + 1.2, size))
    labels = [short(label, 32) for label in agreement.labels]
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
    return _png(fig)


def position_bars(biases: Mapping[str, PositionBias]) -> bytes:
    """Top-1 rate per presentation position for each joint run, against the uniform rate."""
    plt = _pyplot()
    n = max(b.n_positions for b in biases.values())
    fig, ax = plt.subplots(figsize=(2.0 + 1.2 * n, 3.2), layout="constrained")
    width = 0.8 / len(biases)
    for index, (label, bias) in enumerate(biases.items()):
        rates: FloatArray = bias.rates
        x = np.arange(1, bias.n_positions + 1) + (index - (len(biases) - 1) / 2) * width
        ax.bar(x, rates, width=width, label=short(label))
        ax.hlines(bias.uniform, 0.5, bias.n_positions + 0.5, colors="#333333", linestyles="--")
    ax.set_xticks(range(1, n + 1))
    ax.set_xlabel("presentation position")
    ax.set_ylabel("top-1 rate")
    ax.set_title("Position bias (dashed: uniform)")
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.22), ncols=1)
    return _png(fig)
