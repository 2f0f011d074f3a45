"""The figure of a sequential comparison: the confidence sequence for mean(B - A) narrowing
over the items visited, with the running mean, 0 and the margin."""

from __future__ import annotations

from pathlib import Path

from harness.runs.compare.result import Comparison


def plot_sequence(comparison: Comparison, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = comparison.path
    # the interval reached after n items is drawn over the batch that ended at n
    n = [0, *(s.n for s in steps)]
    fig, ax = plt.subplots(figsize=(6.4, 3.6), dpi=120)
    if steps:
        first = steps[0]
        ax.fill_between(
            n,
            [first.lo, *(s.lo for s in steps)],
            [first.hi, *(s.hi for s in steps)],
            step="pre",
            alpha=0.3,
            label=f"{100 * (1 - comparison.alpha):g}% confidence sequence",
        )
        means = [first.mean, *(s.mean for s in steps)]
        ax.step(n, means, where="pre", color="C0", label="running mean")
        ax.axvline(steps[-1].n, color="C0", linestyle=":", linewidth=0.8)
    ax.axhline(0.0, color="black", linewidth=0.8)
    if comparison.margin is not None:
        for sign in (-1, 1):
            ax.axhline(sign * comparison.margin, color="grey", linestyle="--", linewidth=0.8)
    a, b = comparison.labels
    ax.set_xlabel("items visited")
    ax.set_ylabel(f"{comparison.metric}: B - A")
    names = "" if (a, b) == ("A", "B") else f"B = {b} vs A = {a}: "
    ax.set_title(
        f"{names}{comparison.decision} after {steps[-1].n if steps else 0:,} of "
        f"{comparison.n_items_total:,} items",
        fontsize=9,
    )
    ax.set_xlim(0, max(comparison.n_items_total, 1))
    ax.legend(loc="upper right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path
