"""bgm-judge: an evaluation harness for music recommendation from conversation.

The Python API (documented in README.md, section "Python API"):

    import harness
    results = harness.run("experiments/quickstart.yaml", limit=5)   # one RunResult per run
    aggregate = harness.evaluate("data/sample", "my_model/predictions.jsonl")
    records = harness.load_run("results/quickstart/random_uniform_full_caption")  # DataFrame

`run` works inside a running event loop (a Jupyter cell). The heavy modules load only when
one of these is called, so `import harness` stays cheap.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

    from harness.core.dataset import Dataset
    from harness.runs.api import Experiment, Scores
    from harness.runs.runner import RunResult
    from harness.scoring.metrics import Aggregate, MissingPolicy

from harness._version import __version__

__all__ = ["__version__", "evaluate", "load_run", "run"]


def run(
    experiment: Experiment,
    *,
    results_dir: str | Path = "results",
    cache_dir: str | Path | None = None,
    show_progress: bool = True,
    overwrite: bool = False,
    only: Sequence[str] = (),
    **overrides: Any,
) -> list[RunResult]:
    """Run an experiment file, config or mapping; see `harness.runs.api.run`."""
    from harness.runs import api

    return api.run(
        experiment,
        results_dir=results_dir,
        cache_dir=cache_dir,
        show_progress=show_progress,
        overwrite=overwrite,
        only=only,
        **overrides,
    )


def evaluate(
    dataset: str | Path | Dataset,
    predictions: str | Path | Mapping[str, Scores] | Iterable[Mapping[str, Any]],
    *,
    missing: MissingPolicy = "worst",
    n_bootstrap: int = 1000,
    seed: int = 0,
    at: Sequence[int] = (),
) -> Aggregate:
    """Metrics of your own predictions; see `harness.runs.api.evaluate`."""
    from harness.runs import api

    return api.evaluate(
        dataset, predictions, missing=missing, n_bootstrap=n_bootstrap, seed=seed, at=at
    )


def load_run(folder: str | Path) -> pd.DataFrame:
    """A run's records as a pandas DataFrame; see `harness.runs.api.load_run`."""
    from harness.runs import api

    return api.load_run(folder)
