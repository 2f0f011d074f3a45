"""Experiment files: one run, or a sweep that expands to one run per combination."""

from __future__ import annotations

import itertools
import re
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from harness.errors import ConfigError
from harness.metrics import MissingPolicy
from providers import REGISTRY
from providers._base import ProviderConfig


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
    summarizer: ProviderConfig | None = Field(
        default=None,
        description="judge that writes missing summaries (default: the run's provider)",
    )


class ExperimentConfig(_Common):
    provider: ProviderConfig
    prompt: str = "zero_shot"
    inputs: Inputs = Inputs()
    sweep: str | None = Field(default=None, description="name of the sweep this run came from")

    @property
    def results_subdir(self) -> Path:
        return Path(self.sweep, self.name) if self.sweep else Path(self.name)


class SweepConfig(_Common):
    providers: list[ProviderConfig] = Field(min_length=1)
    prompts: list[str] = Field(default_factory=lambda: ["zero_shot"], min_length=1)
    inputs: list[Inputs] = Field(default_factory=lambda: [Inputs()], min_length=1)

    def expand(self) -> list[ExperimentConfig]:
        runs = []
        common = self.model_dump(exclude={"providers", "prompts", "inputs", "name"})
        seen: set[tuple[str, str, Inputs]] = set()
        for entry, prompt, entry_inputs in itertools.product(
            self.providers, self.prompts, self.inputs
        ):
            provider, inputs = _pinned(entry, entry_inputs)
            combination = (provider.model_dump_json(), prompt, inputs)
            if combination in seen:  # pinned inputs made two combinations the same
                continue
            seen.add(combination)
            model = re.sub(r"[^A-Za-z0-9_.\-]+", "-", provider.model or "default").strip("-")
            kind = REGISTRY[provider.name].kind if provider.name in REGISTRY else "judge"
            parts = [
                provider.name,
                model,
                prompt if kind == "judge" else None,
                inputs.dialogue,
                inputs.music,
            ]
            run_name = "_".join(p for p in parts if p)
            runs.append(
                ExperimentConfig(
                    **common,
                    name=run_name,
                    provider=provider,
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


def _pinned(provider: ProviderConfig, inputs: Inputs) -> tuple[ProviderConfig, Inputs]:
    """A sweep's provider entry may pin inputs (`inputs: {music: caption}` for a scorer that
    reads captions only): they replace those fields in every combination for that provider."""
    pin = provider.extra("inputs")
    if pin is None:
        return provider, inputs
    try:
        pinned = Inputs.model_validate(pin)
    except ValidationError as exc:
        where, reason = _field_of(exc)
        raise ValueError(f"providers: {provider.name}: inputs.{where}: {reason}") from None
    bare = ProviderConfig.model_validate(provider.model_dump(exclude={"inputs"}))
    return bare, inputs.model_copy(update=pinned.model_dump(exclude_unset=True))


def _field_of(exc: ValidationError) -> tuple[str, str]:
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or "(top level)"
    return where, first["msg"].removeprefix("Value error, ")


def load_experiments(path: str | Path) -> list[ExperimentConfig]:
    """Parse an experiment or sweep file; errors name the file, the field and the reason."""
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
    try:
        if is_sweep:
            if "provider" in raw:
                raise ConfigError(path, "provider", "a sweep lists 'providers', not 'provider'")
            raw = {**raw, **{k: _as_list(raw[k]) for k in ("prompts", "inputs") if k in raw}}
            runs = SweepConfig.model_validate(raw).expand()
        else:
            runs = [ExperimentConfig.model_validate(raw)]
    except ValidationError as exc:
        raise ConfigError(path, *_field_of(exc)) from None
    except ValueError as exc:
        raise ConfigError(path, None, str(exc)) from None
    return runs


def check_registered(path: str | Path, runs: list[ExperimentConfig]) -> None:
    """Fail on an unknown provider or prompt name before anything runs."""
    from harness.variants import VARIANTS
    from providers import REGISTRY

    for run in runs:
        is_sweep = run.sweep is not None
        if run.provider.name not in REGISTRY:
            known = ", ".join(sorted(REGISTRY))
            field = "providers" if is_sweep else "provider.name"
            reason = f"unknown provider {run.provider.name!r} (known: {known})"
            raise ConfigError(path, field, reason)
        if run.prompt not in VARIANTS:
            field = "prompts" if is_sweep else "prompt"
            reason = f"unknown prompt variant {run.prompt!r} (known: {', '.join(VARIANTS)})"
            raise ConfigError(path, field, reason)


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]
