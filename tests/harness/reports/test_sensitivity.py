"""The comparison's sensitivity section (`harness.reports.sensitivity`): the variance
decomposition gives back the effects a balanced design was built from, and a sweep of two
judges by two prompts shows the spread and the decomposition in comparison.md."""

from __future__ import annotations

from dataclasses import dataclass
from itertools import product
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import harness
from harness.reports.analysis import analyse
from harness.reports.sensitivity import decomposition
from harness.reports.writing import write_report
from tests.conftest import load_runs


@dataclass
class Values:
    """What the decomposition reads of a run: its config and its per-item values."""

    config: dict[str, Any]
    values: dict[str, float]

    def per_item(self) -> dict[str, dict[str, float]]:
        return {"hit@1": self.values}


def test_a_balanced_additive_design_splits_exactly() -> None:
    rng = np.random.default_rng(0)
    items, judge, prompt = rng.normal(size=6), {"a": 0.3, "b": -0.3}, {"p": 0.1, "q": -0.1}
    runs = [
        Values(
            {"provider": {"name": j}, "prompt": p, "seed": 0},
            {f"i{k}": float(v + judge[j] + prompt[p]) for k, v in enumerate(items)},
        )
        for j, p in product(judge, prompt)
    ]
    shares = decomposition(runs, "hit@1")  # type: ignore[arg-type]
    total = 4 * ((items - items.mean()) ** 2).sum() + 6 * 4 * (0.3**2 + 0.1**2)
    assert shares is not None
    assert shares["item"] == pytest.approx(4 * ((items - items.mean()) ** 2).sum() / total)
    assert shares["judge"] == pytest.approx(24 * 0.09 / total)
    assert shares["prompt"] == pytest.approx(24 * 0.01 / total)
    assert shares["residual"] == pytest.approx(0.0, abs=1e-12)
    assert set(shares) == {"item", "judge", "prompt", "residual"}  # seed and order: one level


def test_no_variation_no_decomposition() -> None:
    same = {"i0": 1.0, "i1": 1.0}
    runs = [Values({"prompt": p}, same) for p in ("p", "q")]
    assert decomposition(runs, "hit@1") is None  # type: ignore[arg-type]


def test_a_sweep_of_judges_by_prompts_shows_spread_and_variance(
    tiny_dataset: Path, tmp_path: Path
) -> None:
    judge = {"name": "simulated", "dataset": str(tiny_dataset)}
    sweep = {
        "name": "sweep",
        "dataset": str(tiny_dataset),
        "providers": [{**judge, "label": "biased", "position_bias": 1.0}, judge],
        "prompts": ["joint", "text_only"],
        "inputs": {"dialogue": "full", "music": "caption"},
        "n_bootstrap": 20,
    }
    made = harness.run(
        sweep, results_dir=tmp_path / "r", cache_dir=tmp_path / "c", show_progress=False
    )
    runs = load_runs([result.out_dir for result in made])
    write_report(analyse(runs, n_bootstrap=20, n_permutations=100), tmp_path / "out", html=False)
    comparison = (tmp_path / "out" / "comparison.md").read_text()
    assert "## Sensitivity across runs" in comparison
    assert "| Hit@1 |" in comparison
    for part in ("item", "judge", "prompt", "residual"):
        assert f"| {part} |" in comparison
