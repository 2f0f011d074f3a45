"""What the two-tower (CLAP-style) scorers of `ms-clap` and `paraclap` share: the query (full
dialogue or summary) and each clip (or its caption) embedded in one space, scored by cosine;
embeddings cached per text and per clip (by the hash of its bytes); requests micro-batched;
the model loaded by `ready()` before the first call is timed. Each family says how it loads
and how it embeds texts and audio.
"""

from __future__ import annotations

import asyncio
from abc import abstractmethod
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from harness.core.audio import read_mono
from harness.core.types import AudioRef, ProviderConfig, ProviderError, ScoreRequest, Scores
from providers.base import Scorer
from providers.local._microbatch import MicroBatcher
from providers.local._settings import (
    LocalOptions,
    LocalSettings,
    as_provider_error,
    free_memory,
    local_identity,
    require_local_stack,
)

Vectors = NDArray[np.float32]


def download(repo_or_path: str, filename: str, revision: str | None) -> str:
    """A local weights file: `repo_or_path` itself when it is a file, else `filename` from
    that hub repository (at `revision`)."""
    from pathlib import Path

    if Path(repo_or_path).is_file():
        return repo_or_path
    from huggingface_hub import hf_hub_download

    return str(hf_hub_download(repo_or_path, filename, revision=revision))


def fit_window(samples: NDArray[np.float32], window: int) -> NDArray[np.float32]:
    """Exactly `window` samples: a shorter clip repeated (as msclap does), a longer one cut to
    its central window (msclap crops at random; the centre keeps scores reproducible)."""
    if len(samples) < window:
        repeats = -(-window // max(len(samples), 1))
        return np.tile(samples, repeats)[:window]
    start = (len(samples) - window) // 2
    return samples[start : start + window]


class EmbeddingScorer(Scorer):
    sampling_rate: ClassVar[int]
    unit_vectors: ClassVar[bool] = False  # True: the family's embeddings have length 1 already
    Options: ClassVar[type[ProviderConfig]] = LocalOptions
    config: LocalOptions

    def __init__(self, config: ProviderConfig) -> None:
        super().__init__(config)
        require_local_stack()
        self.settings = LocalSettings.from_options(self.config, self.model)
        self._loaded: Any = None
        self._loading = asyncio.Lock()
        self._audio: dict[str, NDArray[np.float32]] = {}  # by the clip's sha256
        self._text: dict[str, NDArray[np.float32]] = {}
        self._tokens: dict[str, int] = {}
        self.batcher: MicroBatcher[ScoreRequest, Scores] = MicroBatcher(
            self._run_batch, self.settings.batch_size, self.settings.batch_wait_s
        )

    @property
    def deterministic(self) -> bool:
        return True

    def identity(self) -> dict[str, Any]:
        return local_identity(super().identity(), self.settings, generates=False)

    @abstractmethod
    def load(self) -> Any: ...  # once; kept in `self._loaded`

    @abstractmethod
    def embed_texts(self, loaded: Any, texts: list[str]) -> tuple[Vectors, list[int]]:
        """Embeddings of `texts` and how many tokens each had."""

    @abstractmethod
    def embed_audio(self, loaded: Any, clips: list[NDArray[np.float32]]) -> Vectors: ...

    async def ready(self) -> None:
        async with self._loading:
            if self._loaded is None:
                try:
                    await asyncio.to_thread(self.load)
                except Exception as exc:
                    raise as_provider_error(exc, f"loading {self.model}") from exc

    async def score(self, request: ScoreRequest) -> Scores:
        return await self.batcher.submit(request)

    async def aclose(self) -> None:
        await self.batcher.aclose()
        self._loaded = None
        self._audio.clear()
        self._text.clear()
        free_memory()

    def _run_batch(self, requests: list[ScoreRequest]) -> list[Scores]:
        try:
            return self.score_batch(requests)
        except Exception as exc:
            raise as_provider_error(exc, f"{self.config.name} ({self.model})") from exc

    def score_batch(self, requests: list[ScoreRequest]) -> list[Scores]:
        loaded = self.load()
        texts = [r.query for r in requests]
        texts += [c.caption for r in requests if r.music == "caption" for c in r.candidates]
        new_texts = [t for t in dict.fromkeys(texts) if t not in self._text]
        if new_texts:
            vectors, counts = self.embed_texts(loaded, new_texts)
            self._text.update(zip(new_texts, self._unit(vectors), strict=True))
            self._tokens.update(zip(new_texts, counts, strict=True))
        clips: dict[str, AudioRef] = {}
        for candidate in (c for r in requests if r.music != "caption" for c in r.candidates):
            if candidate.audio is None:
                message = f"clip {candidate.clip_id} has no audio"
                raise ProviderError(message, transient=False, kind="bad_request")
            clips.setdefault(candidate.audio.sha256, candidate.audio)
        new_clips = [ref for sha, ref in clips.items() if sha not in self._audio]
        if new_clips:
            decoded = [read_mono(ref.path, self.sampling_rate) for ref in new_clips]
            vectors = self._unit(self.embed_audio(loaded, decoded))
            self._audio.update(zip([ref.sha256 for ref in new_clips], vectors, strict=True))
        answers = []
        for request in requests:
            query = self._text[request.query]
            values = []
            for candidate in request.candidates:
                if request.music == "caption":
                    other = self._text[candidate.caption]
                else:
                    assert candidate.audio is not None
                    other = self._audio[candidate.audio.sha256]
                values.append(round(float(np.dot(query, other)), 6))
            answers.append(Scores(values, self.query_extra(request.query)))
        return answers

    def query_extra(self, query: str) -> dict[str, Any]:
        return {"query_tokens": self._tokens[query]}  # the record's `extra`

    def _unit(self, vectors: Vectors) -> Vectors:
        return vectors.astype(np.float32) if self.unit_vectors else _unit(vectors)


def _unit(vectors: Vectors) -> Vectors:
    """Rows scaled to length 1, so a dot product is the cosine."""
    norms = np.linalg.norm(vectors, axis=-1, keepdims=True)
    unit: Vectors = (vectors / np.maximum(norms, 1e-12)).astype(np.float32)
    return unit
