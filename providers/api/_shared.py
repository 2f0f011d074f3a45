"""What the API judges share: keys, base URLs, the client pool, memoised base64 audio, and HTTP
failures as ProviderErrors. Providers never retry (SDK retries are off): the call path does."""

from __future__ import annotations

import email.utils
import math
import os
import re
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Annotated, Any, Generic, Literal, TypeVar
from urllib.parse import SplitResult, parse_qsl, urlsplit

from pydantic import Field

from harness.core.audio import encode_wav
from harness.core.errors import ConfigError
from harness.core.secrets import register, scrub
from harness.core.types import CALL, AudioRef, ProviderConfig, ProviderError
from providers.batch import BatchSettings


class ApiOptions(ProviderConfig):
    """The `provider:` keys every API judge takes (the endpoint's key: `ApiJudge.identity`)."""

    base_url: str | list[str] | None = Field(
        default=None, description="one URL or a list to spread requests over"
    )
    api_key_env: Annotated[str | None, CALL] = Field(
        default=None, description="environment variable holding the key"
    )
    endpoint_id: str | None = Field(
        default=None, description="a name for a group of equivalent servers (cache key)"
    )
    sample_rate: int | None = Field(
        default=None, ge=8000, le=96000, description="resample clips to this rate (Hz)"
    )
    score: Literal["greedy", "expected"] = Field(
        default="greedy",
        description="expected: ask for token log-probabilities and record the expected score",
    )
    top_logprobs: int = Field(
        default=20, ge=1, le=20, description="alternatives per token with score: expected"
    )
    batch: Annotated[bool, CALL] = Field(
        default=False, description="send uncached requests through the batch API (half price)"
    )
    batch_fallback: Annotated[Literal["resubmit", "online"], CALL] = Field(
        default="resubmit",
        description="requests an expired or failed batch did not answer: a new batch or online",
    )
    batch_poll_s: Annotated[float, CALL] = Field(
        default=30.0, gt=0, description="seconds between status checks"
    )
    batch_collect_s: Annotated[float, CALL] = Field(
        default=1.0, gt=0, description="quiet seconds before the collected requests are sent"
    )
    batch_rounds: Annotated[int, CALL] = Field(
        default=3, ge=1, description="batches tried for a request before it counts as failed"
    )


MAX_RETRY_AFTER_S = 600.0
MAX_BODY_BYTES = 256 * 2**20  # far above any answer or batch output file the harness reads
# Encoded clips kept for the requests that send them again, bounded by size, not number.
AUDIO_CACHE_BYTES = 256 * 2**20

C = TypeVar("C")
T = TypeVar("T")


def env_key_named(names: tuple[str, ...]) -> tuple[str, str] | None:
    """(variable, key) of the first variable set; the key is scrubbed from all output."""
    for name in names:
        value = os.environ.get(name, "").strip()
        if value:
            register(value)
            return name, value
    return None


def base_urls(config: ApiOptions, env_var: str) -> list[str]:
    """`base_url` (one or a list), else `env_var` (comma-separated); empty: the default."""
    configured = config.base_url
    if configured is None:
        configured = os.environ.get(env_var, "")
    urls = [configured] if isinstance(configured, str) else list(configured)
    found = [u.strip().rstrip("/") for url in urls for u in re.split(r"[,\s]+", url) if u.strip()]
    for url in found:
        try:
            parts = urlsplit(url)
            parts.port  # noqa: B018 (a port that is not a number raises)
        except ValueError:  # 'http://[::1'
            parts = None
        if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
            shown = re.sub(r"//[^/]*@", "//***@", url)  # no credentials in the message
            raise ConfigError(
                "experiment file",
                "provider.base_url",
                f"{shown!r} is not an http(s) URL (set it in the file or with {env_var})",
            )
        _register_credentials(parts)
    return found


def api_endpoint(
    config: ApiOptions,
    urls: list[str],
    env_var: str,
    official: str | None,
    effective: list[str],
) -> dict[str, Any]:
    """run.json's endpoint: the URLs sent to, where they were set, and whether all are the
    official service (None: the provider has none)."""
    source = "provider.base_url" if config.base_url is not None else env_var if urls else "default"
    same_host = official is not None and all(_host(url) == _host(official) for url in effective)
    return {
        "base_urls": effective,
        "source": source,
        "official_base_url": official,
        "official": None if official is None else bool(effective) and same_host,
    }


