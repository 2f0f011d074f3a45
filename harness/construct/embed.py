"""Text embeddings for stage 3: the packaged sentence-embedding model (offline), or any
OpenAI-compatible `/v1/embeddings` endpoint (text-embedding-3-large, a local server)."""

from __future__ import annotations

import asyncio
import os
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from numpy.typing import NDArray
from pydantic import BaseModel, ConfigDict, Field

from harness.calls.cache import ResponseCache, cache_key
from harness.core.errors import HarnessError
from harness.core.secrets import scrub

if TYPE_CHECKING:
    from openai import AsyncOpenAI
    from sentence_transformers import SentenceTransformer

Vectors = NDArray[np.float64]


class EmbedderConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    kind: Literal["sentence-transformers", "openai"] = "sentence-transformers"
    model: str | None = Field(
        default=None,
        description="default: the packaged all-MiniLM-L6-v2, or text-embedding-3-large",
    )
    base_url: str | None = Field(default=None, description="default: $OPENAI_BASE_URL")
    dimensions: int | None = Field(default=None, gt=0)
    batch_size: int = Field(default=64, gt=0)
    max_attempts: int = Field(default=6, gt=0)
    timeout_s: float = Field(default=60.0, gt=0)

    @property
    def model_name(self) -> str:
        if self.model:
            return self.model
        if self.kind == "openai":
            return "text-embedding-3-large"
        from providers.scorers.text_embedding import PACKAGED_MODEL

        return PACKAGED_MODEL


def normalise(vectors: Vectors) -> Vectors:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    if np.any(norms == 0):
        raise HarnessError("the embedding model returned an all-zero vector")
    normalised: Vectors = vectors / norms
    return normalised


def embed_texts(
    texts: list[str], config: EmbedderConfig, *, cache_dir: Path | None = None
) -> Vectors:
    """One L2-normalised row per text, in order (each distinct text is embedded once)."""
    unique = list(dict.fromkeys(texts))
    if config.kind == "openai":
        vectors = asyncio.run(_embed_openai(unique, config, cache_dir))
    else:
        vectors = _embed_local(unique, config)
    row = {text: i for i, text in enumerate(unique)}
    return normalise(vectors)[[row[t] for t in texts]]


@lru_cache(maxsize=1)
def _sentence_model(name: str) -> SentenceTransformer:
    from providers.scorers.text_embedding import sentence_model

    return sentence_model(name)


def _embed_local(texts: list[str], config: EmbedderConfig) -> Vectors:
    model = _sentence_model(config.model_name)
    vectors = model.encode(texts, batch_size=config.batch_size, convert_to_numpy=True)
    return np.asarray(vectors, dtype=np.float64)


def _client(config: EmbedderConfig) -> AsyncOpenAI:
    """The SDK retries 429s (after their Retry-After), 5xx, timeouts and lost connections."""
    from openai import AsyncOpenAI

    base_url = config.base_url or os.environ.get("OPENAI_BASE_URL")
    key = os.environ.get("OPENAI_API_KEY")
    if not key and not base_url:
        raise HarnessError("set OPENAI_API_KEY (or a base_url of a local server) for embeddings")
    # A local OpenAI-compatible server usually takes no key, but the SDK insists on one.
    return AsyncOpenAI(
        api_key=key or "unused",
        base_url=base_url,
        max_retries=config.max_attempts - 1,
        timeout=config.timeout_s,
    )


async def _request(client: AsyncOpenAI, config: EmbedderConfig, batch: list[str]) -> Vectors:
    import openai

    # Plain floats: every OpenAI-compatible server speaks them (not all decode base64).
    kwargs: dict[str, Any] = {"encoding_format": "float"}
    if config.dimensions:
        kwargs["dimensions"] = config.dimensions
    try:
        response = await client.embeddings.create(model=config.model_name, input=batch, **kwargs)
    except openai.APIStatusError as exc:
        message = f"embeddings endpoint answered {exc.status_code}: {exc.message}"
        raise HarnessError(f"embedding failed: {scrub(message)}") from None
    except openai.OpenAIError as exc:
        raise HarnessError(f"embedding failed: {scrub(str(exc))}") from None
    rows = sorted(response.data, key=lambda d: d.index)
    if len(rows) != len(batch):
        raise HarnessError(
            f"embeddings endpoint returned {len(rows)} vectors for {len(batch)} texts"
        )
    return np.asarray([row.embedding for row in rows], dtype=np.float64)


async def _embed_openai(
    texts: list[str], config: EmbedderConfig, cache_dir: Path | None
) -> Vectors:
    client = _client(config)
    cache = ResponseCache(cache_dir)
    identity = {
        "embeddings": "openai",
        "model": config.model_name,
        "base_url": config.base_url or os.environ.get("OPENAI_BASE_URL"),
        "dimensions": config.dimensions,
    }
    keys = [cache_key({"provider": identity, "text": text}) for text in texts]
    vectors: dict[str, list[float]] = {}
    try:
        for key in keys:
            hit = cache.get(key, "vector")
            if hit is not None:
                vectors[key] = hit["vector"]
        todo = [(k, t) for k, t in zip(keys, texts, strict=True) if k not in vectors]
        for start in range(0, len(todo), config.batch_size):
            batch = todo[start : start + config.batch_size]
            rows = await _request(client, config, [t for _, t in batch])
            for (key, _), row in zip(batch, rows.tolist(), strict=True):
                cache.set(key, {"vector": row})
                vectors[key] = row
    finally:
        cache.close()
        await client.close()
    return np.asarray([vectors[k] for k in keys], dtype=np.float64)
