"""What `harness merge` checks of each shard before it trusts an answer of it: its records are
the ones its run.json counts (none torn, dropped, doubled or edited), of its items, their
candidates and the run's repeats; its run.json names the run's model; every shard ran on the
dataset as it is now and rendered the same templates. Another harness version is a warning."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from harness._version import __version__
from harness.config.experiment import ExperimentConfig
from harness.core.dataset import Dataset, pydantic_reason
from harness.core.errors import DatasetError, HarnessError
from harness.core.files import lines, sha256_of
from harness.core.records import Record
from harness.core.sharding import Marker

AGAIN = "run its `harness run --shard` command again"


class _Cost(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)
    model: str | None = None


class _Provenance(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)
    harness_version: str | None = None


class ShardStats(BaseModel):
    """A shard's run.json as merge reads it: the counts its records must match."""

    model_config = ConfigDict(extra="allow", strict=True)
    calls: int = Field(ge=0)
    errors: int = Field(default=0, ge=0)
    parse_failures: int = Field(default=0, ge=0)
    cost: _Cost | None = None
    templates: dict[str, str] = Field(default_factory=dict)
    records_sha256: str | None = None  # (a shard of harness 0.2 has none)
    provenance: _Provenance | None = None


def shard_stats(folder: Path, stats: Mapping[str, Any]) -> ShardStats:
    try:
        return ShardStats.model_validate(stats)
    except ValidationError as exc:
        raise HarnessError(f"{folder / 'run.json'}: {pydantic_reason(exc)}") from None


def shard_records(
    folder: Path, marker: Marker, stats: ShardStats, dataset: Dataset, repeats: int
) -> list[Record]:
    """The shard's records, each checked, and all of them against its run.json."""
    path = folder / "records.jsonl"
    if stats.records_sha256 is not None and sha256_of(path) != stats.records_sha256:
        raise HarnessError(
            f"{path}: changed since the shard's run wrote it (not the SHA-256 its run.json "
            f"records): {AGAIN}"
        )
    held = {item_id: set(dataset.item(item_id).candidates) for item_id in marker.items}
    records: list[Record] = []
    seen: set[bytes] = set()
    for line_no, raw in lines(path):
        if not raw.endswith(b"\n"):
            raise DatasetError(path, line_no, f"a torn last line (the run was cut short): {AGAIN}")
        digest = hashlib.blake2b(raw, digest_size=16).digest()
        if digest in seen:
            raise DatasetError(path, line_no, "a record given twice")
        seen.add(digest)
        try:
            record = Record.model_validate_json(raw)
        except ValidationError as exc:
            reason = f"not a record of a run ({pydantic_reason(exc)})"
            raise DatasetError(path, line_no, reason) from None
        candidates = held.get(record.item_id)
        if candidates is None:
            reason = (
                f"a record of item {record.item_id!r}, which shard {marker.shard} does not hold"
            )
            raise DatasetError(path, line_no, reason)
        if not record.repeat < repeats:
            reason = f"repeat {record.repeat} in a run of {repeats} repeat(s)"
            raise DatasetError(path, line_no, reason)
        unknown = [c for c in (*record.candidates, *record.scores) if c not in candidates]
        if unknown:
            reason = f"{unknown[0]!r} is not a candidate of item {record.item_id!r}"
            raise DatasetError(path, line_no, reason)
        records.append(record)
    counted = {
        "calls": len(records),
        "errors": sum(r.error is not None for r in records),
        "parse_failures": sum(r.parse_error is not None for r in records),
    }
    for name, count in counted.items():
        if count != getattr(stats, name):
            raise HarnessError(
                f"{path}: {count} {name} in its records, {getattr(stats, name)} in its run.json "
                f"(the shard's files do not belong together): {AGAIN}"
            )
    return records


def check_content(
    folders: Sequence[Path], markers: Sequence[Marker], dataset: Dataset, config: ExperimentConfig
) -> None:
    """Each shard ran on its items as the dataset holds them now (content, not only ids)."""
    for folder, marker in zip(folders, markers, strict=True):
        if marker.dataset_sha256 is None:
            continue
        now = dataset.subset(marker.items).content_sha256(audio=config.sends_audio)
        if now != marker.dataset_sha256:
            raise HarnessError(
                f"{folder}: the dataset's items changed since shard {marker.shard} ran (their "
                "text, candidates, captions or audio): run the shards again"
            )


def _numbers_alike(blocks: Sequence[Mapping[str, Any]], where: str) -> None:
    """A count is a number in every shard's run.json or in none (merge adds them up)."""
    for key in dict.fromkeys(k for block in blocks for k in block):
        values = [block[key] for block in blocks if key in block]
        numbers = [isinstance(v, int | float) and not isinstance(v, bool) for v in values]
        if any(numbers) and not all(numbers):
            raise HarnessError(
                f"{where}{key} is a number in one shard's run.json, not in another's"
            )
        if all(isinstance(v, Mapping) for v in values):
            _numbers_alike(values, f"{where}{key}.")


def check_alike(
    folders: Sequence[Path],
    raw: Sequence[Mapping[str, Any]],
    stats: Sequence[ShardStats],
    config: ExperimentConfig,
) -> list[str]:
    """The shards' counts are numbers alike, their answers came from one model and one
    rendering of each template; the warnings for shards of another harness version."""
    _numbers_alike(raw, "")
    first = folders[0]
    models = [(s.cost.model if s.cost else None) for s in stats]
    configured = config.provider.model
    for folder, model in zip(folders, models, strict=True):
        expected = configured or models[0]
        if model is not None and expected is not None and model != expected:
            raise HarnessError(
                f"{folder / 'run.json'}: answers of model {model!r}, where the run's is "
                f"{expected!r}: merge the shards of one run"
            )
    for folder, shard in zip(folders[1:], stats[1:], strict=True):
        if bool(stats[0].templates) != bool(shard.templates):  # (one of an older build)
            raise HarnessError(
                f"{first} and {folder}: one's run.json records its prompt template digests, the "
                "other's none, so their templates cannot be compared: run the shards again"
            )
        for name in stats[0].templates.keys() & shard.templates.keys():
            if stats[0].templates[name] != shard.templates[name]:
                raise HarnessError(
                    f"{first} and {folder} rendered prompt template {name} differently (it was "
                    "edited between their runs): run the shards again with one version of it"
                )
    versions = {
        str(folder): v
        for folder, s in zip(folders, stats, strict=True)
        if (v := s.provenance.harness_version if s.provenance else None) not in (None, __version__)
    }
    return [
        f"{folder}: made by harness {version}, this is {__version__}; its answers may differ "
        "from this version's (check the changelog, or run the shards again)"
        for folder, version in versions.items()
    ]
