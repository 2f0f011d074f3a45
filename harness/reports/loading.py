"""Finished runs read back from their folders, with metrics recomputed from records.jsonl
through the one evaluation path (so per-item values are there for paired statistics)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from harness.config.protocols import protocol_of
from harness.core.dataset import Dataset, load_dataset
from harness.core.errors import HarnessError
from harness.core.predictions import read_predictions
from harness.core.records import Record, read_records
from harness.core.run_files import read_run_config, read_run_json
from harness.core.trec import run_tag
from harness.reports.labels import generated_labels
from harness.scoring.evaluation import (
    evaluate_records,
    evaluation_options,
    expected_score_records,
)
from harness.scoring.metrics import Aggregate, FloatArray
from harness.scoring.reliability import judge_reliability
from providers import REGISTRY


@dataclass
class RunData:
    """A finished run folder, with its metrics recomputed from records.jsonl by the metric
    layer (so per-item values are available for paired statistics)."""

    path: Path
    label: str
    config: dict[str, Any]
    stats: dict[str, Any]
    records: list[Record]
    dataset: Dataset
    aggregate: Aggregate
    scores: dict[str, FloatArray]  # item id -> mean score over repeats, candidate order
    score: Literal["greedy", "expected"] = "greedy"  # which score the metrics are of
    groups: dict[str, Aggregate] = field(default_factory=dict)  # per item group
    # the metrics.json blocks of its protocol (`harness.config.protocols`), a judge's reliability
    protocol: dict[str, Any] = field(default_factory=dict)

    def metrics_json(self) -> dict[str, Any]:
        """The run's metrics as metrics.json holds them."""
        out = self.aggregate.to_json()
        if self.groups:
            out["groups"] = {name: agg.to_json() for name, agg in self.groups.items()}
        return out | self.protocol

    kind: Literal["run", "predictions"] = "run"  # a run folder, or a predictions file

    @property
    def name(self) -> str:
        """The run's own name (its folder), whatever label it is shown under."""
        return str(self.config.get("name") or self.path.name)

    @property
    def provider(self) -> dict[str, Any]:
        provider: dict[str, Any] = self.config.get("provider") or {}
        return provider

    @property
    def prompt(self) -> str:
        """The prompt variant; "n/a" for scorers, which take no prompt, and predictions."""
        entry = REGISTRY.get(str(self.provider.get("name")))
        if self.kind == "predictions" or (entry and entry.kind == "scorer"):
            return "n/a"
        return str(self.config.get("prompt", "?"))

    @property
    def inputs(self) -> str:
        if self.kind == "predictions":
            return "n/a"
        inputs = self.config.get("inputs") or {}
        shown = f"{inputs.get('dialogue', 'full')}/{inputs.get('music', 'audio')}"
        return shown + ("+context audio" if inputs.get("context_audio") else "")

    @property
    def parse_failure_rate(self) -> float | None:
        failed = sum(r.parse_error is not None for r in self.records)
        return failed / len(self.records) if self.records else None

    def per_item(self) -> dict[str, dict[str, float]]:
        """metric -> {item id: value (mean over repeats)}, as the metric layer computes it."""
        agg = self.aggregate
        return {
            name: dict(zip(agg.item_ids, map(float, values), strict=True))
            for name, values in agg.per_item.items()
        }


