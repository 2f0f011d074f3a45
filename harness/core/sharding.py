"""Sharded runs: `--shard I/N` runs the items whose id hashes to I (BLAKE2b modulo N: adding
items moves no other) into a folder of its own, with the `shard.json` `harness merge` checks."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from harness.core.dataset import Dataset, pydantic_reason
from harness.core.errors import HarnessError
from harness.core.files import read_json_object, write_atomic

SHARD_FILE = "shard.json"
SHARD_FORMAT = 1
MAX_SHARDS = 100_000  # a Slurm array's tasks; each shard holds at least one item
_SPEC = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")


def shard_of(item_id: str, count: int) -> int:
    """The shard (0..count-1) of an item: BLAKE2b of its id (UTF-8), modulo `count`."""
    digest = hashlib.blake2b(item_id.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big") % count


@dataclass(frozen=True, order=True)
class Shard:
    """Shard `index` of `count` (0-based, as Slurm's `$SLURM_ARRAY_TASK_ID`)."""

    index: int
    count: int

    def __post_init__(self) -> None:
        if self.count < 1 or not 0 <= self.index < self.count:
            raise HarnessError(
                f"--shard {self.index}/{self.count}: the index must be 0..N-1 and N >= 1 "
                "(e.g. --shard 0/4 ... --shard 3/4)"
            )

    @classmethod
    def parse(cls, text: str) -> Shard:
        match = _SPEC.match(text)
        if match is None:
            raise HarnessError(f"--shard takes I/N such as 0/4 (shards 0..N-1), not {text!r}")
        return cls(int(match.group(1)), int(match.group(2)))

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"

    @property
    def suffix(self) -> str:
        """What the shard's run folder adds to the run's name: `.shard-0-of-4`."""
        return f".shard-{self.index}-of-{self.count}"

    def folder(self, results_dir: Path, subdir: Path) -> Path:
        return results_dir / subdir.with_name(subdir.name + self.suffix)

    def holds(self, item_id: str) -> bool:
        return shard_of(item_id, self.count) == self.index

    def select(self, dataset: Dataset) -> Dataset:
        """The shard's items (in dataset order); a scorer still fits on all (`population`)."""
        ids = [item.id for item in dataset.items if self.holds(item.id)]
        if not ids:
            raise HarnessError(
                f"shard {self} holds none of the {len(dataset.items)} item(s): "
                "run with fewer shards"
            )
        population = dataset.population if dataset.population is not None else dataset.items
        return dataset.subset(ids).model_copy(update={"population": population})

    def marker(self, dataset: Dataset, shard_items: Dataset, content: str) -> dict[str, Any]:
        """The content of shard.json (`content`: the shard items' `content_sha256`)."""
        return {
            "format": SHARD_FORMAT,
            "shard": str(self),
            "index": self.index,
            "count": self.count,
            "dataset_items": len(dataset.items),
            "items": [item.id for item in shard_items.items],
            "dataset_sha256": content,
        }

    def write_marker(
        self, folder: Path, dataset: Dataset, shard_items: Dataset, content: str
    ) -> None:
        marker = self.marker(dataset, shard_items, content)
        write_atomic(folder / SHARD_FILE, json.dumps(marker, indent=2) + "\n")


class Marker(BaseModel):
    """shard.json as read back: what `Shard.marker` writes, checked."""

    model_config = ConfigDict(extra="allow", strict=True)
    format: int = Field(default=SHARD_FORMAT, ge=1, le=SHARD_FORMAT)  # (a newer one: refused)
    index: int = Field(ge=0)
    count: int = Field(ge=1, le=MAX_SHARDS)
    dataset_items: int = Field(ge=1)
    items: list[str]
    dataset_sha256: str | None = None  # (a shard of harness 0.2 has none)

    @model_validator(mode="after")
    def _consistent(self) -> Marker:
        if self.index >= self.count:
            raise ValueError(f"index {self.index} is not one of shards 0..{self.count - 1}")
        if self.count > self.dataset_items or len(self.items) > self.dataset_items:
            raise ValueError(f"more shards or items than the dataset's {self.dataset_items} items")
        return self

    @property
    def shard(self) -> Shard:
        return Shard(self.index, self.count)


def read_marker(folder: Path) -> Marker:
    """The shard.json of a shard's folder; HarnessError (one line naming it) otherwise."""
    path = folder / SHARD_FILE
    value = read_json_object(path, max_values=10 * MAX_SHARDS)
    try:
        return Marker.model_validate(value)
    except ValidationError as exc:
        raise HarnessError(f"{path}: {pydantic_reason(exc)}") from None
