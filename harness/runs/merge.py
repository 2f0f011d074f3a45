"""`harness merge SHARD_FOLDERS... --out RUN`: the run folder of a sharded run, rebuilt from its
checked shards (`merge_checks`) by the run's own code (`run_folder`), byte for byte the unsharded
run's; run.json sums the shards' counts (the cost recomputed) and lists them in `merged_from`."""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from harness.calls.portable_cache import KEYS_FILE, run_keys, write_run_keys
from harness.calls.pricing import run_cost
from harness.config.experiment import ExperimentConfig
from harness.core.dataset import Dataset
from harness.core.errors import DatasetError, HarnessError
from harness.core.files import read_jsonl, write_jsonl
from harness.core.locking import RunFolderLock
from harness.core.provenance import now
from harness.core.records import Record, RecordWriter, sort_records
from harness.core.run_files import read_run_config, read_run_json
from harness.core.sharding import SHARD_FILE, Marker, Shard, read_marker
from harness.runs.merge_checks import (
    ShardStats,
    check_alike,
    check_content,
    shard_records,
    shard_stats,
)
from harness.runs.run_folder import (
    check_run_folder,
    config_differences,
    evaluate_run,
    write_run_folder,
)
from harness.runs.runner import run_dataset

SUMMARIES = "summaries.jsonl"


@dataclass(frozen=True)
class ShardRun:
    folder: Path
    marker: Marker  # its shard.json
    config: dict[str, Any]  # its config.yaml
    stats: dict[str, Any]  # its run.json
    checked: ShardStats  # what of its run.json its records must match

    @property
    def shard(self) -> Shard:
        return self.marker.shard

    @property
    def items(self) -> list[str]:
        return self.marker.items


@dataclass(frozen=True)
class Merged:
    out: Path
    shards: int
    items: int
    records: int
    metrics: dict[str, Any]
    warnings: list[str]


def read_shard(folder: Path) -> ShardRun:
    """A finished shard's folder; one line naming what is missing otherwise."""
    if not folder.is_dir():
        raise HarnessError(f"{folder}: no such folder")
    if not (folder / SHARD_FILE).is_file():
        raise HarnessError(
            f"{folder}: not a shard's run folder (no {SHARD_FILE}; `harness run --shard I/N` "
            "writes one)"
        )
    for name in ("records.jsonl", "config.yaml", "run.json"):
        if not (folder / name).is_file():
            raise HarnessError(
                f"{folder}: an unfinished shard (no {name}): run its `harness run --shard` "
                "command again to finish it"
            )
    stats = read_run_json(folder / "run.json")
    checked = shard_stats(folder, stats)
    return ShardRun(
        folder, read_marker(folder), read_run_config(folder / "config.yaml"), stats, checked
    )


def check_shards(shards: Sequence[ShardRun]) -> None:
    """One configuration, one split, every shard exactly once; the first problem named."""
    first = shards[0]
    for other in shards[1:]:
        if other.shard.count != first.shard.count:
            raise HarnessError(
                f"shards of different splits: {first.folder} is shard {first.shard}, "
                f"{other.folder} is shard {other.shard}"
            )
        changes = config_differences(first.config, other.config)
        if changes:
            shown = "; ".join(changes[:3]) + (
                f"; {len(changes) - 3} more" if len(changes) > 3 else ""
            )
            raise HarnessError(
                f"shards of different configurations: {first.folder} and {other.folder} "
                f"differ in {shown}"
            )
    seen: dict[int, ShardRun] = {}
    for run in shards:
        earlier = seen.get(run.shard.index)
        if earlier is not None:
            raise HarnessError(
                f"overlapping shards: {earlier.folder} and {run.folder} are both shard {run.shard}"
            )
        seen[run.shard.index] = run
    wanted = (i for i in range(first.shard.count) if i not in seen)
    missing = [f"{i}/{first.shard.count}" for i in itertools.islice(wanted, 10)]
    if missing:
        raise HarnessError(
            f"missing shard(s) {', '.join(missing)}: run `harness run EXP --shard I/N` for "
            f"each and pass every folder (given: {', '.join(str(s.shard) for s in shards)})"
        )


def _check_items(shards: Sequence[ShardRun], dataset: Dataset) -> None:
    for run in shards:
        now_assigned = [item.id for item in dataset.items if run.shard.holds(item.id)]
        if run.marker.dataset_items != len(dataset.items) or run.items != now_assigned:
            raise HarnessError(
                f"{run.folder}: shard {run.shard} ran {len(run.items)} of {run.marker.dataset_items} "
                f"items; the dataset now gives it {len(now_assigned)} of {len(dataset.items)} "
                "(the dataset changed since): run the shards again"
            )


