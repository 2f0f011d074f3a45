"""A run folder's config.yaml, run.json and metrics.json read back as untrusted files (a disk,
a sync tool or a person may have changed them). Every reader of a run folder goes through
here: a file too large, not UTF-8, not valid YAML or JSON, not a mapping, or with settings of
the wrong type is one HarnessError line naming the file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from harness.core.dataset import pydantic_reason
from harness.core.errors import ConfigError, HarnessError
from harness.core.files import TooLarge, bounded, read_json
from harness.core.predictions import MissingPolicy
from harness.core.yaml_files import load_yaml


class _Metrics(BaseModel):
    model_config = ConfigDict(extra="allow")
    at: list[int] = Field(default_factory=list)
    merge_groups: dict[str, str] = Field(default_factory=dict)


class _SavedConfig(BaseModel):
    """The settings of a saved config.yaml that are read back, with their types."""

    model_config = ConfigDict(extra="allow")
    name: str | None = None
    dataset: str | None = None
    limit: int | None = Field(default=None, ge=1)
    repeats: int | None = Field(default=None, ge=1)
    missing: MissingPolicy | None = None
    n_bootstrap: int | None = Field(default=None, ge=10, le=1_000_000)
    seed: int | None = Field(default=None, ge=0)
    prompt: str | None = None
    provider: dict[str, Any] | None = None
    inputs: dict[str, Any] | None = None
    metrics: _Metrics | None = None


class _SavedStats(BaseModel):
    """The blocks of run.json that are read back; a count may be missing."""

    model_config = ConfigDict(extra="allow")
    provenance: dict[str, Any] | None = None
    cost: dict[str, Any] | None = None
    summaries_cost: dict[str, Any] | None = None
    batch: dict[str, Any] | None = None


def _checked(path: Path, value: Any, model: type[BaseModel]) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise HarnessError(f"{path}: not a mapping of settings ({type(value).__name__})")
    try:
        bounded(value)
        model.model_validate(value)
    except TooLarge as exc:
        raise HarnessError(f"{path}: {exc}") from None
    except ValidationError as exc:
        raise HarnessError(f"{path}: {pydantic_reason(exc)}") from None
    return value


def read_run_config(path: Path) -> dict[str, Any]:
    """A run folder's config.yaml, checked; HarnessError (one line naming it) otherwise."""
    try:
        value = load_yaml(path)
    except ConfigError as exc:
        raise HarnessError(str(exc)) from None
    return _checked(path, value, _SavedConfig)


def read_json_file(path: Path, *, model: type[BaseModel] | None = None) -> dict[str, Any]:
    """A JSON object a run folder holds (run.json, metrics.json), checked; {} when the file
    is not there; HarnessError (one line naming it) when it cannot be read as one."""
    if not path.exists():
        return {}
    return _checked(path, read_json(path), model or _Any)


def read_run_json(path: Path) -> dict[str, Any]:
    return read_json_file(path, model=_SavedStats)


class _Any(BaseModel):
    model_config = ConfigDict(extra="allow")


def read_or_empty(path: Path) -> dict[str, Any]:
    """config.yaml, run.json or metrics.json for a listing that must go on: {} when the file
    is absent or cannot be read (`harness runs` shows `?` for it)."""
    try:
        if path.suffix == ".yaml":
            return read_run_config(path) if path.is_file() else {}
        return read_run_json(path) if path.name == "run.json" else read_json_file(path)
    except HarnessError:
        return {}
