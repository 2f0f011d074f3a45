"""The call path of a run: one answer per request key, from the cache, from an identical
request already in flight (in this process, or in another one sharing the cache), or from
the provider with bounded concurrency, an optional rate limit, and retries of transient
failures only (honouring Retry-After). After a failure that every later call would meet
(a refused key, a wrong model) it stops sending and fails the rest fast."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from aiolimiter import AsyncLimiter
from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt, stop_after_delay
from tenacity.wait import wait_exponential_jitter

from harness.cache import CLAIM_LEASE_S, ResponseCache
from harness.errors import ProviderError
from providers import (
    ChatRequest,
    ChatResponse,
    Judge,
    Provider,
    ProviderConfig,
    Scorer,
    ScoreRequest,
)


@dataclass
class RunStats:
    """What a run counted: its calls and records (the runner) and its model calls, retries
    and shared answers (the call path)."""

    calls: int = 0
    cache_hits: int = 0
    model_calls: int = 0
    retries: int = 0
    errors: int = 0
    parse_failures: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    wall_s: float = 0.0
    shared_answers: int = 0  # answers another process was already fetching (claims)
    resumed_records: int = 0  # complete records an interrupted run of this experiment left
    torn_lines: int = 0  # half-written lines it left (a kill mid-write)
    error_kinds: Counter[str] = field(default_factory=Counter)
    first_errors: dict[str, str] = field(default_factory=dict)  # kind -> first message

    def to_json(self) -> dict[str, Any]:
        return {
            **{k: v for k, v in self.__dict__.items() if k != "error_kinds"},
            "error_kinds": dict(self.error_kinds),
        }


# Permanent failures that every later request of the run would meet as well: after the first
# one, the run stops sending. Other permanent failures stop it after a streak without success.
RUN_WIDE_KINDS = frozenset({"auth", "permission", "not_found"})
HALT_AFTER_PERMANENT = 10


class _RetryAfterOrBackoff:
    """Wait what the server asked for (Retry-After), else exponential backoff with jitter."""

    def __init__(self, initial: float, maximum: float) -> None:
        self._backoff = wait_exponential_jitter(initial=initial, max=maximum, jitter=2 * initial)

    def __call__(self, state: Any) -> float:
        exc = state.outcome.exception() if state.outcome else None
        if isinstance(exc, ProviderError) and exc.retry_after is not None:
            return float(exc.retry_after)
        return float(self._backoff(state))


def _is_transient(exc: BaseException) -> bool:
    return isinstance(exc, ProviderError) and exc.transient


class Answerer:
    def __init__(
        self, provider: Provider, settings: ProviderConfig, cache: ResponseCache, stats: RunStats
    ) -> None:
        self.provider = provider
        self.settings = settings
        self.cache = cache
        self.stats = stats
        self._semaphore = asyncio.Semaphore(settings.max_concurrency)
        self._limiter = AsyncLimiter(1, 60.0 / settings.rpm) if settings.rpm else None
        self._inflight: dict[str, asyncio.Future[tuple[dict[str, Any], bool]]] = {}
        self._halted: ProviderError | None = None
        self._held: set[str] = set()  # keys whose claims this run holds
        self._renewer: asyncio.Future[None] | None = None
        self._permanent_streak = 0

    def close(self) -> None:
        if self._renewer is not None:
            self._renewer.cancel()

    async def answer(
        self, key: str, request: ChatRequest | ScoreRequest
    ) -> tuple[dict[str, Any], bool]:
        """The answer for `key` and whether it came without a model call (from the cache,
        or from an identical request already in flight in this run)."""
        cached = self.cache.get(key)
        if cached is not None:
            return cached, True
        pending = self._inflight.get(key)
        if pending is not None:
            answer, _ = await asyncio.shield(pending)
            return answer, True
        task = asyncio.ensure_future(self._fetch(key, request))
        self._inflight[key] = task
        task.add_done_callback(lambda _: self._inflight.pop(key, None))
        return await task

    async def _invoke(self, request: ChatRequest | ScoreRequest) -> dict[str, Any]:
        """One fresh answer from the provider, retried on transient errors only."""
        cfg = self.settings
        retrying = AsyncRetrying(
            stop=stop_after_attempt(cfg.max_attempts) | stop_after_delay(cfg.max_retry_time_s),
            wait=_RetryAfterOrBackoff(cfg.retry_wait_s, cfg.retry_max_wait_s),
            retry=retry_if_exception(_is_transient),
            reraise=True,
        )
        try:
            return await self._attempts(retrying, request)
        except ProviderError as exc:
            self._note_failure(exc)
            raise

    async def _attempts(
        self, retrying: AsyncRetrying, request: ChatRequest | ScoreRequest
    ) -> dict[str, Any]:
        cfg = self.settings
        async for attempt in retrying:
            with attempt:
                if attempt.retry_state.attempt_number > 1:
                    self.stats.retries += 1
                if self._limiter:
                    await self._limiter.acquire()
                async with self._semaphore:
                    if self._halted is not None:
                        raise ProviderError(
                            f"the run stopped calling the model after a {self._halted.kind} "
                            "failure (see that error)",
                            transient=False,
                            kind="not_sent",
                        )
                    self.stats.model_calls += 1
                    started = time.perf_counter()
                    try:
                        async with asyncio.timeout(cfg.timeout_s):
                            answer = await self._ask(request)
                    except TimeoutError as exc:
                        raise ProviderError(
                            f"no answer within {cfg.timeout_s:g} s", transient=True, kind="timeout"
                        ) from exc
                    answer["latency_s"] = round(time.perf_counter() - started, 4)
                    self._permanent_streak = 0
                    return answer
        raise AssertionError("unreachable")  # pragma: no cover

    def _note_failure(self, exc: ProviderError) -> None:
        """Stop calling the model (fail the rest fast) after a failure every call would meet."""
        if exc.transient or exc.kind == "not_sent":
            return
        self._permanent_streak += 1
        if self._halted is None and (
            exc.kind in RUN_WIDE_KINDS or self._permanent_streak >= HALT_AFTER_PERMANENT
        ):
            self._halted = exc

    async def _ask(self, request: ChatRequest | ScoreRequest) -> dict[str, Any]:
        if isinstance(request, ScoreRequest):
            assert isinstance(self.provider, Scorer)
            scores = await self.provider.score(request)
            return {"scores": list(scores), "extra": getattr(scores, "extra", {})}
        assert isinstance(self.provider, Judge)
        try:
            response: ChatResponse = await self.provider.generate(request)
        except TimeoutError as exc:
            raise ProviderError("request timed out", transient=True, kind="timeout") from exc
        return {
            "text": response.text,
            "input_tokens": response.input_tokens,
            "output_tokens": response.output_tokens,
            "extra": response.extra,
        }

    async def _fetch(
        self, key: str, request: ChatRequest | ScoreRequest
    ) -> tuple[dict[str, Any], bool]:
        """Ask the model, unless another process sharing the cache already is: then wait for
        its answer. Claims make concurrent runs pay once for the answers they share."""
        while not self.cache.claim(key):
            answer = await self._answer_from_elsewhere(key)
            if answer is not None:
                self.stats.shared_answers += 1
                return answer, True
        self._hold(key)
        try:
            cached = self.cache.get(key)  # stored between our cache miss and our claim
            if cached is not None:
                return cached, True
            answer = await self._invoke(request)
            self.cache.set(key, answer)
            return answer, False
        finally:
            self._held.discard(key)
            self.cache.release(key)

    async def _answer_from_elsewhere(self, key: str) -> dict[str, Any] | None:
        """Wait while another live process holds the claim on `key`; its answer, or None
        when the claim ended without one (that process failed or died)."""
        delay = 0.02
        while self.cache.claimed_elsewhere(key):
            await asyncio.sleep(delay)
            delay = min(2 * delay, 0.5)
        return self.cache.get(key)

    def _hold(self, key: str) -> None:
        self._held.add(key)
        if self._renewer is None or self._renewer.done():
            self._renewer = asyncio.ensure_future(self._renew_claims())

    async def _renew_claims(self) -> None:
        """Renew every claim this run holds, from one task (a task and a timer per claim
        cost more than the call itself when thousands of calls are queued)."""
        while self._held:
            await asyncio.sleep(CLAIM_LEASE_S / 3)
            for key in list(self._held):
                self.cache.renew(key)
