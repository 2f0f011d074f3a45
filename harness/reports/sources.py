"""What `harness report` and `harness view` compare: run folders, sweep folders at any depth
(their runs in the experiment file's order), and your own predictions (a predictions JSONL
file, or a folder holding only predictions.jsonl). Whatever cannot be read is named in a
warning, never skipped silently."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from harness.core.dataset import Dataset
from harness.core.errors import HarnessError
from harness.core.files import read_json_object
from harness.core.sharding import SHARD_FILE, Shard
from harness.core.trec import is_trec_run
from harness.reports.loading import RunData, assign_labels, load_predictions, load_run
from harness.scoring.evaluation import no_scores_reason

SWEEP_FILE = "sweep.json"  # written by harness.run: the sweep's runs in order
PREDICTIONS = "predictions.jsonl"


@dataclass(frozen=True)
class Source:
    kind: Literal["run", "predictions"]
    path: Path  # a run folder, or a predictions file


@dataclass
class Found:
    sources: list[Source] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def _is_run(folder: Path) -> bool:
    return (folder / "metrics.json").is_file()


def _predictions_only(folder: Path) -> bool:
    return (folder / PREDICTIONS).is_file() and not (folder / "config.yaml").is_file()


def _shard(folder: Path) -> str | None:
    """Why a shard's folder (`harness run --shard I/N`) is not a run of its own."""
    if not (folder / SHARD_FILE).is_file():
        return None
    which = "a shard"
    try:
        marker = read_json_object(folder / SHARD_FILE)
        index, count = marker.get("index"), marker.get("count")
        if type(index) is int and type(count) is int:
            which = f"shard {Shard(index, count)}"
    except HarnessError:
        pass
    return f"{which} of a run (`harness merge` joins them)"


def _unfinished(folder: Path) -> str | None:
    if (folder / "records.partial.jsonl").is_file():
        return "an unfinished run (interrupted): re-run its experiment to finish it"
    if (folder / "config.yaml").is_file() or (folder / "records.jsonl").is_file():
        return "a run folder without metrics.json (the run did not finish)"
    return None


def _run_order(folder: Path) -> list[str]:
    try:
        order = read_json_object(folder / SWEEP_FILE).get("runs")
    except HarnessError:
        return []
    return [str(name) for name in order] if isinstance(order, list) else []


def _children(folder: Path) -> list[Path]:
    """Sub-folders in the sweep's run order (sweep.json), then by name."""
    try:
        folders = sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith("."))
    except OSError:
        return []
    order = {name: i for i, name in enumerate(_run_order(folder))}
    return sorted(folders, key=lambda p: (order.get(p.name, len(order)), p.name))


def _walk(folder: Path, found: Found) -> Iterator[Source]:
    for child in _children(folder):
        if (part := _shard(child)) is not None:
            found.warnings.append(f"{child}: skipped, {part}")
        elif _is_run(child):
            yield Source("run", child)
        elif _predictions_only(child):
            yield Source("predictions", child / PREDICTIONS)
        elif (reason := _unfinished(child)) is not None:
            found.warnings.append(f"{child}: skipped, {reason}")
        elif child.is_symlink():  # (a link to / would walk the file system, to .. loop)
            found.warnings.append(f"{child}: skipped, a link to a folder that is not a run")
        else:
            yield from _walk(child, found)


def discover(paths: Sequence[Path]) -> Found:
    """Every run and predictions file under `paths`, each once, in the order given (a sweep
    folder's runs in the experiment's order); a warning for each path that holds none."""
    found = Found()
    seen: set[Path] = set()
    for path in paths:
        if path.is_file():
            if path.suffix == ".jsonl" or is_trec_run(path):
                listed = [Source("predictions", path)]
            else:
                found.warnings.append(
                    f"{path}: skipped, not a run folder, a sweep folder, a predictions JSONL file "
                    "or a TREC run file"
                )
                continue
        elif _is_run(path):
            listed = [Source("run", path)]
        elif path.is_dir() and _predictions_only(path):
            listed = [Source("predictions", path / PREDICTIONS)]
        elif path.is_dir():
            if (reason := _unfinished(path)) is not None:
                found.warnings.append(f"{path}: skipped, {reason}")
                continue
            listed = list(_walk(path, found))
            if not listed:
                found.warnings.append(f"{path}: no finished runs or predictions files under it")
        else:
            found.warnings.append(f"{path}: not found")
            continue
        for source in listed:
            key = source.path.resolve()
            if key not in seen:
                seen.add(key)
                found.sources.append(source)
    return found


def load_sources(
    sources: Sequence[Source],
    *,
    dataset: Path | None = None,
    score: Literal["greedy", "expected"] = "greedy",
) -> tuple[list[RunData], list[str]]:
    """Load every source; one that cannot be read becomes a warning naming it and why.
    Predictions files are scored against `dataset`, else the one dataset of the run folders
    (a predictions file cannot say which dataset it answers). `score`: see `load_run`."""
    datasets: dict[Path, Dataset] = {}
    loaded: dict[Source, RunData] = {}
    warnings = []
    for source in sources:
        if source.kind != "run":
            continue
        try:
            run = load_run(source.path, dataset=dataset, datasets=datasets, score=score)
        except HarnessError as exc:
            warnings.append(f"skipped: {exc}")
            continue
        failed = no_scores_reason(run.metrics_json(), run.stats)
        if failed is not None:  # chance-level numbers, as `harness run` says
            warnings.append(f"skipped: {source.path}: no metrics, {failed}")
            continue
        loaded[source] = run
    roots = {run.dataset.root.resolve() for run in loaded.values()}
    for source in sources:
        if source.kind != "predictions":
            continue
        root = dataset or (next(iter(roots)) if len(roots) == 1 else None)
        if root is None:
            why = "several datasets among the runs" if roots else "no run folder names one"
            warnings.append(
                f"skipped: {source.path}: a predictions file needs --dataset DIR ({why})"
            )
            continue
        try:
            loaded[source] = load_predictions(source.path, root, datasets=datasets)
        except HarnessError as exc:
            warnings.append(f"skipped: {exc}")
    runs = [loaded[s] for s in sources if s in loaded]
    assign_labels(runs)
    return runs, warnings
