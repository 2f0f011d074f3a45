"""What a provider's batch API offers (`batch: true`): submit requests as one job, find a job by
its label, report progress, read results, each keyed by the request's cache key. The harness's
side is `harness.calls.batch_jobs`."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from harness.core.types import ChatRequest, ProviderError


@dataclass(frozen=True)
class BatchSettings:
    """The `batch_*` keys of a provider block."""

    fallback: Literal["resubmit", "online"] = "resubmit"
    poll_s: float = 30.0
    collect_s: float = 1.0
    rounds: int = 3


@dataclass(frozen=True)
class BatchProgress:
    status: str  # the provider's own word ("in_progress", "JOB_STATE_RUNNING", ...)
    finished: bool  # no further change will come (completed, expired, cancelled, failed)
    total: int | None = None
    done: int | None = None
    failed: int | None = None


@dataclass
class BatchResults:
    """A finished job's answers and errors by request id, and its unreadable lines (raw)."""

    answers: dict[str, dict[str, Any]] = field(default_factory=dict)
    errors: dict[str, ProviderError] = field(default_factory=dict)
    unreadable: list[str] = field(default_factory=list)
    note: str | None = None  # why the job gave nothing, when it failed as a whole


class BatchApi(ABC):
    """One provider's batch API. `max_requests` and `max_bytes` bound one job."""

    name: ClassVar[str]
    max_requests: ClassVar[int]
    max_bytes: ClassVar[int]

    def __init__(self, judge: Any, settings: BatchSettings) -> None:
        self.judge = judge  # the provider whose requests it sends (typed by each adapter)
        self.settings = settings

    @abstractmethod
    def size(self, request: ChatRequest) -> int:
        """Bytes the request adds to a job."""

    @abstractmethod
    async def submit(self, entries: list[tuple[str, ChatRequest]], label: str) -> str:
        """Submit (id, request) pairs as one job tagged `label`; the job's id."""

    @abstractmethod
    async def find(self, label: str) -> str | None:
        """The id of a job submitted with `label`, if any."""

    @abstractmethod
    async def progress(self, batch_id: str) -> BatchProgress: ...

    @abstractmethod
    async def results(self, batch_id: str) -> BatchResults:
        """The answers and errors of a finished job."""

    async def aclose(self) -> None:
        return None
