"""How the report's figures are drawn: once for the page's PNG and once for the PDF."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from harness.reports import plots
from harness.scoring import registry
from harness.scoring.metrics import MetricSummary
from harness.scoring.stats import Agreement


def _figures() -> list[plots.Figure]:
    labels = [f"run {i}" for i in range(3)]
    tau = np.random.default_rng(0).uniform(-1, 1, (4, 4))
    summary = MetricSummary(mean=0.5, ci95=(0.4, 0.6))
    return [
        plots.metric_bars(
            [(label, dict.fromkeys(registry.names("ranking"), summary)) for label in labels]
        ),
        plots.agreement_heatmap(Agreement(["human", *labels], tau, np.ones((4, 4), np.int64))),
    ]


def test_each_figure_is_drawn_once_for_the_png_and_once_for_the_pdf(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Saving the PDF with the page's layout kept needs no dry-run draw before it (which
    matplotlib makes while the figure has a layout engine, even a placeholder)."""
    from matplotlib.figure import Figure

    drawn = 0
    draw = Figure.draw

    def counted(self: Figure, renderer: Any) -> None:
        nonlocal drawn
        drawn += 1
        draw(self, renderer)

    monkeypatch.setattr(Figure, "draw", counted)
    figures = _figures()
    assert drawn == 2 * len(figures)
    assert all(set(figure.files) == {"png", "pdf"} for figure in figures)
