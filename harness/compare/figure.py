"""The figure of a sequential comparison: the confidence sequence for mean(B - A) narrowing
over the items visited, with the running mean, 0 and the margin."""

from __future__ import annotations

from pathlib import Path

from harness.compare.result import Comparison


def plot_sequence(comparison: Comparison, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = comparison.path
    n = [s.n for s in steps]
    fig, ax = plt.subplots(figsize=(6.4, 3.6), dpi=120)
    if steps:
        ax.fill_between(
            n,
            [s.lo for s in steps],
            [s.hi for s in steps],
            step="post",
            alpha=0.3,
            label=f"{100 * (1 - comparison.alpha):g}% confidence sequence",
        )
        ax.step(n, [s.mean for s in steps], where="post", color="C0", label="running mean")
    ax.axhline(0.0, color="black", linewidth=0.8)
    if comparison.margin is not None:
        for sign in (-1, 1):
            ax.axhline(sign * comparison.margin, color="grey", linestyle="--", linewidth=0.8)
    a, b = comparison.labels
    ax.set_xlabel("items visited")
    ax.set_ylabel(f"{comparison.metric}: B - A")
    ax.set_title(f"B = {b} vs A = {a}: {comparison.decision}", fontsize=9)
    ax.set_xlim(0, max(comparison.n_items_total, 1))
    ax.legend(loc="upper right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path
