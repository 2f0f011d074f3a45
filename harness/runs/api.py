"""The Python API behind `harness.run`, `harness.evaluate` and `harness.load_run` (see
`harness/__init__.py`, which imports this module only when one of them is called)."""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.calls.cache import ResponseCache
from harness.config.checks import check_datasets, select_runs
from harness.config.experiment import ExperimentConfig, experiments_from, load_experiments
from harness.core.dataset import Dataset, load_dataset
from harness.core.errors import HarnessError
from harness.core.predictions import Predictions, read_predictions, scores_from_ranking
from harness.core.records import read_records
from harness.runs.dry_run import unset_keys
from harness.runs.experiment import run_all
from harness.runs.runner import RunResult
from harness.scoring.evaluation import CoverageWarning, coverage_warnings, evaluate_predictions
from harness.scoring.metrics import Aggregate, MissingPolicy

if TYPE_CHECKING:
    import pandas as pd

Experiment = str | Path | ExperimentConfig | Mapping[str, Any]
Scores = Mapping[str, float | None]


def _configs(experiment: Experiment, overrides: Mapping[str, Any]) -> list[ExperimentConfig]:
    """The runs, with `overrides` applied to the experiment's settings as `--set` applies
    them (so on a sweep, `name=` names the sweep and its runs keep their own names)."""
    if isinstance(experiment, ExperimentConfig):
        if not overrides:
            return [experiment]
        return [ExperimentConfig.model_validate({**experiment.model_dump(), **overrides})]
    if isinstance(experiment, Mapping):
        return experiments_from(experiment, "experiment", replace=overrides)
    configs = load_experiments(experiment, replace=overrides)
    check_datasets(experiment, configs)
    return configs


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
    """Run an experiment file (or sweep), an `ExperimentConfig`, or a mapping of its fields;
    `overrides` replace fields of every run (`limit=5`, `dataset="data/other"`). Returns one
    result per run (`.aggregate.to_json()` holds the metrics; `.out_dir` the run folder).
    `only` keeps the runs whose name matches one of its shell patterns (`["popularity*"]`).
    A finished run of another configuration under the same name is refused unless
    `overwrite=True`; an API key that uncached calls need and that is not set stops it
    before the first call. Works from inside a running event loop (a Jupyter cell) as well."""
    configs = select_runs(_configs(experiment, overrides), only)
    cache = ResponseCache(cache_dir)
    try:
        unset = unset_keys(configs, cache=cache, results_dir=Path(results_dir))
        if unset:  # before the first call, not after the runs that need no key
            raise HarnessError("\n".join(unset))
        return run_all(
            configs,
            cache=cache,
            results_dir=Path(results_dir),
            show_progress=show_progress,
            overwrite=overwrite,
        )
    finally:
        cache.close()


def _as_predictions(predictions: Any, dataset: Dataset) -> Predictions:
    if isinstance(predictions, str | Path):
        return read_predictions(Path(predictions), list(dataset.items))
    if isinstance(predictions, Mapping):
        return {0: {str(k): dict(v) for k, v in predictions.items()}}
    if isinstance(predictions, Iterable):
        out: dict[int, dict[str, Mapping[str, float | None]]] = {}
        for line in predictions:
            if not isinstance(line, Mapping) or "item_id" not in line:
                raise HarnessError("each prediction must be a mapping with item_id and scores")
            scores = line.get("scores")
            if scores is None and "ranking" in line:
                candidates = dataset.item(line["item_id"]).candidates
                scores = scores_from_ranking(line["ranking"], candidates)
            out.setdefault(int(line.get("repeat", 0)), {})[line["item_id"]] = dict(scores or {})
        return out
    raise HarnessError(f"predictions must be a file, a mapping or a list, not {predictions!r}")


def evaluate(
    dataset: str | Path | Dataset,
    predictions: str | Path | Mapping[str, Scores] | Iterable[Mapping[str, Any]],
    *,
    missing: MissingPolicy = "worst",
    n_bootstrap: int = 1000,
    seed: int = 0,
    at: Sequence[int] = (),
) -> Aggregate:
    """Metrics of your own predictions against a dataset, through the same code as a run:
    `predictions` is a predictions JSONL file, `{item_id: {candidate_id: score}}`, or a list
    of `{"item_id": ..., "scores": {...}, "repeat": 0}` (or `"ranking": [...]`) lines; `at`
    adds hit@K, recall@K, precision@K and ndcg@K. `.to_json()` gives the metrics.json form;
    `.per_item` the per-item values. Predictions that leave items or candidates without a
    score warn (`CoverageWarning`), saying how they were counted."""
    data = dataset if isinstance(dataset, Dataset) else load_dataset(dataset, check_audio=False)
    given = _as_predictions(predictions, data)
    result = evaluate_predictions(
        data.items, given, missing=missing, n_bootstrap=n_bootstrap, seed=seed, at=at
    ).aggregate
    for line in coverage_warnings(data.items, given, result):
        warnings.warn(line, CoverageWarning, stacklevel=3)  # the caller of harness.evaluate
    return result


def load_run(folder: str | Path) -> pd.DataFrame:
    """A run's records.jsonl as a pandas DataFrame, one row per model call, in the schema of
    `harness export parquet`'s records.parquet (run, item_id, repeat, candidates, raw,
    attempts, scores, error, parse_error, cache_hit, latency_s, input_tokens, output_tokens,
    extra); `.attrs` holds the run's metrics.json and config.yaml. A records.parquet file
    is read as well (every run it holds)."""
    from harness.core.run_files import read_json_file, read_run_config
    from harness.interop.parquet import read_records_parquet, records_frame, records_table

    folder = Path(folder)
    if folder.is_file() and folder.suffix == ".parquet":
        return read_records_parquet(folder)
    path = folder / "records.jsonl"
    if not path.is_file():
        raise HarnessError(f"{folder}: no records.jsonl (is this a finished run folder?)")
    frame = records_frame(records_table(read_records(path), folder.name))
    metrics, config = folder / "metrics.json", folder / "config.yaml"
    if metrics.is_file():
        frame.attrs["metrics"] = read_json_file(metrics)
    if config.is_file():
        frame.attrs["config"] = read_run_config(config)
    return frame
