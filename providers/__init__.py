"""Provider registry. Modules are imported only when their provider is used, so SDKs and
torch stay optional: adding a provider is one module plus one line in `REGISTRY`."""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from providers._base import (
    ChatRequest,
    ChatResponse,
    Judge,
    Provider,
    ProviderConfig,
    ScoreCandidate,
    Scorer,
    ScoreRequest,
)

__all__ = [
    "REGISTRY",
    "ChatRequest",
    "ChatResponse",
    "Judge",
    "Provider",
    "ProviderConfig",
    "ScoreCandidate",
    "ScoreRequest",
    "Scorer",
    "create_provider",
]


@dataclass(frozen=True)
class Entry:
    target: str  # "module:Class"
    kind: str
    summary: str
    extra: str | None = None  # the pip extra that provides its dependencies


REGISTRY: dict[str, Entry] = {
    "mock": Entry(
        "providers.mock:MockJudge",
        "judge",
        "Scripted answers for tests (valid, malformed, failing)",
    ),
    "random": Entry(
        "providers.random_baseline:RandomScorer", "scorer", "Seeded uniform random baseline"
    ),
    "text-embedding": Entry(
        "providers.text_embedding:TextEmbeddingScorer",
        "scorer",
        "Cosine between dialogue text and clip caption (sentence-transformers, offline)",
        "embed",
    ),
    "gemini": Entry(
        "providers.gemini:GeminiJudge", "judge", "Gemini API (google-genai), audio inline", "api"
    ),
    "openai-audio": Entry(
        "providers.openai_chat:OpenAIAudioJudge",
        "judge",
        "GPT-4o-audio / gpt-audio on the OpenAI API (chat completions)",
        "api",
    ),
    "openai-compatible": Entry(
        "providers.openai_chat:OpenAICompatibleJudge",
        "judge",
        "Any OpenAI-compatible server, e.g. vLLM serving Qwen2.5-Omni (one or several URLs)",
        "api",
    ),
    "qwen-omni": Entry(
        "providers.qwen_omni:QwenOmniJudge",
        "judge",
        "Qwen2.5-Omni thinker, local (transformers)",
        "local",
    ),
    "phi4-multimodal": Entry(
        "providers.phi4_multimodal:Phi4MultimodalJudge",
        "judge",
        "Phi-4-multimodal, local (transformers)",
        "local",
    ),
    "audio-flamingo-3": Entry(
        "providers.audio_flamingo:AudioFlamingo3Judge",
        "judge",
        "Audio Flamingo 3, local (transformers)",
        "local",
    ),
    "music-flamingo": Entry(
        "providers.audio_flamingo:MusicFlamingoJudge",
        "judge",
        "Music Flamingo, local (transformers)",
        "local",
    ),
    "clap": Entry(
        "providers.clap:ClapScorer",
        "scorer",
        "CLAP cosine of dialogue text and clip audio, local (transformers)",
        "local",
    ),
}


def create_provider(config: ProviderConfig) -> Provider:
    try:
        entry = REGISTRY[config.name]
    except KeyError:
        known = ", ".join(sorted(REGISTRY))
        raise ValueError(f"unknown provider {config.name!r} (known: {known})") from None
    module_name, class_name = entry.target.split(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        hint = f"; install it with: pip install 'bgm-judge[{entry.extra}]'" if entry.extra else ""
        raise ImportError(f"provider {config.name!r} needs {exc.name}{hint}") from exc
    provider_class: type[Provider] = getattr(module, class_name)
    return provider_class(config)