def _host(url: str) -> tuple[str, str]:
    parts = urlsplit(url)
    return parts.scheme.lower(), (parts.hostname or "").lower()


def _register_credentials(parts: SplitResult) -> None:
    """Scrub a password (or user) written into a base URL, and key-like query values."""
    register(parts.password)
    register(parts.username)
    for name, value in parse_qsl(parts.query):
        if any(word in name.lower() for word in ("key", "token", "secret", "password", "sig")):
            register(value)


def batch_settings(config: ApiOptions, urls: list[str]) -> BatchSettings | None:
    """The settings of a `batch: true` block (a job lives on one server: one base URL)."""
    if not config.batch:
        return None
    if len(urls) > 1:
        raise ConfigError(
            "experiment file",
            "provider.base_url",
            "batch: true sends each batch to one server: give one base_url, not a list",
        )
    return BatchSettings(
        fallback=config.batch_fallback,
        poll_s=config.batch_poll_s,
        collect_s=config.batch_collect_s,
        rounds=config.batch_rounds,
    )


# Failures of the server, not of the request: it rests, the request goes to another one (a
# 404 from one server of a pool is a server of another model; from every one, a wrong name).
SERVER_FAULTS = frozenset(
    {"connection", "server_error", "bad_response", "wrong_model", "not_found", "rate_limited"}
)


