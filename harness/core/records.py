"""`records.jsonl`: one line per model call, streamed as calls complete, sorted into dataset
order when the run ends and read back."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import IO, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from harness.core.dataset import pydantic_reason
from harness.core.errors import DatasetError, StorageError
from harness.core.files import lines, open_file, parse_json


class Record(BaseModel):
    model_config = ConfigDict(extra="allow")
    item_id: str
    candidates: list[str]
    repeat: int = 0
    raw: str | None = None
    attempts: list[str] = Field(default_factory=list, description="raw text of earlier re-asks")
    scores: dict[str, float | None]
    error: str | None = None
    parse_error: str | None = None
    cache_hit: bool = False
    latency_s: float | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    extra: dict[str, Any] = Field(default_factory=dict)


FLUSH_EVERY_S = 0.1


class RecordWriter:
    """Appends one JSON line per record, flushed at least every FLUSH_EVERY_S and when
    closed: a kill loses at most those lines, whose answers the cache holds already."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._handle: IO[str] = path.open("w", encoding="utf-8")
        self._flushed = time.monotonic()

    def write(self, record: Record) -> None:
        try:
            self._handle.write(record.model_dump_json(exclude_defaults=True) + "\n")
            if (now := time.monotonic()) - self._flushed >= FLUSH_EVERY_S:
                self._handle.flush()
                self._flushed = now
        except OSError as exc:  # a full disk: the answers are in the cache, a re-run resumes
            raise StorageError(f"cannot write {self.path}: {exc.strerror or exc}") from None

    def close(self) -> None:
        self._handle.close()


def read_records(path: Path) -> Iterator[Record]:
    """Complete records of a file; a torn last line (a killed run) is skipped, a line that
    is not a record is a DatasetError naming it."""
    for line_no, line in lines(path):
        if not line.endswith(b"\n"):
            return
        try:
            yield Record.model_validate_json(line)
        except ValidationError as exc:
            reason = pydantic_reason(exc)
            raise DatasetError(path, line_no, f"not a record of a run ({reason})") from None


def scan_partial(path: Path) -> tuple[int, int]:
    """(complete records, broken lines) of a records file a killed run left behind."""
    complete = broken = 0
    for _, raw in lines(path):
        try:
            if not raw.endswith(b"\n"):
                raise ValueError("no newline")
            Record.model_validate_json(raw)
        except ValueError:
            broken += 1
            continue
        complete += 1
    return complete, broken


class RecordsFile:
    """The records of a file, read again at each iteration (never all held in memory)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __iter__(self) -> Iterator[Record]:
        return read_records(self.path)


def order_key(
    position: Mapping[str, int], item_id: str, repeat: int, candidates: list[str]
) -> tuple[int, int, list[str]]:
    """Where a record goes in records.jsonl: by item (dataset order), repeat, candidates."""
    return position.get(item_id, 1 << 30), repeat, candidates


def sort_records(source: Path, path: Path, item_order: list[str]) -> None:
    """Move the records of `source` to `path` (atomically) in dataset order (`order_key`, ties
    in `source` order), so reruns produce identical files. Only each line's key and place are
    held in memory; a file already in order is renamed as it is."""
    position = {item_id: i for i, item_id in enumerate(item_order)}
    places: list[tuple[int, int, list[str], int, int]] = []
    offset = 0
    for line_no, line in lines(source):
        if not line.endswith(b"\n"):
            break  # a torn last line (never written by a finished run)
        head = parse_json(line, source, line_no)
        place = order_key(position, head["item_id"], head.get("repeat", 0), head["candidates"])
        places.append((*place, offset, len(line)))
        offset += len(line)
    ordered = sorted(places, key=lambda p: p[:3])
    if ordered == places and offset == source.stat().st_size:
        os.replace(source, path)
        return
    tmp = path.with_suffix(".jsonl.tmp")
    with open_file(source) as handle, tmp.open("wb") as out:
        for *_, start, length in ordered:
            handle.seek(start)
            out.write(handle.read(length))
    os.replace(tmp, path)
    source.unlink()
