"""The call path: one answer per request key, from the cache, from an identical request in flight
(here or in another process), or from the provider at its pace (`pacing`), retrying transient
failures only. After a failure every later call would meet, the rest fail fast."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

from rich.console import Console
from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt, stop_before_delay
from tenacity.wait import wait_exponential_jitter

from harness.calls.batch_jobs import BatchCollector
from harness.calls.batch_ledger import BatchLedger
from harness.calls.cache import CLAIM_LEASE_S, ResponseCache, cache_key
from harness.calls.pacing import Pacer
from harness.calls.prompting.templates import TemplateHashes, render
from harness.calls.stats import RunStats
from harness.core.errors import StorageError
from harness.core.event_loop import call_timeout
from harness.core.sanitize import clean_value
from harness.core.secrets import env_secrets, scrub, scrub_value
from harness.core.types import ChatRequest, ProviderConfig, ProviderError, Request, ScoreRequest
from providers import Provider
from providers.batch import BatchApi

# Permanent failures every later request would meet: the run stops sending after the first.
RUN_WIDE_KINDS = frozenset({"auth", "permission", "not_found", "load"})
HALT_AFTER_FAILURES = 10
_STREAK_HINTS = {
    "connection": ": is the server running?",
    "timeout": ": is the server answering within timeout_s?",
}


def _retry_after_or_backoff(initial: float, maximum: float) -> Callable[[Any], float]:
    """Retry-After when the server gave one, else exponential backoff with jitter."""
    backoff = wait_exponential_jitter(initial=initial, max=maximum, jitter=2 * initial)

    def wait(state: Any) -> float:
        exc = state.outcome.exception() if state.outcome else None
        if isinstance(exc, ProviderError) and exc.retry_after is not None:
            return float(exc.retry_after)
        return float(backoff(state))

    return wait


class Answerer:
    def __init__(
        self, provider: Provider, settings: ProviderConfig, cache: ResponseCache, stats: RunStats
    ) -> None:
        self.provider = provider
        self.settings = settings
        self.cache = cache
        self.stats = stats
        self._pacer = Pacer(settings.max_concurrency, settings.rpm)
        provider.on_headers = self._pacer.observe
        self._inflight: dict[str, asyncio.Future[tuple[dict[str, Any], bool]]] = {}
        self._halt_reason: str | None = None  # why no more calls are sent, once they are not
        self._held: set[str] = set()  # keys whose claims this run holds
        self._renewer: asyncio.Future[None] | None = None
        self._failure_streak = 0  # calls in a row that failed, after their retries
        self._store_failure: StorageError | None = None  # nothing is paid for that is not kept
        self.batch: BatchCollector | None = None
        self.template_hash = TemplateHashes()  # once per template and run
        self._env_secrets = env_secrets()  # once per run (values registered later still count)

    @cached_property
    def identity(self) -> dict[str, Any]:
        """The provider's identity (part of every key), once per run."""
        return self.provider.identity()

    def use_batches(self, api: BatchApi, ledger: Path, console: Console) -> BatchCollector:
        self.batch = BatchCollector(
            api, BatchLedger(ledger), self.cache, console, self._invoke, self._count_sent
        )
        return self.batch

    def _count_sent(self, requests: int) -> None:
        self.stats.model_calls += requests

    def close(self) -> None:
        if self._renewer is not None:
            self._renewer.cancel()
        if self.batch is not None:
            self.batch.close()
            self.stats.batch = self.batch.to_json()

    async def aclose(self) -> None:
        """Close the call path and its provider (one used besides the run's)."""
        self.close()
        await self.provider.aclose()

    async def answer(self, key: str, request: Request) -> tuple[dict[str, Any], bool]:
        """The answer for `key` and whether it came without a model call."""
        cached = self._cached(key, request)
        if cached is not None:
            return cached, True
        pending = self._inflight.get(key)
        if pending is not None:
            answer, _ = await asyncio.shield(pending)
            return answer, True
        task = asyncio.ensure_future(self._fetch(key, request))
        self._inflight[key] = task
        task.add_done_callback(lambda _: self._fetched(key, task))
        return await task

    def _fetched(self, key: str, task: asyncio.Future[tuple[dict[str, Any], bool]]) -> None:
        self._inflight.pop(key, None)
        if not task.cancelled():  # read now: its awaiter may be cancelled first, and asyncio
            task.exception()  # would print the unread failure with its traceback at exit

    async def _invoke(self, request: Request) -> dict[str, Any]:
        """One fresh answer, retried on transient errors within max_retry_time_s."""
        cfg = self.settings
        retrying = AsyncRetrying(
            stop=stop_after_attempt(cfg.max_attempts) | stop_before_delay(cfg.max_retry_time_s),
            wait=_retry_after_or_backoff(cfg.retry_wait_s, cfg.retry_max_wait_s),
            retry=retry_if_exception(lambda exc: isinstance(exc, ProviderError) and exc.transient),
            reraise=True,
        )
        try:
            async for attempt in retrying:
                with attempt:
                    self.stats.retries += attempt.retry_state.attempt_number > 1
                    return await self._attempt(request)
        except ProviderError as exc:
            if exc.transient and (exc.retry_after or 0.0) >= cfg.max_retry_time_s:
                exc.args = (
                    f"{exc} (asked to wait {exc.retry_after:g} s, more than "
                    f"max_retry_time_s: {cfg.max_retry_time_s:g})",
                )
            self._note_failure(exc)
            raise
        raise AssertionError("unreachable")  # pragma: no cover

    async def _attempt(self, request: Request) -> dict[str, Any]:
        cfg = self.settings
        await self.provider.ready()  # e.g. loading local weights: not timed
        async with self._pacer:
            if self._store_failure is not None:
                raise StorageError(str(self._store_failure))
            if self._halt_reason is not None:
                raise ProviderError(
                    f"the run stopped calling the model {self._halt_reason}",
                    transient=False,
                    kind="not_sent",
                )
            self.stats.model_calls += 1
            started = time.perf_counter()
            try:
                async with call_timeout(cfg.timeout_s):
                    answer = await self._ask(request)
            except TimeoutError as exc:
                raise ProviderError(
                    f"no answer within {cfg.timeout_s:g} s", transient=True, kind="timeout"
                ) from exc
            except ProviderError as exc:
                self._count_resent(exc.resent)
                if exc.kind == "rate_limited":
                    self._pacer.limited(exc.retry_after)
                raise
            self._count_resent(answer.pop("resent", 0))
            answer["latency_s"] = round(time.perf_counter() - started, 4)
            self._pacer.answered(answer)
            self._failure_streak = 0
            return answer

    def _count_resent(self, requests: int) -> None:
        """Requests the provider sent again at once (to a pool's other servers): each is a
        model call and a retry, though it cost the call no attempt."""
        self.stats.model_calls += requests
        self.stats.retries += requests

    def _note_failure(self, exc: ProviderError) -> None:
        """Stop calling at a run-wide failure or after HALT_AFTER_FAILURES in a row."""
        if exc.kind == "not_sent":
            return
        self._failure_streak += 1
        if self._halt_reason is not None:
            return
        if exc.kind in RUN_WIDE_KINDS:
            self._halt_reason = f"after a {exc.kind} failure (see that error)"
        elif self._failure_streak >= HALT_AFTER_FAILURES:
            retried = ", each after its retries" * exc.transient
            self._halt_reason = (
                f"after {self._failure_streak} calls in a row failed{retried}, the last with "
                f"{exc.kind}{_STREAK_HINTS.get(exc.kind, '')} (see that error)"
            )

    async def _ask(self, request: Request) -> dict[str, Any]:
        try:
            return await self.provider.answer(request)
        except ProviderError:
            raise
        except TimeoutError as exc:
            raise ProviderError("request timed out", transient=True, kind="timeout") from exc
        except Exception as exc:  # a provider's bug must not end the run: it fails one call
            raise ProviderError(
                f"{type(exc).__name__}: {exc}", transient=False, kind="provider_crash"
            ) from exc

    async def _fetch(self, key: str, request: Request) -> tuple[dict[str, Any], bool]:
        """Ask the model, unless another process holds the key's claim: then wait for it."""
        while not self.cache.claim(key):
            answer = await self._answer_from_elsewhere(key, request)
            if answer is not None:
                self.stats.shared_answers += 1
                return answer, True
        self._hold(key)
        try:
            cached = self._cached(key, request)  # stored between our cache miss and our claim
            if cached is not None:
                return cached, True
            if self.batch is not None:
                answer = await self.batch.answer(key, request)
            else:
                answer = await self._invoke(request)
                answer = scrub_value(answer, self._env_secrets)  # answers may quote a key
            answer = clean_value(answer)  # a lone surrogate ("\ud800" in JSON) is no UTF-8
            try:
                self.cache.set(key, answer)  # before its record is written
            except StorageError as exc:  # a full disk: no later call is sent
                self._store_failure = self._store_failure or exc
                raise
            return answer, False
        finally:
            self._held.discard(key)
            self.cache.release(key)

    async def _answer_from_elsewhere(self, key: str, request: Request) -> dict[str, Any] | None:
        delay = 0.02
        while self.cache.claimed_elsewhere(key):
            await asyncio.sleep(delay)
            delay = min(2 * delay, 0.5)
        return self._cached(key, request)

    def _cached(self, key: str, request: Request) -> dict[str, Any] | None:
        if isinstance(request, ScoreRequest):
            return self.cache.get(key, "scores", len(request.candidates))
        return self.cache.get(key, "chat")

    def _hold(self, key: str) -> None:
        self._held.add(key)
        if self._renewer is None or self._renewer.done():
            self._renewer = asyncio.ensure_future(self._renew_claims())

    async def _renew_claims(self) -> None:
        while self._held:
            await asyncio.sleep(CLAIM_LEASE_S / 3)
            for key in list(self._held):
                self.cache.renew(key)