def sum_counts(blocks: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The shards' run.json counts added up: numbers summed, mappings merged key by key,
    anything else taken from the first that has it."""
    out: dict[str, Any] = {}
    keys = list(dict.fromkeys(key for block in blocks for key in block))
    for key in keys:
        values = [block[key] for block in blocks if key in block]
        if all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
            total = sum(values)
            out[key] = round(total, 6) if isinstance(total, float) else total
        elif all(isinstance(v, Mapping) for v in values):
            out[key] = sum_counts(values)
        else:
            out[key] = values[0]
    return out


def _stats(
    shards: Sequence[ShardRun], config: ExperimentConfig, records: list[Record], dataset: Dataset
) -> dict[str, Any]:
    blocks = [{k: v for k, v in run.stats.items() if k != "provenance"} for run in shards]
    stats = sum_counts(blocks)
    cost = shards[0].stats.get("cost")
    if isinstance(cost, Mapping) and isinstance(cost.get("model"), str):
        stats["cost"] = run_cost(config.provider, cost["model"], records)
    stats["dataset_sha256"] = dataset.content_sha256(audio=config.sends_audio)
    first = shards[0].stats.get("provenance") or {}
    stats["provenance"] = {**first, "merged_at": now()}
    stats["merged_from"] = [
        {
            "folder": str(run.folder),
            "shard": str(run.shard),
            "items": len(run.items),
            "started_at": (run.stats.get("provenance") or {}).get("started_at"),
            "finished_at": (run.stats.get("provenance") or {}).get("finished_at"),
        }
        for run in shards
    ]
    return stats


def _summaries(shards: Sequence[ShardRun]) -> dict[str, dict[str, Any]]:
    """The shards' summaries.jsonl lines by item (the first of each)."""
    lines: dict[str, dict[str, Any]] = {}
    for run in shards:
        path = run.folder / SUMMARIES
        if path.is_file():
            for line_no, line in read_jsonl(path):
                item_id = line.get("item_id")
                if not isinstance(item_id, str):
                    raise DatasetError(path, line_no, "item_id: not a string")
                lines.setdefault(item_id, line)
    return lines


def _write_summaries(lines: dict[str, dict[str, Any]], dataset: Dataset, out: Path) -> None:
    """summaries.jsonl: the evaluated items' lines in dataset order, then the examples'."""
    if not lines:
        return
    order = [item.id for item in dataset.items if item.id in lines]
    evaluated = set(order)
    order += [key for key in lines if key not in evaluated]
    write_jsonl(out / SUMMARIES, (lines[key] for key in order))


def merge_shards(folders: Sequence[Path], out: Path, *, overwrite: bool = False) -> Merged:
    if not folders:
        raise HarnessError("give the shards' run folders to merge")
    shards = sorted((read_shard(f) for f in folders), key=lambda run: run.shard)
    if any(out.resolve() == run.folder.resolve() for run in shards):
        raise HarnessError(f"--out {out} is one of the shards: give the whole run's folder")
    check_shards(shards)
    try:
        config = ExperimentConfig.model_validate(shards[0].config)
    except ValidationError as exc:
        raise HarnessError(
            f"{shards[0].folder / 'config.yaml'}: not a valid run configuration ({exc.errors()[0]['msg']})"
        ) from None
    dataset = run_dataset(config)
    _check_items(shards, dataset)
    folders = [run.folder for run in shards]
    checked = [run.checked for run in shards]
    warnings = check_alike(folders, [run.stats for run in shards], checked, config)
    check_content(folders, [run.marker for run in shards], dataset, config)
    records = [
        record
        for run in shards
        for record in shard_records(run.folder, run.marker, run.checked, dataset, config.repeats)
    ]
    summaries = _summaries(shards)
    keys = [k for run in shards if (run.folder / KEYS_FILE).is_file() for k in run_keys(run.folder)]
    if out.exists() and not out.is_dir():
        raise HarnessError(f"--out {out}: a file, not a folder; give the whole run's folder")
    check_run_folder(out, config, overwrite=overwrite)
    out.mkdir(parents=True, exist_ok=True)
    lock = RunFolderLock(out).acquire()
    failed = True
    try:
        partial = out / "records.partial.jsonl"
        writer = RecordWriter(partial)
        for record in records:
            writer.write(record)
        writer.close()
        sort_records(partial, out / "records.jsonl", [item.id for item in dataset.items])
        stats = _stats(shards, config, records, dataset)
        evaluation, metrics = evaluate_run(
            config,
            dataset,
            records,
            parse_failures=int(stats.get("parse_failures", 0)),
            errors=int(stats.get("errors", 0)),
        )
        write_run_folder(
            out, config, items=dataset.items, evaluation=evaluation, metrics=metrics, stats=stats
        )
        write_run_keys(out, keys)
        _write_summaries(summaries, dataset, out)
        failed = False
    finally:
        lock.release(failed=failed)
    return Merged(out, len(shards), len(dataset.items), len(records), metrics, warnings)
