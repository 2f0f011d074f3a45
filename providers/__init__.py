"""Provider registry: a module is imported only when its provider is used (SDKs and torch stay
optional). A provider is one module plus one line in `REGISTRY`, or an entry point
`bgm_judge.providers`; its kind is declared here once (tests/providers/test_registry.py)."""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, SerializeAsAny, ValidationError

from harness.core.errors import ConfigError, ConfigErrors, did_you_mean
from harness.core.plugins import Registry
from harness.core.types import ProviderConfig
from providers.base import Judge, Provider, Scorer

__all__ = [
    "REGISTRY",
    "Entry",
    "Judge",
    "Provider",
    "ProviderBlock",
    "Scorer",
    "create_provider",
    "entry",
    "provider_class",
    "provider_options",
]


@dataclass(frozen=True)
class Entry:
    target: str  # "module:Class"
    kind: Literal["judge", "scorer"]
    summary: str
    extra: str | None = None  # the pip extra that provides its dependencies

    def load(self, name: str) -> type[Provider]:
        """The provider's class (imports its module, not yet its SDK or model)."""
        module_name, class_name = self.target.split(":")
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            hint = f"; install it with: pip install 'bgm-judge[{self.extra}]'" if self.extra else ""
            raise ImportError(f"provider {name!r} needs {exc.name}{hint}") from exc
        provider: type[Provider] = getattr(module, class_name)
        return provider


def _plugin_entry(name: str, loaded: Any) -> Entry:
    """A plugin's provider class as an entry (summary: its docstring's first line)."""
    if not (isinstance(loaded, type) and issubclass(loaded, Judge | Scorer)):
        raise TypeError(f"{loaded!r} is not a Judge or Scorer class")
    summary = (loaded.__doc__ or "").strip().partition("\n")[0]
    kind: Literal["judge", "scorer"] = "scorer" if issubclass(loaded, Scorer) else "judge"
    return Entry(f"{loaded.__module__}:{loaded.__qualname__}", kind, summary)


_BUILT_IN: dict[str, Entry] = {
    "mock": Entry(
        "providers.mock:MockJudge",
        "judge",
        "Scripted answers for tests (valid, malformed, failing)",
    ),
    "jury": Entry(
        "providers.jury:Jury", "judge", "Judges answering together (mean, Borda or majority)"
    ),
    "simulated": Entry(
        "providers.simulated:SimulatedJudge",
        "judge",
        "A seeded judge of known position bias, noise and human agreement (for validation)",
    ),
    "random": Entry(
        "providers.scorers.random_baseline:RandomScorer", "scorer", "Seeded uniform random baseline"
    ),
    "text-embedding": Entry(
        "providers.scorers.text_embedding:TextEmbeddingScorer",
        "scorer",
        "Cosine between dialogue text and clip caption (sentence-transformers, offline)",
        "embed",
    ),
    "gemini": Entry(
        "providers.api.gemini:GeminiJudge",
        "judge",
        "Gemini API (google-genai), audio inline",
        "api",
    ),
    "openai-audio": Entry(
        "providers.api.openai_chat:OpenAIAudioJudge",
        "judge",
        "GPT-4o-audio / gpt-audio on the OpenAI API (chat completions)",
        "api",
    ),
    "openai": Entry(
        "providers.api.openai_chat:OpenAIJudge",
        "judge",
        "Any chat model on the OpenAI API, e.g. GPT-5-mini for the text-only tables",
        "api",
    ),
    "openai-compatible": Entry(
        "providers.api.openai_chat:OpenAICompatibleJudge",
        "judge",
        "Any OpenAI-compatible server, e.g. vLLM serving Qwen2.5-Omni (one or several URLs)",
        "api",
    ),
    "qwen-omni": Entry(
        "providers.local.qwen_omni:QwenOmniJudge",
        "judge",
        "Qwen2.5-Omni thinker, local (transformers)",
        "local",
    ),
    "phi4-multimodal": Entry(
        "providers.local.phi4_multimodal:Phi4MultimodalJudge",
        "judge",
        "Phi-4-multimodal, local (transformers)",
        "local",
    ),
    "audio-flamingo-3": Entry(
        "providers.local.audio_flamingo:AudioFlamingo3Judge",
        "judge",
        "Audio Flamingo 3, local (transformers)",
        "local",
    ),
    "music-flamingo": Entry(
        "providers.local.audio_flamingo:MusicFlamingoJudge",
        "judge",
        "Music Flamingo, local (transformers)",
        "local",
    ),
    "gguf": Entry(
        "providers.local.gguf:GgufJudge",
        "judge",
        "Any GGUF chat model, text only, local (transformers); default: packaged SmolLM2-135M",
        "local",
    ),
    "ms-clap": Entry(
        "providers.scorers.ms_clap:MsClapScorer",
        "scorer",
        "Microsoft CLAP (msclap 2022 or 2023) cosine of dialogue text and clip audio, local",
        "local",
    ),
    "paraclap": Entry(
        "providers.scorers.paraclap:ParaClapScorer",
        "scorer",
        "ParaCLAP (paralinguistic CLAP) cosine of dialogue text and clip audio, local",
        "local",
    ),
    "clap": Entry(
        "providers.scorers.clap:ClapScorer",
        "scorer",
        "CLAP cosine of dialogue text and clip audio, local (transformers)",
        "local",
    ),
    "musicnn": Entry(
        "providers.scorers.musicnn.scorer:MusicnnScorer", "scorer", "musicnn tags as text", "embed"
    ),
    "popularity": Entry(
        "providers.scorers.popularity:PopularityScorer",
        "scorer",
        "How often a candidate appears in the candidate lists of its group (MusiCRS baseline)",
    ),
}
REGISTRY: Registry[Entry] = Registry("providers", _plugin_entry, _BUILT_IN)


