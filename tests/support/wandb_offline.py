"""What a W&B offline run wrote: the records of its `run-ID.wandb` log (LevelDB's log format:
7-byte record headers in 32 KiB blocks, after a 7-byte `:W&B` header), as wandb's protobuf
`Record`s, so that tests can check what was logged without syncing it anywhere."""

from __future__ import annotations

import json
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BLOCK = 32768
HEADER = 7
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4


def records(path: Path) -> Iterator[Any]:
    from wandb.proto import wandb_internal_pb2

    parse: Any = wandb_internal_pb2.Record.FromString  # type: ignore[attr-defined]
    data = path.read_bytes()
    if data[:4] != b":W&B":
        raise ValueError(f"{path}: not a W&B run log")
    pos, pending = HEADER, b""
    while pos + HEADER <= len(data):
        left = BLOCK - pos % BLOCK
        _, length, kind = (
            struct.unpack("<IHB", data[pos : pos + HEADER]) if left >= HEADER else (0, 0, 0)
        )
        if left < HEADER or (kind == 0 and length == 0):
            pos += left  # the rest of a block is padding
            continue
        chunk = data[pos + HEADER : pos + HEADER + length]
        pos += HEADER + length
        if kind == FULL:
            yield parse(chunk)
        elif kind == FIRST:
            pending = chunk
        elif kind == MIDDLE:
            pending += chunk
        elif kind == LAST:
            yield parse(pending + chunk)
            pending = b""


@dataclass
class OfflineRun:
    name: str
    group: str
    config: dict[str, Any] = field(default_factory=dict)
    summary: dict[str, Any] = field(default_factory=dict)
    files: list[str] = field(default_factory=list)
    exit_code: int | None = None


def read_offline_run(path: Path) -> OfflineRun:
    """Name, group, config, final summary, saved files and exit code of one offline run."""
    run = OfflineRun("", "")
    for record in records(path):
        kind = record.WhichOneof("record_type")
        if kind == "run":
            run.name, run.group = record.run.display_name, record.run.run_group
            for item in record.run.config.update:
                run.config[item.key] = json.loads(item.value_json)
        elif kind == "config":
            for item in record.config.update:
                run.config[item.key or ".".join(item.nested_key)] = json.loads(item.value_json)
        elif kind == "summary":
            for item in record.summary.update:
                key = item.key or ".".join(item.nested_key)
                run.summary[key] = json.loads(item.value_json)
        elif kind == "files":
            run.files += [f.path for f in record.files.files]
        elif kind == "exit":
            run.exit_code = record.exit.exit_code
    return run


def offline_runs(directory: Path) -> list[OfflineRun]:
    """Every offline run under `directory` (wandb's `dir`), in the order they started."""
    logs = sorted(directory.glob("wandb/offline-run-*/run-*.wandb"))
    return [read_offline_run(path) for path in logs]