class Parsed(Protocol):
    """A parsed answer: `error` says why the text was unusable (None: it was usable)."""

    @property
    def error(self) -> str | None: ...


P = TypeVar("P", bound=Parsed)


@dataclass
class Asked(Generic[P]):
    """A judge's last answer and parse, earlier unusable answers, usage over all attempts."""

    parsed: P | None = None
    text: str | None = None
    attempts: list[str] = field(default_factory=list)
    cache_hit: bool = False
    input_tokens: int | None = None
    output_tokens: int | None = None
    latency_s: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    error: ProviderError | None = None

    def error_text(self) -> str | None:
        return None if self.error is None else f"{self.error.kind}: {scrub(str(self.error))}"

    def _add(self, answer: dict[str, Any], hit: bool) -> None:
        self.cache_hit = hit if self.text is None else self.cache_hit and hit
        for name in ("input_tokens", "output_tokens"):
            if answer.get(name) is not None:
                setattr(self, name, (getattr(self, name) or 0) + answer[name])
        self.latency_s = answer.get("latency_s")
        extra = answer.get("extra") or {}
        for name, value in extra.items():
            before = self.extra.get(name)
            # `*_tokens` counts are summed like input_tokens: the cost prices every attempt
            if _is_count(name, value) and _is_count(name, before):
                value += before
            self.extra[name] = value