def entry(name: str, source: Path | str = "experiment file", field: str = "provider") -> Entry:
    try:
        return REGISTRY[name]
    except KeyError:
        known = did_you_mean(name, REGISTRY) or f" (known: {', '.join(sorted(REGISTRY))})"
        raise ConfigError(source, f"{field}.name", f"unknown provider {name!r}{known}") from None


def provider_options(
    block: Mapping[str, Any] | ProviderConfig,
    *,
    source: Path | str = "experiment file",
    field: str = "provider",
) -> ProviderConfig:
    """A `provider:` block validated against its provider's `Options`; a ConfigError (one per
    wrong key) names the file, the block, the key and the nearest known name."""
    raw = block.model_dump(exclude_unset=True) if isinstance(block, ProviderConfig) else block
    if not isinstance(raw, Mapping):
        raise ConfigError(source, field, "expected a mapping such as {name: random}")
    name = raw.get("name")
    if not isinstance(name, str):
        raise ConfigError(source, f"{field}.name", "the provider's registry name is required")
    options = entry(name, source, field).load(name).Options
    try:
        return options.model_validate(dict(raw))
    except ValidationError as exc:
        errors = [_option_error(name, options, error, source, field) for error in exc.errors()]
        raise (errors[0] if len(errors) == 1 else ConfigErrors(errors)) from None


def _option_error(
    name: str, options: type[ProviderConfig], error: Any, source: Path | str, field: str
) -> ConfigError:
    key = ".".join(str(p) for p in error["loc"])
    reason = error["msg"].removeprefix("Value error, ")
    if error["type"] == "extra_forbidden":
        known = did_you_mean(key, options.model_fields)
        known = known or f" (options: {', '.join(sorted(options.model_fields))})"
        reason = f"provider {name!r} has no option {key!r}{known}"
        if "key" in key.lower():
            reason += (
                "; API keys come from the environment only (GEMINI_API_KEY, "
                "OPENAI_API_KEY, or the variable named by api_key_env)"
            )
    return ConfigError(source, f"{field}.{key}", reason)


def provider_class(name: str) -> type[Provider]:
    return entry(name).load(name)


def create_provider(config: ProviderConfig) -> Provider:
    return provider_class(config.name)(config)


def _as_provider_options(value: Any) -> Any:
    """A mapping or bare ProviderConfig as the provider's own options (programmatic use)."""
    if isinstance(value, Mapping) or type(value) is ProviderConfig:
        return provider_options(value)
    return value


# A provider block inside a pydantic model: validated against the provider's own options,
# and serialised with them (not only the common fields).
ProviderBlock = Annotated[SerializeAsAny[ProviderConfig], BeforeValidator(_as_provider_options)]
