"""CLAP scorers (`ClapModel`): cosine between the dialogue (full text or summary) and each
clip, for any CLAP checkpoint (`laion/clap-htsat-unfused`, `laion/larger_clap_music`, ...).

Audio goes in at 48 kHz through the checkpoint's `ClapFeatureExtractor`. A clip longer
than the extractor's window (10 s in the LAION checkpoints) is cut to its central window
first, so scores never depend on the extractor's random crop. With `inputs.music:
caption` the caption is embedded with the text tower instead.

Text truncation is explicit: queries are cut to `max_text_tokens` (default: what the
text tower's position table holds) and every record says how many tokens its query had
and whether it was cut (`extra.query_tokens`, `extra.query_truncated`); the count of cut
queries is logged when the run ends.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray
from pydantic import Field

from harness.audio import read_mono
from harness.types import AudioRef, ProviderConfig, ScoreRequest, Scores
from providers._local_settings import (
    LOCAL_NON_IDENTITY,
    LocalOptions,
    LocalSettings,
    as_provider_error,
    free_memory,
    hf,
    load_model,
    local_identity,
    require_local_stack,
)
from providers._microbatch import MicroBatcher
from providers.base import Scorer

log = logging.getLogger(__name__)
Vector = NDArray[np.float32]


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


class ClapScorer(Scorer):
    default_model = "laion/clap-htsat-unfused"
    sampling_rate = 48000
    Options = ClapOptions
    non_identity = LOCAL_NON_IDENTITY
    config: ClapOptions

    def __init__(self, config: ProviderConfig) -> None:
        super().__init__(config)
        require_local_stack()
        self.settings = LocalSettings.from_options(self.config, self.model)
        self._max_text_tokens = self.config.max_text_tokens
        self._loaded: _Loaded | None = None
        self._audio: dict[str, Vector] = {}  # by the clip's sha256
        self._text: dict[str, Vector] = {}
        self.truncated_queries = 0
        self.batcher: MicroBatcher[ScoreRequest, Scores] = MicroBatcher(
            self._run_batch, self.settings.batch_size, self.settings.batch_wait_s
        )

    @property
    def deterministic(self) -> bool:
        return True

    def identity(self) -> dict[str, Any]:
        identity = local_identity(super().identity(), self.settings)
        for generation_only in ("max_new_tokens", "expected_score", "temperature", "prompt_format"):
            identity.pop(generation_only, None)
        return {**identity, "max_text_tokens": self._max_text_tokens}

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
        return self._loaded

    async def score(self, request: ScoreRequest) -> Scores:
        return await self.batcher.submit(request)

    async def aclose(self) -> None:
        await self.batcher.aclose()
        if self.truncated_queries:
            limit = self._loaded.max_text_tokens if self._loaded else self._max_text_tokens
            log.warning(
                "clap: %d queries were truncated to %s tokens (see extra.query_truncated)",
                self.truncated_queries,
                limit,
            )
        self._loaded = None
        self._audio.clear()
        self._text.clear()
        free_memory()

    # ----------------------------------------------------------------- one batch
    def _run_batch(self, requests: list[ScoreRequest]) -> list[Scores]:
        try:
            return self.score_batch(requests)
        except Exception as exc:
            raise as_provider_error(exc, f"clap ({self.model})") from exc

    def score_batch(self, requests: list[ScoreRequest]) -> list[Scores]:
        loaded = self.load()
        texts = [r.query for r in requests]
        texts += [c.caption for r in requests if r.music == "caption" for c in r.candidates]
        self._embed_texts(loaded, [t for t in dict.fromkeys(texts) if t not in self._text])
        clips = {
            c.audio.sha256: c.audio
            for r in requests
            if r.music == "audio"
            for c in r.candidates
            if c.audio is not None
        }
        self._embed_audio(loaded, [a for sha, a in clips.items() if sha not in self._audio])
        answers = []
        for request in requests:
            query = self._text[request.query]
            values = []
            for candidate in request.candidates:
                if request.music == "caption":
                    other = self._text[candidate.caption]
                elif candidate.audio is not None:
                    other = self._audio[candidate.audio.sha256]
                else:
                    raise ValueError(f"clip {candidate.clip_id} has no audio")
                values.append(round(float(np.dot(query, other)), 6))
            length = self._token_count(loaded, request.query)
            truncated = length > loaded.max_text_tokens
            self.truncated_queries += truncated
            answers.append(Scores(values, {"query_tokens": length, "query_truncated": truncated}))
        return answers

    def _token_count(self, loaded: _Loaded, text: str) -> int:
        return len(loaded.tokenizer(text, truncation=False, verbose=False)["input_ids"])

    def _embed_texts(self, loaded: _Loaded, texts: list[str]) -> None:
        import torch

        step = max(self.settings.batch_size, 1)
        for start in range(0, len(texts), step):
            chunk = texts[start : start + step]
            tokens = loaded.tokenizer(
                chunk,
                padding=True,
                truncation=True,
                max_length=loaded.max_text_tokens,
                return_tensors="pt",
            ).to(loaded.model.device)
            with torch.inference_mode():
                out = loaded.model.get_text_features(**tokens).pooler_output
            self._text.update(zip(chunk, out.float().cpu().numpy(), strict=True))

    def central_window(self, loaded: _Loaded, clip: AudioRef) -> Vector:
        samples = read_mono(clip.path, self.sampling_rate)
        window = int(loaded.extractor.nb_max_samples)
        if len(samples) <= window:
            return samples
        start = (len(samples) - window) // 2
        return samples[start : start + window]

    def _embed_audio(self, loaded: _Loaded, clips: list[AudioRef]) -> None:
        import torch

        step = max(self.settings.batch_size, 1)
        for start in range(0, len(clips), step):
            chunk = clips[start : start + step]
            features = loaded.extractor(
                [self.central_window(loaded, c) for c in chunk],
                sampling_rate=self.sampling_rate,
                return_tensors="pt",
            )
            inputs = {
                "input_features": features["input_features"].to(
                    loaded.model.device, loaded.model.dtype
                )
            }
            if "is_longer" in features:
                inputs["is_longer"] = features["is_longer"].to(loaded.model.device)
            with torch.inference_mode():
                out = loaded.model.get_audio_features(**inputs).pooler_output
            self._audio.update(
                zip([c.sha256 for c in chunk], out.float().cpu().numpy(), strict=True)
            )