def _is_count(name: str, value: Any) -> bool:
    return name.endswith("_tokens") and isinstance(value, int) and not isinstance(value, bool)


def reask_request(request: ChatRequest, answer: str, reason: str) -> ChatRequest:
    """The request with the unusable answer and why it was rejected (`reask.jinja`)."""
    reply = render("reask.jinja", {"answer": answer, "reason": reason}, []).parts
    return request.with_follow_up(answer, "".join(str(p) for p in reply))


def reask_step(
    first_key: str, request: ChatRequest, answer: str, reason: str | None
) -> tuple[ChatRequest, str]:
    """The re-ask and its key, derived from the first attempt's key."""
    request = reask_request(request, answer, reason or "unusable")
    follow_ups = request.key_fields()["follow_ups"]
    return request, cache_key({"reask_of": first_key, "follow_ups": follow_ups})


async def ask_until_parsed(
    answerer: Answerer,
    key: str,
    request: ChatRequest,
    parse: Callable[[str], P],
    *,
    reask: int,
) -> Asked[P]:
    """Ask, parse, and re-ask up to `reask` times while the answer is unusable."""
    asked: Asked[P] = Asked()
    key_now = key
    for _ in range(reask + 1):
        if asked.text is not None and asked.parsed is not None:
            asked.attempts.append(asked.text)
            request, key_now = reask_step(key, request, asked.text, asked.parsed.error)
        try:
            answer, hit = await answerer.answer(key_now, request)
        except ProviderError as exc:
            asked.error = exc
            return asked
        asked._add(answer, hit)
        asked.text = answer["text"]
        asked.parsed = parse(answer["text"])
        if asked.parsed.error is None:
            break
    return asked


def cached_parse(
    answerer: Answerer, key: str, request: ChatRequest, parse: Callable[[str], P]
) -> P | None:
    """What `ask_until_parsed` would give from the cache alone, or None (the dry run's)."""
    first = key
    for _ in range(answerer.settings.reask + 1):
        answer = answerer.cache.get(key, "chat")
        if answer is None:
            return None
        parsed = parse(answer["text"])
        if parsed.error is None:
            return parsed
        request, key = reask_step(first, request, answer["text"], parsed.error)
    return None
