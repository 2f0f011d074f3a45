"""The contract between the harness and its providers: the `provider:` block's common settings,
what a provider is asked and answers, the audio reference a request carries, and the one error
a provider raises. It imports nothing of `harness` or `providers`."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator


@dataclass(frozen=True)
class CallSetting:
    """Marks a `provider:` setting (`Annotated` metadata) of how a model is called, not what
    it answers: never in the cache key, and changeable on a re-run unless `changes_records`
    (the answers stay, the records do not: `reask`)."""

    changes_records: bool = False


CALL = CallSetting()


class ProviderConfig(BaseModel):
    """The settings every provider takes: what the model is (its identity: the cache key),
    then how it is called (marked `CALL`); a provider's own keys are in its subclass."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)
    name: str
    model: str | None = None
    temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    max_tokens: int | None = Field(default=None, gt=0)
    seed: int | None = None

    max_concurrency: Annotated[int, CALL] = Field(default=8, gt=0)
    rpm: Annotated[float | None, CALL] = Field(default=None, gt=0)
    # 8 attempts: at a 20% transient fault rate, 0.2**8 * 4,800 calls ~ 0.01 calls lost per run.
    max_attempts: Annotated[int, CALL] = Field(default=8, gt=0)
    max_retry_time_s: Annotated[float, CALL] = Field(default=600.0, gt=0)
    retry_wait_s: Annotated[float, CALL] = Field(
        default=0.5, gt=0, description="first backoff wait"
    )
    retry_max_wait_s: Annotated[float, CALL] = Field(
        default=30.0, gt=0, description="longest backoff wait"
    )
    timeout_s: Annotated[float, CALL] = Field(default=120.0, gt=0)
    reask: Annotated[int, CallSetting(changes_records=True)] = Field(default=1, ge=0)
    prices: Annotated[dict[str, Annotated[float, Field(ge=0.0)]] | None, CALL] = None
    label: Annotated[str | None, CALL] = Field(
        default=None, min_length=1, max_length=60, description="how reports name its runs"
    )

    @classmethod
    def call_settings(cls) -> dict[str, CallSetting]:
        """The settings of how the model is called, by name (the rest is its identity); one
        stays so where a subclass declares it again (with another default)."""
        return {
            name: mark
            for base in reversed(cls.__mro__)
            if issubclass(base, ProviderConfig)
            for name, info in base.model_fields.items()
            for mark in info.metadata
            if isinstance(mark, CallSetting)
        }

    def identity(self) -> dict[str, Any]:
        """The provider's part of every cache key: the settings not marked `CALL`, a
        provider's own only where not default (a new option never moves a key)."""
        identity = set(type(self).model_fields) - set(self.call_settings())
        common = self.model_dump(include=identity & BASE_FIELDS, exclude_none=True)
        own = self.model_dump(
            include=identity - BASE_FIELDS, exclude_none=True, exclude_defaults=True
        )
        return common | own

    @field_validator("prices")
    @classmethod
    def _known_prices(cls, prices: dict[str, float] | None) -> dict[str, float] | None:
        if prices is None:
            return None
        unknown = set(prices) - PRICE_KEYS
        if unknown or "input" not in prices or "output" not in prices:
            raise ValueError(
                "give USD per million tokens as {input: ..., output: ...} and optionally "
                "input_audio, input_cached, and batch (the share a batch job pays, 0 to 1) "
                f"(unknown keys: {sorted(unknown) or 'none'})"
            )
        if prices.get("batch", 0.0) > 1.0:
            raise ValueError("prices.batch: a share of the price, 0 to 1")
        return prices


# The keys of `prices` (USD per million tokens; `batch`: the share a batch job pays).
PRICE_KEYS = frozenset({"input", "input_audio", "input_cached", "output", "batch"})
BASE_FIELDS = frozenset(ProviderConfig.model_fields)


class ProviderError(Exception):
    """A model call failed. `transient` errors may be retried; the message never holds a key."""

    def __init__(
        self,
        message: str,
        *,
        transient: bool,
        kind: str = "error",
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.transient = transient
        self.kind = kind
        self.retry_after = retry_after
        self.resent = 0  # requests the provider sent again at once (a pool's other servers)


@dataclass(frozen=True, slots=True)
class AudioRef:
    """A clip as a prompt sees it: its id, where it lives, and the hash of its bytes
    (`harness.core.audio` decodes and encodes it)."""

    clip_id: str
    path: Path
    sha256: str


@dataclass(frozen=True, slots=True)
class FollowUp:
    """One exchange after the first user turn: the model's answer, then the user's reply."""

    answer: str
    reply: str


@dataclass(frozen=True, slots=True)
class ChatRequest:
    """A rendered prompt: system text, then the user turn as text and audio parts in order,
    then any follow-ups (a re-ask: the model's unusable answer and why it was rejected)."""

    system: str
    parts: tuple[str | AudioRef, ...]
    response_schema: dict[str, Any] | None = None
    follow_ups: tuple[FollowUp, ...] = ()

    def with_follow_up(self, answer: str, reply: str) -> ChatRequest:
        return replace(self, follow_ups=(*self.follow_ups, FollowUp(answer, reply)))

    @property
    def audio(self) -> tuple[AudioRef, ...]:
        return tuple(p for p in self.parts if isinstance(p, AudioRef))

    @property
    def user_text(self) -> str:
        """The user turn with each clip shown as `<audio>` (paths and ids never matter)."""
        return "".join(p if isinstance(p, str) else "<audio>" for p in self.parts)

    def key_fields(self) -> dict[str, Any]:
        """What of the request can change the answer (see `harness.calls.cache.request_key`)."""
        fields: dict[str, Any] = {
            "system": self.system,
            "user": self.user_text,
            "audio": [a.sha256 for a in self.audio],
            "schema": self.response_schema,
        }
        if self.follow_ups:  # absent otherwise, so first attempts keep their keys
            fields["follow_ups"] = [[f.answer, f.reply] for f in self.follow_ups]
        return fields


@dataclass(frozen=True, slots=True)
class ChatResponse:
    text: str
    input_tokens: int | None = None
    output_tokens: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    resent: int = 0  # requests sent again at once before this answer (a pool's other servers)


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

    def key_fields(self) -> dict[str, Any]:
        """What of the request can change the answer (see `harness.calls.cache.request_key`)."""
        return {
            "query": self.query,
            "clips": [c.audio.sha256 if c.audio else c.caption for c in self.candidates],
        }


class Scores(list[float]):
    """A scorer's answer with notes for the run's record (e.g. that the query was truncated)."""

    def __init__(self, values: Iterable[float], extra: dict[str, Any] | None = None) -> None:
        super().__init__(values)
        self.extra: dict[str, Any] = dict(extra or {})


Request = ChatRequest | ScoreRequest
