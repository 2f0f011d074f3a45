"""The one interface every provider implements: a Judge (prompt in, text out) or a Scorer (one
score per candidate). Providers only translate: retries, rate limits, caching, parsing and
records live in the call path, which asks each `await provider.answer(request)`. Each declares
its `provider:` keys as a pydantic `Options` model (unknown keys refused)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from harness.core.types import (
    ChatRequest,
    ChatResponse,
    ProviderConfig,
    Request,
    ScoreRequest,
)

if TYPE_CHECKING:
    from harness.core.dataset import Item
    from providers.batch import BatchApi


class Provider(ABC):
    kind: ClassVar[Literal["judge", "scorer"]]
    default_model: ClassVar[str | None] = None
    Options: ClassVar[type[ProviderConfig]] = ProviderConfig
    # Told each HTTP response's headers (API providers) by the call path's pacer.
    on_headers: Callable[[Mapping[str, str]], None] | None = None

    def __init__(self, config: ProviderConfig) -> None:
        if not isinstance(config, self.Options):
            config = self.Options.model_validate(config.model_dump(exclude_unset=True))
        self.config = config

    @property
    def model(self) -> str:
        return self.config.model or self.default_model or self.config.name

    @property
    def deterministic(self) -> bool:
        """Whether a repeat of a request gives the same answer (greedy decoding)."""
        return self.config.temperature == 0.0

    def identity(self) -> dict[str, Any]:
        """Everything that can change an answer (the cache key's provider part)."""
        return {**self.config.identity(), "model": self.model}

    def endpoint(self) -> dict[str, Any] | None:
        """Where requests go, for run.json (None: a model in this process)."""
        return None

    @abstractmethod
    async def answer(self, request: Request) -> dict[str, Any]:
        """The answer to one request, as the response cache stores it."""

    def missing_key(self) -> str | None:
        """The unset environment variable a call needs (an API key), else None."""
        return None

    async def ready(self) -> None:
        """Prepare what the first call would (load weights), before its timeout starts."""
        return None

    async def aclose(self) -> None:
        return None


class Judge(Provider):
    kind = "judge"

    @abstractmethod
    async def generate(self, request: ChatRequest) -> ChatResponse: ...

    async def answer(self, request: Request) -> dict[str, Any]:
        if not isinstance(request, ChatRequest):
            raise TypeError(f"{type(self).__name__} answers chat requests, not {request!r}")
        return chat_answer(await self.generate(request))

    def batch_api(self) -> BatchApi | None:
        return None


def chat_answer(response: ChatResponse) -> dict[str, Any]:
    answer = {
        "text": response.text,
        "input_tokens": response.input_tokens,
        "output_tokens": response.output_tokens,
        "extra": response.extra,
    }
    return answer | {"resent": response.resent} if response.resent else answer


class Scorer(Provider):
    kind = "scorer"

    def fit(self, items: Sequence[Item]) -> str | None:
        """Learn from the run's items what scores depend on beyond a request (`popularity`);
        a digest of it joins every key with the item's id (None: nothing learned)."""
        return None

    @abstractmethod
    async def score(self, request: ScoreRequest) -> list[float]: ...

    async def answer(self, request: Request) -> dict[str, Any]:
        if not isinstance(request, ScoreRequest):
            raise TypeError(f"{type(self).__name__} answers score requests, not {request!r}")
        scores = await self.score(request)
        return {"scores": list(scores), "extra": getattr(scores, "extra", {})}
