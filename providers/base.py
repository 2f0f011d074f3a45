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
    # Told the headers of each HTTP response (API providers): the call path's pace.
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
        """Whether a repeat of the same request gives the same answer (greedy decoding)."""
        return self.config.temperature == 0.0

    def identity(self) -> dict[str, Any]:
        """Everything about this provider that can change an answer (part of the cache key):
        its settings' identity (`ProviderConfig.identity`) with the model it resolves to; a
        provider adds what it computes (an effective base URL, a resolved dtype)."""
        return {**self.config.identity(), "model": self.model}

    def endpoint(self) -> dict[str, Any] | None:
        """Where the requests go, for run.json's provenance (API providers: the effective base
        URLs, where they came from, and whether they are the provider's official service);
        None for a model that runs in this process."""
        return None

    @abstractmethod
    async def answer(self, request: Request) -> dict[str, Any]:
        """The provider's answer to one request, in the form the response cache stores."""

    def missing_key(self) -> str | None:
        """The environment variable a model call needs and that is not set (API judges
        without a key), else None. The dry run reports it before anything is called."""
        return None

    async def ready(self) -> None:
        """Prepare what a model call needs and only the first one would otherwise do (load
        local weights). The call path awaits it before each call's timeout starts."""
        return None

    async def aclose(self) -> None:
        """Release clients or model weights at the end of a run."""
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
        """The provider's batch API when its block says `batch: true`, else None."""
        return None


def chat_answer(response: ChatResponse) -> dict[str, Any]:
    """A judge's answer in the form the response cache stores (online or from a batch)."""
    return {
        "text": response.text,
        "input_tokens": response.input_tokens,
        "output_tokens": response.output_tokens,
        "extra": response.extra,
    }


class Scorer(Provider):
    kind = "scorer"

    def fit(self, items: Sequence[Item]) -> str | None:
        """Learn what the scores depend on beyond one request (dataset statistics, as the
        `popularity` baseline does) from the items of the run, before any request. Returns a
        digest of what was learned, which joins every request's cache key with the item's
        id; None (the default) when the scores depend on the request alone."""
        return None

    @abstractmethod
    async def score(self, request: ScoreRequest) -> list[float]: ...

    async def answer(self, request: Request) -> dict[str, Any]:
        if not isinstance(request, ScoreRequest):
            raise TypeError(f"{type(self).__name__} answers score requests, not {request!r}")
        scores = await self.score(request)
        return {"scores": list(scores), "extra": getattr(scores, "extra", {})}