class ClientPool(Generic[C]):
    """One SDK client per base URL (built in the running loop); a request goes to the server
    with the fewest in flight among those not resting. A server at fault rests `DOWN_FIRST_S`,
    doubling up to `DOWN_MAX_S`, and `ask` tries another at once; an answer ends its rest."""

    DOWN_FIRST_S = 0.5
    DOWN_MAX_S = 8.0
    _DOUBLINGS_TO_MAX = 64  # past this many failures the rest is the cap (2**1024 overflows)

    def __init__(
        self,
        urls: list[str],
        factory: Callable[[str | None], C],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._urls: list[str | None] = list(urls) or [None]
        self._factory = factory
        self._clients: list[C] | None = None
        self._in_flight = [0] * len(self._urls)
        self._turn = 0
        self._clock = clock
        self._down_until = [0.0] * len(self._urls)
        self._failures = [0] * len(self._urls)
        self.answered = [0] * len(self._urls)

    @property
    def clients(self) -> list[C]:
        if self._clients is None:
            self._clients = [self._factory(url) for url in self._urls]
        return self._clients

    def _up(self, tried: set[int]) -> list[int]:
        now = self._clock()
        return [i for i in range(len(self._urls)) if self._down_until[i] <= now and i not in tried]

    def _pick(self, tried: set[int]) -> int:
        n = len(self._urls)
        self._turn = (self._turn + 1) % n
        up = self._up(tried)
        if not up:
            return min(range(n), key=lambda i: self._down_until[i])
        return min(up, key=lambda i: (self._in_flight[i], (i - self._turn) % n))

    async def ask(self, send: Callable[[C], Awaitable[T]]) -> T:
        """`send(client)`; after a server's fault, again on another server up and untried."""
        tried: set[int] = set()
        while True:
            try:
                with self.lease(tried) as client:
                    return await send(client)
            except ProviderError as exc:
                if exc.kind not in SERVER_FAULTS or not self._up(tried):
                    raise

    @contextmanager
    def lease(self, tried: set[int] | None = None) -> Iterator[C]:
        """The client of the server `_pick` chooses (not one of `tried`, which it joins)."""
        clients = self.clients
        index = self._pick(tried or set())
        if tried is not None:
            tried.add(index)
        self._in_flight[index] += 1
        try:
            yield clients[index]
        except ProviderError as exc:
            if exc.kind in SERVER_FAULTS:
                self._failures[index] += 1
                doublings = min(self._failures[index] - 1, self._DOUBLINGS_TO_MAX)
                rest = min(self.DOWN_FIRST_S * 2**doublings, self.DOWN_MAX_S)
                self._down_until[index] = self._clock() + rest
            raise
        else:
            self._failures[index] = 0
            self._down_until[index] = 0.0
            self.answered[index] += 1
        finally:
            self._in_flight[index] -= 1

    def built(self) -> list[C]:
        clients, self._clients = self._clients or [], None
        return clients


class _EncodedClips:
    """Least-recently-used base64 payloads, at most `limit` characters in all."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.size = 0
        self._entries: OrderedDict[tuple[Any, ...], str] = OrderedDict()

    def get(self, key: tuple[Any, ...]) -> str | None:
        payload = self._entries.get(key)
        if payload is not None:
            self._entries.move_to_end(key)
        return payload

    def put(self, key: tuple[Any, ...], payload: str) -> None:
        if key in self._entries or len(payload) > self.limit:
            return
        self._entries[key] = payload
        self.size += len(payload)
        while self.size > self.limit:
            _, dropped = self._entries.popitem(last=False)
            self.size -= len(dropped)


_ENCODED = _EncodedClips(AUDIO_CACHE_BYTES)


def wav_base64(ref: AudioRef, sample_rate: int | None, data_url: bool = False) -> str:
    """The clip as base64 WAV (or a `data:` URL), memoised (`AUDIO_CACHE_BYTES`)."""
    key = (ref.path, ref.sha256, sample_rate, data_url)
    payload = _ENCODED.get(key)
    if payload is None:
        import base64

        encoded = base64.b64encode(encode_wav(ref.path, sample_rate)).decode("ascii")
        payload = "data:audio/wav;base64," + encoded if data_url else encoded
        _ENCODED.put(key, payload)
    return payload


def parse_retry_after(value: str | None) -> float | None:
    """Seconds to wait from a Retry-After header (seconds or an HTTP date)."""
    if not value:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        seconds = when.timestamp() - time.time()
    if not math.isfinite(seconds):
        return None
    return min(max(seconds, 0.0), MAX_RETRY_AFTER_S)


def status_error(
    status: int,
    message: str,
    *,
    provider: str,
    model: str,
    key_env: str,
    url: str | None,
    retry_after: float | None = None,
    key_refused: bool = False,
) -> ProviderError:
    """Transient for 408/429/5xx, else permanent with a hint (`key_refused`: as a 401)."""
    detail = scrub(" ".join(message.split()))[:300]
    where = f" at {url}" if url else ""
    if (status in (408, 429) or status >= 500) and not key_refused:
        limited = status == 429
        return ProviderError(
            f"{provider} {'rate limit' if limited else 'server error'} ({status}){where}: {detail}",
            transient=True,
            kind="rate_limited" if limited else "server_error",
            retry_after=retry_after,
        )
    hints = {
        400: ("bad_request", "the request was rejected; check the model's settings"),
        401: ("auth", f"the API key was not accepted; check {key_env}"),
        403: ("permission", f"the key in {key_env} has no access to model {model!r}"),
        404: ("not_found", f"model {model!r} was not found{where}; check provider.model"),
        413: ("bad_request", "the request is too large; send less or shorter audio"),
        422: ("bad_request", "the server could not process the request"),
    }
    kind, hint = hints.get(
        401 if key_refused else status, ("client_error", "the request was refused")
    )
    return ProviderError(f"{provider} {hint} ({status}): {detail}", transient=False, kind=kind)


class ResponseTooLarge(ValueError):
    """A response body larger than `limit` (MAX_BODY_BYTES) once decompressed."""

    def __init__(self, limit: int) -> None:
        super().__init__(
            f"the response body is larger than {limit:,} bytes once decompressed "
            "(a compression bomb?): not read"
        )


# What the SDKs raise on an HTTP 200 they cannot read (HTML, not UTF-8, the wrong shape).
MALFORMED_ANSWER_ERRORS = (ValueError, TypeError, AttributeError, LookupError, RecursionError)


def malformed_answer(provider: str, exc: BaseException, url: str | None) -> ProviderError:
    """A transient ProviderError for an answer that could not be read (asked again)."""
    where = f" from {url}" if url else ""
    reason = scrub(f"{type(exc).__name__}: {exc}")[:200]
    return ProviderError(
        f"{provider} answer{where} could not be read ({reason})",
        transient=True,
        kind="bad_response",
    )


def transport_error(
    provider: str, exc: BaseException, url: str | None, timeout: bool
) -> ProviderError:
    where = f" to {url}" if url else ""
    if timeout:
        return ProviderError(f"{provider} request{where} timed out", transient=True, kind="timeout")
    reason = scrub(str(exc) or type(exc).__name__)[:200]
    return ProviderError(
        f"{provider} connection{where} failed: {reason}", transient=True, kind="connection"
    )
