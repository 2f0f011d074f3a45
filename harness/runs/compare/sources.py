"""Where the two sides of a comparison get their per-item metric values (`evaluate_records`,
repeats averaged): finished runs or predictions files (known up front), or experiment files
asked batch by batch through the one runner."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from harness.calls.cache import ResponseCache
from harness.config.experiment import ExperimentConfig
from harness.config.loading import load_experiments
from harness.core.dataset import Dataset, Item
from harness.core.errors import HarnessError
from harness.core.event_loop import run_coroutine
from harness.core.provenance import unofficial_endpoints
from harness.core.records import Record, read_records
from harness.core.run_files import read_or_empty
from harness.reports.loading import RunData, load_predictions, load_run
from harness.runs.compare.inputs import check_same_items
from harness.runs.runner import Runner
from harness.scoring import registry
from harness.scoring.evaluation import evaluate_records
from harness.scoring.metrics import MissingPolicy


def metric_spec(metric: str) -> tuple[tuple[int, ...], float]:
    """(the cut-offs the metric needs, the width of its range): a bounded per-item metric."""
    spec = registry.comparable(metric)
    if spec is None:
        names = [m.name for m in registry.metrics() if registry.comparable(m.at(1))]
        raise HarnessError(
            f"--metric {metric!r} is not a bounded per-item metric: use one of "
            f"{', '.join(names)} (K a cut-off, e.g. ndcg@10)"
        )
    return spec


def per_item_metric(
    items: Sequence[Item],
    records: Sequence[Record],
    metric: str,
    *,
    repeats: int,
    missing: MissingPolicy = "worst",
) -> dict[str, float]:
    """item id -> the metric's value (mean over repeats) for the items the records score."""
    at, _ = metric_spec(metric)
    evaluation = evaluate_records(
        items, records, repeats=repeats, missing=missing, n_bootstrap=10, at=at
    )
    agg = evaluation.aggregate
    return dict(zip(agg.item_ids, map(float, agg.per_item[metric]), strict=True))


class PairSource(Protocol):
    """Both sides of a comparison: labels, the items both datasets hold (dataset order), the
    items each side answered, and per-item values of the items asked so far."""

    labels: tuple[str, str]
    item_ids: list[str]
    answered: tuple[set[str], set[str]]
    unshared: int  # items only one of the datasets holds
    unofficial: dict[str, list[str]]  # side label -> endpoints not the provider's official

    def values(self, asked: Sequence[str]) -> tuple[dict[str, float], dict[str, float]]: ...

    def spent(self) -> tuple[int | None, float | None]:
        """Model calls made so far, and their price in USD (None: not known)."""
        ...

    def full(self, visited: int) -> tuple[int | None, float | None]:
        """The calls (and USD) two full runs would make."""
        ...


def _shared_items(a: Dataset, b: Dataset) -> tuple[list[str], int]:
    """The ids of the items both datasets hold (checked alike), and how many only one holds."""
    other = {item.id for item in b.items}
    shared = [item.id for item in a.items if item.id in other]
    if not shared:
        raise HarnessError("A and B share no item: they must be runs of the same dataset")
    check_same_items((a, b), shared)
    return shared, len(a.items) + len(b.items) - 2 * len(shared)


def _answered(run: RunData, values: dict[str, float]) -> set[str]:
    """The items of `run` with an answer (a call that did not fail) and a value."""
    return {r.item_id for r in run.records if r.error is None and r.item_id in values}


def _run_data(path: Path, dataset: Path | None) -> RunData:
    if path.is_dir():
        return load_run(path, dataset=dataset)
    if dataset is None:
        raise HarnessError(f"{path}: a predictions file needs --dataset DIR")
    return load_predictions(path, dataset)


