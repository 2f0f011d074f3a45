"""Reading an experiment file (or settings given in Python) into its runs."""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from harness.config.experiment import ExperimentConfig, SweepConfig
from harness.config.overrides import apply_overrides
from harness.config.protocols import PROTOCOLS
from harness.config.validation import (
    as_list,
    legacy_note,
    located,
    raise_all,
    unknown_keys,
    validate_blocks,
    validation_errors,
)
from harness.core.errors import ConfigError, DeprecatedSetting, HarnessError
from harness.core.yaml_files import key_lines, parse_yaml, yaml_text


def load_experiments(
    path: str | Path,
    *,
    overrides: Sequence[str] = (),
    replace: Mapping[str, Any] | None = None,
) -> list[ExperimentConfig]:
    """Parse and validate an experiment or sweep file, `--set KEY=VALUE` overrides (and
    `replace`, top-level settings) applied first; every error at once, each naming the file
    (and the overrides), the line, the field and the reason."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(path, None, "experiment file not found")
    text = yaml_text(path)
    raw = parse_yaml(text, path)
    if not isinstance(raw, dict):
        raise ConfigError(path, None, "expected a mapping of settings")
    lines = key_lines(text)
    return experiments_from(raw, path, overrides=overrides, replace=replace, lines=lines)


def experiments_from(
    raw: Mapping[str, Any],
    path: Path | str,
    *,
    overrides: Sequence[str] = (),
    replace: Mapping[str, Any] | None = None,
    lines: Mapping[tuple[str, ...], int] | None = None,
) -> list[ExperimentConfig]:
    """The runs of an experiment's settings (a file's mapping, or one given in Python): a
    sweep expands, and `name` names the sweep, not each run."""
    raw = dict(raw)
    if overrides:
        raw = apply_overrides(raw, overrides)
    raw.update(replace or {})
    lines = lines or {}
    given = [*overrides, *(f"{k}={v!r}" for k, v in (replace or {}).items())]
    source = f"{path} with --set {' --set '.join(given)}" if given else path
    is_sweep = any(isinstance(raw.get(k), list) for k in ("providers", "prompts", "inputs"))
    if is_sweep and "provider" in raw:
        error = ConfigError(source, "provider", "a sweep lists 'providers', not 'provider'")
        raise located(error, lines)
    model = SweepConfig if is_sweep else ExperimentConfig
    note = legacy_note(raw, is_sweep)
    if note:
        warnings.warn(f"{source}: {note}", DeprecatedSetting, stacklevel=2)
    # columns: of a hf:// dataset; a protocol's own block (`music-crs:`)
    known = set(model.model_fields) | {"columns"} | {n for n, p in PROTOCOLS.items() if p.options}
    problems = unknown_keys(raw, known, source, lines)
    raw, pins, failed = validate_blocks({k: v for k, v in raw.items() if k in known}, source)
    skip = {str(error.field).split(".")[0] for error in failed}  # the blocks said their own
    if is_sweep:
        raw = {**raw, **{k: as_list(raw[k]) for k in ("prompts", "inputs") if k in raw}}
    config = None
    try:
        config = model.model_validate({k: v for k, v in raw.items() if k not in skip})
    except ValidationError as exc:
        problems += validation_errors(exc, source, lines, model, skip)
    raise_all([*problems, *(located(error, lines) for error in failed)])
    assert config is not None
    try:
        if isinstance(config, SweepConfig):
            config._pins = pins
        runs = config.expand() if isinstance(config, SweepConfig) else [config]
    except ValueError as exc:
        raise ConfigError(source, None, str(exc)) from None
    try:
        check_prompts(source, runs)
    except ConfigError as exc:
        raise located(exc, lines) from None
    return runs


def check_prompts(path: Path | str, runs: list[ExperimentConfig]) -> None:
    """Fail on an unknown prompt variant or `prompt_options` key before anything runs."""
    from harness.calls.prompting.variants import VARIANTS, check_options

    for run in runs:
        try:
            check_options(run.prompt_options)
        except HarnessError as exc:
            raise ConfigError(path, "prompt_options", str(exc)) from None
        field = "prompts" if run.sweep is not None else "prompt"
        if run.prompt not in VARIANTS:
            reason = f"unknown prompt variant {run.prompt!r} (known: {', '.join(VARIANTS)})"
            raise ConfigError(path, field, reason)
        if run.kind == "scorer" and run.inputs.context_audio:
            reason = "inputs.context_audio goes to judges only; pin this scorer's inputs"
            raise ConfigError(path, f"{run.provider.name} ({run.name})", reason)
        if run.kind == "judge":
            try:
                variant = VARIANTS[run.prompt]
                variant.check_inputs(run.inputs.dialogue, run.inputs.context_audio)
                variant.check_protocol(run.protocol)
            except HarnessError as exc:
                raise ConfigError(path, field, str(exc)) from None