def load_run(
    path: Path,
    *,
    dataset: Path | None = None,
    datasets: dict[Path, Dataset] | None = None,
    score: Literal["greedy", "expected"] = "greedy",
) -> RunData:
    """Read a run folder and recompute its aggregate from records.jsonl. `dataset` overrides
    its config.yaml's; `datasets`: a cache shared across runs. `score: expected` evaluates the
    judge's expected scores where the run has them (RunData.score says which)."""
    config_path = path / "config.yaml"
    if not config_path.is_file():
        raise HarnessError(f"{path}: no config.yaml (is this a finished run folder?)")
    config = read_run_config(config_path)
    records_path = path / "records.jsonl"
    if not records_path.is_file():
        raise HarnessError(f"{path}: no records.jsonl")
    if protocol_of(config).evaluate is not None:  # not scored per candidate: no browser
        raise HarnessError(
            f"{path}: a protocol: {protocol_of(config).name} run; its figures are its "
            "report.md and metrics.json"
        )
    records = list(read_records(records_path))
    root = Path(dataset or config.get("dataset", ""))
    if not root.is_dir():
        raise HarnessError(
            f"{path}: dataset folder {str(root)!r} of this run not found; run from the folder "
            "the run was made in, or pass --dataset DIR"
        )
    data = _dataset(root, datasets)
    if config.get("limit"):
        data = data.subset([item.id for item in data.items[: int(config["limit"])]])
    if isinstance(config.get("items"), list):  # the items a sequential comparison asked
        data = data.subset([str(item_id) for item_id in config["items"]])
    evaluated = records
    used: Literal["greedy", "expected"] = "greedy"
    if score == "expected":
        swapped = expected_score_records(records)
        if swapped is not None:
            evaluated, used = swapped, "expected"
    options = evaluation_options(config)
    evaluation = evaluate_records(data.items, evaluated, **options)
    chosen = {"n_bootstrap": options["n_bootstrap"], "seed": options["seed"]}
    protocol = protocol_of(config).blocks_of(data, records, evaluation.to_json(), **chosen)
    scores = evaluation.mean_scores()
    provider = config.get("provider") or {}
    entry = REGISTRY.get(str(provider.get("name")))
    if entry is not None and entry.kind == "judge" and protocol_of(config).name == "rank":
        sampled = float(provider.get("temperature") or 0.0) > 0
        protocol["reliability"] = judge_reliability(
            data.items, records, scores, sampled=sampled, **chosen
        )
    return RunData(
        path=path,
        label=str(config.get("name") or path.name),
        config=config,
        stats=read_run_json(path / "run.json"),
        records=records,
        dataset=data,
        aggregate=evaluation.aggregate,
        scores=scores,
        score=used,
        groups=evaluation.groups,
        protocol=protocol,
    )


def _dataset(root: Path, datasets: dict[Path, Dataset] | None) -> Dataset:
    cache = datasets if datasets is not None else {}
    key = root.resolve()
    if key not in cache:
        cache[key] = load_dataset(root, check_audio=False)
    return cache[key]


def load_predictions(
    path: Path, dataset: Path, *, datasets: dict[Path, Dataset] | None = None
) -> RunData:
    """Your own predictions (the JSONL that `harness evaluate` reads) as a run: one record
    per item and repeat, scored against `dataset` with the run defaults (missing scores
    ranked worst, 1,000 bootstrap resamples, seed 0)."""
    data = _dataset(dataset, datasets)
    predictions = read_predictions(path, list(data.items))
    records = [
        Record(
            item_id=item_id,
            candidates=[c for c in data.item(item_id).candidates if c in scores],
            repeat=repeat,
            scores=scores,
        )
        for repeat, by_item in sorted(predictions.items())
        for item_id, scores in by_item.items()
    ]
    name = run_tag(path) or (path.parent.name if path.name == "predictions.jsonl" else path.stem)
    config: dict[str, Any] = {
        "name": name,
        "dataset": str(dataset),
        "provider": {"name": "predictions", "model": name},
        "repeats": max(predictions, default=0) + 1,
    }
    evaluation = evaluate_records(data.items, records, repeats=config["repeats"])
    return RunData(
        path=path,
        label=name,
        config=config,
        stats={},
        records=records,
        dataset=data,
        aggregate=evaluation.aggregate,
        scores=evaluation.mean_scores(),
        kind="predictions",
    )


def assign_labels(runs: Sequence[RunData]) -> None:
    """Short, unique labels: each run's `label:`, else what tells it apart from the others."""
    labels = generated_labels(
        [run.config for run in runs],
        [run.name for run in runs],
        [
            run.path.parent.name if run.kind == "run" else run.path.parent.parent.name
            for run in runs
        ],
    )
    for run, label in zip(runs, labels, strict=True):
        run.label = label
