"""CLAP scorers (`ClapModel`): cosine between the dialogue (full text or summary) and each
clip, for any CLAP checkpoint (`laion/clap-htsat-unfused`, `laion/larger_clap_music`, ...)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray
from pydantic import Field

from harness.core.types import ProviderConfig
from providers.local._settings import LocalOptions, hf, load_model
from providers.scorers._two_tower import EmbeddingScorer, Vectors, fit_window

log = logging.getLogger(__name__)


@dataclass
class _Loaded:
    model: Any
    tokenizer: Any
    extractor: Any
    max_text_tokens: int


class ClapOptions(LocalOptions):
    max_text_tokens: int | None = Field(
        default=None, gt=0, description="truncate the query to this many tokens"
    )


class ClapScorer(EmbeddingScorer):
    default_model = "laion/clap-htsat-unfused"
    sampling_rate = 48000
    unit_vectors = True  # ClapModel's features are normalised already
    Options = ClapOptions
    config: ClapOptions

    def __init__(self, config: ProviderConfig) -> None:
        super().__init__(config)
        self._max_text_tokens = self.config.max_text_tokens
        self.truncated_queries = 0

    def identity(self) -> dict[str, Any]:
        return {**super().identity(), "max_text_tokens": self._max_text_tokens}

    def load(self) -> _Loaded:
        if self._loaded is None:
            kwargs = self.settings.load_kwargs()
            tokenizer = hf().AutoTokenizer.from_pretrained(self.settings.checkpoint, **kwargs)
            extractor = hf().AutoFeatureExtractor.from_pretrained(
                self.settings.checkpoint, **kwargs
            )
            model = load_model("ClapModel", self.settings)
            positions = int(model.config.text_config.max_position_embeddings) - 2  # RoBERTa offset
            limit = min(int(tokenizer.model_max_length), positions)
            if self._max_text_tokens is not None:
                limit = min(limit, int(self._max_text_tokens))
            self._loaded = _Loaded(model, tokenizer, extractor, limit)
        loaded: _Loaded = self._loaded
        return loaded

    async def aclose(self) -> None:
        if self.truncated_queries:
            limit = self._loaded.max_text_tokens if self._loaded else self._max_text_tokens
            log.warning(
                "clap: %d queries were truncated to %s tokens (see extra.query_truncated)",
                self.truncated_queries,
                limit,
            )
        await super().aclose()

    def query_extra(self, query: str) -> dict[str, Any]:
        length = self._tokens[query]
        truncated = length > self.load().max_text_tokens
        self.truncated_queries += truncated
        return {"query_tokens": length, "query_truncated": truncated}

    def embed_texts(self, loaded: _Loaded, texts: list[str]) -> tuple[Vectors, list[int]]:
        import torch

        counts = [
            len(loaded.tokenizer(t, truncation=False, verbose=False)["input_ids"]) for t in texts
        ]
        step = max(self.settings.batch_size, 1)
        vectors = []
        for start in range(0, len(texts), step):
            tokens = loaded.tokenizer(
                texts[start : start + step],
                padding=True,
                truncation=True,
                max_length=loaded.max_text_tokens,
                return_tensors="pt",
            ).to(loaded.model.device)
            with torch.inference_mode():
                out = loaded.model.get_text_features(**tokens).pooler_output
            vectors.append(out.float().cpu().numpy())
        return np.concatenate(vectors), counts

    def window(self, loaded: _Loaded, samples: NDArray[np.float32]) -> NDArray[np.float32]:
        """At most the extractor's window: a longer clip's central window."""
        window = int(loaded.extractor.nb_max_samples)
        return samples if len(samples) <= window else fit_window(samples, window)

    def embed_audio(self, loaded: _Loaded, clips: list[NDArray[np.float32]]) -> Vectors:
        import torch

        step = max(self.settings.batch_size, 1)
        vectors = []
        for start in range(0, len(clips), step):
            features = loaded.extractor(
                [self.window(loaded, c) for c in clips[start : start + step]],
                sampling_rate=self.sampling_rate,
                return_tensors="pt",
            )
            model = loaded.model
            inputs = {"input_features": features["input_features"].to(model.device, model.dtype)}
            if "is_longer" in features:
                inputs["is_longer"] = features["is_longer"].to(loaded.model.device)
            with torch.inference_mode():
                out = loaded.model.get_audio_features(**inputs).pooler_output
            vectors.append(out.float().cpu().numpy())
        return np.concatenate(vectors)
