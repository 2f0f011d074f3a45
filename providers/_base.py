"""The one small interface every provider implements.

A provider is either a Judge (a chat model: prompt in, text out) or a Scorer (an embedding
model: one similarity per candidate). Providers only translate between the harness and a
model; retries, rate limits, caching, parsing and records live in the runner.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from harness.audio import AudioRef

# Settings that change how a run behaves but never what a model answers.
NON_IDENTITY_FIELDS = frozenset(
    {
        "max_concurrency",
        "rpm",
        "max_attempts",
        "max_retry_time_s",
        "retry_wait_s",
        "retry_max_wait_s",
        "timeout_s",
        "reask",
        "prices",
    }
)


class ProviderConfig(BaseModel):
    """`provider:` block of an experiment file; provider-specific keys are allowed."""

    model_config = ConfigDict(extra="allow", frozen=True)
    name: str
    model: str | None = None
    temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    max_tokens: int | None = Field(default=None, gt=0)
    seed: int | None = None
    base_url: str | list[str] | None = None
    max_concurrency: int = Field(default=8, gt=0)
    rpm: float | None = Field(default=None, gt=0)
    # 8 attempts: at a 20% transient fault rate, 0.2**8 * 4,800 calls ~ 0.01 calls lost per run.
    max_attempts: int = Field(default=8, gt=0)
    max_retry_time_s: float = Field(default=600.0, gt=0)
    retry_wait_s: float = Field(default=0.5, gt=0, description="first backoff wait")
    retry_max_wait_s: float = Field(default=30.0, gt=0, description="longest backoff wait")
    timeout_s: float = Field(default=120.0, gt=0)
    reask: int = Field(default=1, ge=0)
    prices: dict[str, float] | None = None

    def extra(self, key: str, default: Any = None) -> Any:
        return (self.model_extra or {}).get(key, default)


@dataclass(frozen=True, slots=True)
class ChatRequest:
    """A rendered prompt: system text, then the user turn as text and audio parts in order."""

    system: str
    parts: tuple[str | AudioRef, ...]
    response_schema: dict[str, Any] | None = None

    @property
    def audio(self) -> tuple[AudioRef, ...]:
        return tuple(p for p in self.parts if isinstance(p, AudioRef))

    @property
    def user_text(self) -> str:
        """The user turn with each clip shown as `<audio>` (paths and ids never matter)."""
        return "".join(p if isinstance(p, str) else "<audio>" for p in self.parts)


@dataclass(frozen=True, slots=True)
class ChatResponse:
    text: str
    input_tokens: int | None = None
    output_tokens: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ScoreCandidate:
    clip_id: str
    caption: str
    audio: AudioRef | None


@dataclass(frozen=True, slots=True)
class ScoreRequest:
    """Similarity query: the dialogue (full text or summary) against each candidate clip."""

    query: str
    candidates: tuple[ScoreCandidate, ...]
    music: Literal["audio", "caption"]
    item_id: str
    repeat: int


class Scores(list[float]):
    """A scorer's answer with notes for the run's record (e.g. that the query was
    truncated); a plain list[float] is an answer without notes."""

    def __init__(self, values: Iterable[float], extra: dict[str, Any] | None = None) -> None:
        super().__init__(values)
        self.extra: dict[str, Any] = dict(extra or {})


class Provider(ABC):
    kind: ClassVar[Literal["judge", "scorer"]]
    default_model: ClassVar[str | None] = None

    def __init__(self, config: ProviderConfig) -> None:
        self.config = config

    @property
    def model(self) -> str:
        return self.config.model or self.default_model or self.config.name

    @property
    def deterministic(self) -> bool:
        """Whether a repeat of the same request gives the same answer (greedy decoding)."""
        return self.config.temperature == 0.0

    def identity(self) -> dict[str, Any]:
        """Everything about this provider that can change an answer (part of the cache key)."""
        fields = self.config.model_dump(exclude=set(NON_IDENTITY_FIELDS), exclude_none=True)
        return {**fields, "model": self.model}

    async def aclose(self) -> None:
        """Release clients or model weights at the end of a run."""
        return None


class Judge(Provider):
    kind = "judge"

    @abstractmethod
    async def generate(self, request: ChatRequest) -> ChatResponse: ...


class Scorer(Provider):
    kind = "scorer"

    @abstractmethod
    async def score(self, request: ScoreRequest) -> list[float]: ...
