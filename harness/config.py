"""Experiment files: one run, or a sweep that expands to one run per combination.

Every provider block (`provider:`, each entry of `providers:`, `summarizer:`) is validated
against its provider's own options when the file loads, so an unknown or misspelt key is one
line naming the file, the block and the key, before anything runs.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError

from harness.errors import ConfigError
from harness.metrics import MissingPolicy
from harness.types import ProviderConfig
from providers import REGISTRY, ProviderBlock, provider_options


def provider_config(name: str, **options: Any) -> ProviderConfig:
    """`provider_config("gemini", model="gemini-2.5-pro")`: a validated provider block."""
    return provider_options({"name": name, **options})


class Inputs(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    dialogue: Literal["full", "summary"] = "full"
    music: Literal["audio", "caption"] = "audio"


class _Common(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$")
    dataset: Path
    prompt_options: dict[str, Any] = Field(default_factory=dict)
    repeats: int = Field(default=1, ge=1)
    missing: MissingPolicy = "worst"
    seed: int = 0
    limit: int | None = Field(default=None, gt=0, description="evaluate only the first N items")
    n_bootstrap: int = Field(default=1000, ge=10)
    summarizer: ProviderBlock | None = Field(
        default=None,
        description="judge that writes missing summaries (default: the run's provider)",
    )


class ExperimentConfig(_Common):
    provider: ProviderBlock
    prompt: str = "zero_shot"
    inputs: Inputs = Inputs()
    sweep: str | None = Field(default=None, description="name of the sweep this run came from")

    @property
    def results_subdir(self) -> Path:
        return Path(self.sweep, self.name) if self.sweep else Path(self.name)

    @property
    def kind(self) -> Literal["judge", "scorer"]:
        return REGISTRY[self.provider.name].kind


class SweepConfig(_Common):
    providers: list[ProviderBlock] = Field(min_length=1)
    prompts: list[str] = Field(default_factory=lambda: ["zero_shot"], min_length=1)
    inputs: list[Inputs] = Field(default_factory=lambda: [Inputs()], min_length=1)
    # Inputs a provider entry pins (`inputs: {music: caption}` for a caption-only scorer).
    _pins: list[Inputs | None] = PrivateAttr(default_factory=list)

    def expand(self) -> list[ExperimentConfig]:
        runs = []
        common = self.model_dump(exclude={"providers", "prompts", "inputs", "name", "summarizer"})
        pins = self._pins or [None] * len(self.providers)
        seen: set[tuple[str, str, Inputs]] = set()
        for (provider, pin), prompt, entry_inputs in itertools.product(
            zip(self.providers, pins, strict=True), self.prompts, self.inputs
        ):
            inputs = entry_inputs
            if pin is not None:
                inputs = entry_inputs.model_copy(update=pin.model_dump(exclude_unset=True))
            combination = (provider.model_dump_json(), prompt, inputs)
            if combination in seen:  # pinned inputs made two combinations the same
                continue
            seen.add(combination)
            model = re.sub(r"[^A-Za-z0-9_.\-]+", "-", provider.model or "default").strip("-")
            kind = REGISTRY[provider.name].kind
            parts = [
                provider.name,
                model,
                prompt if kind == "judge" else None,
                inputs.dialogue,
                inputs.music,
            ]
            runs.append(
                ExperimentConfig(
                    **common,
                    name="_".join(p for p in parts if p),
                    provider=provider,
                    summarizer=self.summarizer,
                    prompt=prompt,
                    inputs=inputs,
                    sweep=self.name,
                )
            )
        names = [r.name for r in runs]
        if len(set(names)) != len(names):
            raise ValueError(
                "two runs of the sweep get the same name: give the providers distinct models"
            )
        return runs


def _field_of(exc: ValidationError) -> tuple[str, str]:
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or "(top level)"
    return where, first["msg"].removeprefix("Value error, ")


def _validate_blocks(raw: dict[str, Any], path: Path) -> tuple[dict[str, Any], list[Any]]:
    """The file's settings with every provider block validated against its provider's
    options, and the inputs each sweep entry pins."""
    raw = dict(raw)
    for field in ("provider", "summarizer"):
        if isinstance(raw.get(field), Mapping):
            raw[field] = provider_options(raw[field], source=path, field=field)
    pins: list[Any] = []
    entries = raw.get("providers")
    if isinstance(entries, list):
        validated = []
        for entry in entries:
            if not isinstance(entry, Mapping):
                validated.append(entry)  # pydantic names the problem
                pins.append(None)
                continue
            block = dict(entry)
            pins.append(_pinned_inputs(block.pop("inputs", None), block, path))
            validated.append(
                provider_options(block, source=path, field="providers", name_field="providers")
            )
        raw["providers"] = validated
    return raw, pins


def _pinned_inputs(pin: Any, block: Mapping[str, Any], path: Path) -> Inputs | None:
    if pin is None:
        return None
    try:
        return Inputs.model_validate(pin)
    except ValidationError as exc:
        where, reason = _field_of(exc)
        field = f"providers: {block.get('name')}"
        raise ConfigError(path, field, f"inputs.{where}: {reason}") from None


def load_experiments(path: str | Path) -> list[ExperimentConfig]:
    """Parse and validate an experiment or sweep file (providers, their options, prompt
    variants); errors name the file, the field and the reason."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(path, None, "experiment file not found")
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark else None
        raise ConfigError(path, where, f"not valid YAML ({getattr(exc, 'problem', exc)})") from None
    if not isinstance(raw, dict):
        raise ConfigError(path, None, "expected a mapping of settings")
    is_sweep = any(isinstance(raw.get(k), list) for k in ("providers", "prompts", "inputs"))
    if is_sweep and "provider" in raw:
        raise ConfigError(path, "provider", "a sweep lists 'providers', not 'provider'")
    raw, pins = _validate_blocks(raw, path)
    try:
        if is_sweep:
            raw = {**raw, **{k: _as_list(raw[k]) for k in ("prompts", "inputs") if k in raw}}
            sweep = SweepConfig.model_validate(raw)
            sweep._pins = pins
            runs = sweep.expand()
        else:
            runs = [ExperimentConfig.model_validate(raw)]
    except ValidationError as exc:
        raise ConfigError(path, *_field_of(exc)) from None
    except ValueError as exc:
        raise ConfigError(path, None, str(exc)) from None
    _check_prompts(path, runs)
    return runs


def _check_prompts(path: Path, runs: list[ExperimentConfig]) -> None:
    """Fail on an unknown prompt variant or `prompt_options` key before anything runs."""
    from harness.errors import HarnessError
    from harness.variants import VARIANTS, check_options

    for run in runs:
        try:
            check_options(run.prompt_options)
        except HarnessError as exc:
            raise ConfigError(path, "prompt_options", str(exc)) from None
        if run.prompt not in VARIANTS:
            field = "prompts" if run.sweep is not None else "prompt"
            reason = f"unknown prompt variant {run.prompt!r} (known: {', '.join(VARIANTS)})"
            raise ConfigError(path, field, reason)


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]
