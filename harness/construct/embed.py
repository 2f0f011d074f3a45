"""Text embeddings for stage 3: the packaged sentence-embedding model (offline), or any
OpenAI-compatible `/v1/embeddings` endpoint (text-embedding-3-large, a local server)."""

from __future__ import annotations

import asyncio
import contextlib
import os
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from numpy.typing import NDArray
from pydantic import BaseModel, ConfigDict, Field
from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt
from tenacity.wait import wait_exponential_jitter

from harness.calls.cache import ResponseCache, cache_key
from harness.core.errors import HarnessError
from harness.core.secrets import scrub
from harness.core.types import ProviderError

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
def _sentence_model(path: str) -> SentenceTransformer:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(path, device="cpu")


def _embed_local(texts: list[str], config: EmbedderConfig) -> Vectors:
    from providers.scorers.text_embedding import resolve_model_path

    model = _sentence_model(resolve_model_path(config.model_name))
    vectors = model.encode(texts, batch_size=config.batch_size, convert_to_numpy=True)
    return np.asarray(vectors, dtype=np.float64)


def _client(config: EmbedderConfig) -> AsyncOpenAI:
    from openai import AsyncOpenAI

    base_url = config.base_url or os.environ.get("OPENAI_BASE_URL")
    key = os.environ.get("OPENAI_API_KEY")
    if not key and not base_url:
        raise HarnessError("set OPENAI_API_KEY (or a base_url of a local server) for embeddings")
    # A local OpenAI-compatible server usually takes no key, but the SDK insists on one.
    return AsyncOpenAI(
        api_key=key or "unused", base_url=base_url, max_retries=0, timeout=config.timeout_s
    )


def _provider_error(exc: Exception) -> ProviderError:
    import openai

    message = scrub(str(exc))
    if isinstance(exc, openai.APIStatusError):
        status, retry_after = exc.status_code, None
        with contextlib.suppress(ValueError):
            retry_after = float(exc.response.headers.get("retry-after", ""))
        transient = status == 429 or status >= 500
        kind = "rate_limit" if status == 429 else f"http_{status}"
        return ProviderError(
            f"embeddings endpoint answered {status}: {message}",
            transient=transient,
            kind=kind,
            retry_after=retry_after,
        )
    if isinstance(exc, openai.APITimeoutError):
        return ProviderError("embeddings request timed out", transient=True, kind="timeout")
    if isinstance(exc, openai.APIConnectionError):
        return ProviderError(
            f"cannot reach the embeddings endpoint: {message}", transient=True, kind="connection"
        )
    return ProviderError(f"embeddings request failed: {message}", transient=False)


def _wait(state: Any) -> float:
    exc = state.outcome.exception() if state.outcome else None
    if isinstance(exc, ProviderError) and exc.retry_after is not None:
        return float(exc.retry_after)
    return float(wait_exponential_jitter(initial=0.5, max=30.0, jitter=1.0)(state))


async def _request(
    client: AsyncOpenAI, config: EmbedderConfig, batch: list[str]
) -> list[list[float]]:
    import openai

    # Plain floats: every OpenAI-compatible server speaks them (not all decode base64).
    kwargs: dict[str, Any] = {
        "model": config.model_name,
        "input": batch,
        "encoding_format": "float",
    }
    if config.dimensions:
        kwargs["dimensions"] = config.dimensions
    try:
        response = await client.embeddings.create(**kwargs)
    except openai.OpenAIError as exc:
        raise _provider_error(exc) from exc
    rows = sorted(response.data, key=lambda d: d.index)
    if len(rows) != len(batch):
        raise ProviderError(
            f"embeddings endpoint returned {len(rows)} vectors for {len(batch)} texts",
            transient=False,
        )
    return [list(row.embedding) for row in rows]


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
            retrying = AsyncRetrying(
                stop=stop_after_attempt(config.max_attempts),
                wait=_wait,
                retry=retry_if_exception(lambda e: isinstance(e, ProviderError) and e.transient),
                reraise=True,
            )
            try:
                rows: list[list[float]] = await retrying(
                    _request, client, config, [t for _, t in batch]
                )
            except ProviderError as exc:
                raise HarnessError(f"embedding failed ({exc.kind}): {exc}") from None
            for (key, _), row in zip(batch, rows, strict=True):
                cache.set(key, {"vector": row})
                vectors[key] = row
    finally:
        cache.close()
        await client.close()
    return np.asarray([vectors[k] for k in keys], dtype=np.float64)