@dataclass
class ValuesSource:
    """Per-item values known up front; visiting an item costs nothing."""

    a_values: dict[str, float]
    b_values: dict[str, float]
    labels: tuple[str, str] = ("A", "B")
    item_ids: list[str] = field(default_factory=list)
    answered: tuple[set[str], set[str]] = (set(), set())
    unshared: int = 0
    unofficial: dict[str, list[str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.item_ids = list(self.a_values | self.b_values)
        self.answered = (set(self.a_values), set(self.b_values))

    def values(self, asked: Sequence[str]) -> tuple[dict[str, float], dict[str, float]]:
        a, b = self.a_values, self.b_values
        return {i: a[i] for i in asked if i in a}, {i: b[i] for i in asked if i in b}

    def spent(self) -> tuple[int | None, float | None]:
        return None, None

    def full(self, visited: int) -> tuple[int | None, float | None]:
        return None, None


class FinishedSource(ValuesSource):
    """Two finished runs or predictions files: a visited item "costs" its runs' calls."""

    def __init__(self, a: RunData, b: RunData, metric: str) -> None:
        values = [
            per_item_metric(
                run.dataset.items,
                run.records,
                metric,
                repeats=int(run.config.get("repeats") or 1),
                missing=run.config.get("missing", "worst"),
            )
            for run in (a, b)
        ]
        super().__init__(values[0], values[1], (a.label, b.label))
        self.a, self.b = a, b
        self.item_ids, self.unshared = _shared_items(a.dataset, b.dataset)
        self.answered = (_answered(a, values[0]), _answered(b, values[1]))
        self.unofficial = {run.label: unofficial_endpoints(run.stats) for run in (a, b)}
        self._asked: list[str] = []

    def values(self, asked: Sequence[str]) -> tuple[dict[str, float], dict[str, float]]:
        self._asked = list(asked)
        return super().values(asked)

    def _calls(self, ids: Sequence[str]) -> int | None:
        if self.a.kind == "predictions" or self.b.kind == "predictions":
            return None
        calls = Counter(r.item_id for run in (self.a, self.b) for r in run.records)
        return sum(calls[i] for i in ids)

    def spent(self) -> tuple[int | None, float | None]:
        return self._calls(self._asked), None

    def full(self, visited: int) -> tuple[int | None, float | None]:
        return self._calls(self.item_ids), None


@dataclass
class RunSource:
    """Two experiment files (one configuration each), asked batch by batch: each batch re-runs
    both on every item asked so far (earlier ones from the cache), into `results_dir/A|B/`."""

    configs: tuple[ExperimentConfig, ExperimentConfig]
    cache: ResponseCache
    results_dir: Path
    metric: str
    show_progress: bool = False
    labels: tuple[str, str] = ("A", "B")
    item_ids: list[str] = field(default_factory=list)
    answered: tuple[set[str], set[str]] = (set(), set())
    unshared: int = 0
    unofficial: dict[str, list[str]] = field(default_factory=dict)
    _model_calls: int = 0
    _usd: float | None = None
    _calls_per_item: float = 0.0
    _usd_per_item: float | None = None

    def __post_init__(self) -> None:
        self.labels = (self.configs[0].name, self.configs[1].name)
        if self.labels[0] == self.labels[1]:
            self.labels = (f"A:{self.labels[0]}", f"B:{self.labels[1]}")
        a, b = (
            Runner(config, cache=self.cache, results_dir=self.results_dir).dataset()
            for config in self.configs
        )
        self.item_ids, self.unshared = _shared_items(a, b)
        # every item asked is answered, or the run stops (see `values`)
        self.answered = ({item.id for item in a.items}, {item.id for item in b.items})

    def values(self, asked: Sequence[str]) -> tuple[dict[str, float], dict[str, float]]:
        out = []
        calls = 0.0
        usd: float | None = 0.0
        for side, config, label in zip("AB", self.configs, self.labels, strict=True):
            runner = Runner(
                config,
                cache=self.cache,
                results_dir=self.results_dir / side,
                show_progress=self.show_progress,
                items=asked,
            )
            result = run_coroutine(runner.run())
            if not result.complete:
                raise HarnessError(
                    f"{config.name}: {result.stats.errors} call(s) failed; details in "
                    f"{result.out_dir / 'report.md'} (re-run to retry them; answers received "
                    "so far are in the cache)"
                )
            self._model_calls += result.stats.model_calls
            self.unofficial[label] = result.unofficial
            cost = _cost(result.out_dir)
            spent, total = cost.get("usd_spent"), cost.get("usd")
            if spent is not None:
                self._usd = (self._usd or 0.0) + float(spent)
            usd = None if usd is None or total is None else usd + float(total)
            calls += result.stats.calls
            records = list(read_records(result.out_dir / "records.jsonl"))
            out.append(
                per_item_metric(
                    runner.dataset().items,
                    records,
                    self.metric,
                    repeats=config.repeats,
                    missing=config.missing,
                )
            )
        self._calls_per_item = calls / max(1, len(asked))
        self._usd_per_item = None if usd is None else usd / max(1, len(asked))
        return out[0], out[1]

    def spent(self) -> tuple[int | None, float | None]:
        return self._model_calls, self._usd

    def full(self, visited: int) -> tuple[int | None, float | None]:
        """Extrapolated from the calls (and price) per item of the items asked."""
        n = len(self.item_ids)
        usd = None if self._usd_per_item is None else round(self._usd_per_item * n, 6)
        return round(self._calls_per_item * n), usd


def _cost(out_dir: Path) -> dict[str, Any]:
    cost = read_or_empty(out_dir / "run.json").get("cost")
    return cost if isinstance(cost, dict) else {}


def open_sources(
    a: Path,
    b: Path,
    *,
    metric: str,
    dataset: Path | None,
    cache: ResponseCache | None,
    results_dir: Path,
    show_progress: bool = False,
) -> PairSource:
    """Experiment files (both YAML, one configuration each), or run folders / predictions
    files (with `dataset`)."""
    metric_spec(metric)
    yaml_files = [p.suffix in (".yaml", ".yml") for p in (a, b)]
    if all(yaml_files):
        configs = []
        for path in (a, b):
            loaded = load_experiments(path)
            if len(loaded) != 1:
                raise HarnessError(
                    f"{path}: a sweep of {len(loaded)} runs; compare takes one configuration "
                    "per file"
                )
            configs.append(loaded[0])
        assert cache is not None
        return RunSource((configs[0], configs[1]), cache, results_dir, metric, show_progress)
    if any(yaml_files):
        raise HarnessError("A and B must both be experiment files, or both runs/predictions")
    for path in (a, b):
        if not path.exists():
            raise HarnessError(f"{path}: not found")
    return FinishedSource(_run_data(a, dataset), _run_data(b, dataset), metric)
