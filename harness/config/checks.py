"""Checks of the runs an experiment file gives, before any of them starts: which runs
`--only` selects, and that their dataset folders exist."""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence
from pathlib import Path

from harness.config.experiment import ExperimentConfig
from harness.core.errors import ConfigError
from harness.core.yaml_files import key_lines, yaml_text


def select_runs(runs: list[ExperimentConfig], patterns: Sequence[str]) -> list[ExperimentConfig]:
    """The runs (all without patterns) whose name matches a shell pattern of `--only`; a
    pattern matching no run is an error naming the runs."""
    if not patterns:
        return runs
    unmatched = [p for p in patterns if not any(fnmatch.fnmatchcase(r.name, p) for r in runs)]
    if unmatched:
        names = ", ".join(r.name for r in runs)
        raise ConfigError(
            "--only", ", ".join(unmatched), f"matches no run of the experiment (runs: {names})"
        )
    return [r for r in runs if any(fnmatch.fnmatchcase(r.name, p) for p in patterns)]


def check_datasets(path: str | Path, runs: Sequence[ExperimentConfig]) -> None:
    """Every dataset folder the runs read exists, else one line naming the file, the line
    of `dataset:` and where the folder was looked for."""
    path = Path(path)
    local = (run.dataset for run in runs if run.hf_source is None)  # hf:// is fetched on use
    for folder in dict.fromkeys(local):
        if folder.is_dir() or folder.is_file():  # a file: a protocol's own dataset form
            continue
        lines = key_lines(yaml_text(path)) if path.is_file() else {}
        where = f"line {lines[('dataset',)]}: dataset" if ("dataset",) in lines else "dataset"
        reason = f"folder {str(folder)!r} not found (looked for {folder.resolve()}"
        if not folder.is_absolute():
            reason += f"; a relative path is read from the current folder, {Path.cwd()}"
        raise ConfigError(path, where, reason + ")")
