"""Every registry entry loads, derives from the base its declared kind names, and declares
options that refuse unknown keys; adding a provider is its module plus one registry line."""

from __future__ import annotations

from typing import Any

import pytest

from harness.core.errors import ConfigError
from harness.core.types import ProviderConfig
from providers import REGISTRY, Judge, Scorer, provider_class, provider_options
from providers.api.judge import ApiJudge


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_entry_class_matches_its_declared_kind(name: str) -> None:
    entry = REGISTRY[name]
    cls = provider_class(name)
    base = {"judge": Judge, "scorer": Scorer}[entry.kind]
    assert issubclass(cls, base), f"{name} is declared a {entry.kind}"
    assert cls.kind == entry.kind
    assert issubclass(cls.Options, ProviderConfig)
    assert cls.Options.model_config.get("extra") == "forbid"
    assert entry.summary and (entry.extra is None or entry.extra in {"api", "embed", "local"})
    # The API judges are the `api` extra's (the provenance test of providers/api/judge.py
    # sends a request through each of them)
    assert issubclass(cls, ApiJudge) == (entry.extra == "api")


# the options a provider cannot do without
REQUIRED: dict[str, dict[str, Any]] = {
    "jury": {"members": [{"name": "mock"}, {"name": "mock", "seed": 1}]},
    "simulated": {"dataset": "data/sample"},
}


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_unknown_option_is_refused_naming_the_key(name: str) -> None:
    block = {"name": name, **REQUIRED.get(name, {}), "temprature": 0.5}
    with pytest.raises(ConfigError, match=rf"provider\.temprature: provider '{name}' has no"):
        provider_options(block)


def test_provider_specific_options_validate() -> None:
    assert provider_options({"name": "mock", "delay_s": 0.5}).model_dump()["delay_s"] == 0.5
    with pytest.raises(ConfigError, match=r"provider\.batch_size: Input should be greater"):
        provider_options({"name": "qwen-omni", "batch_size": 0})
    with pytest.raises(ConfigError, match=r"provider\.json_mode"):
        provider_options({"name": "gemini", "json_mode": "yaml"})
    with pytest.raises(ConfigError, match=r"provider\.name: unknown provider 'nope'"):
        provider_options({"name": "nope"})
