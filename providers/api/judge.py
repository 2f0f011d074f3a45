"""The public base of the judges behind an HTTP API (`ApiJudge`): a subclass names its service
in class attributes and implements `make_client`, `build_request`, `send` and `status_code`;
the base owns base URLs, keys, identity, the client pool, batch settings and SDK errors."""

from __future__ import annotations

import dataclasses
import re
from abc import abstractmethod
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any, ClassVar, Generic, TypeVar

from harness.core.secrets import scrub
from harness.core.types import ChatRequest, ChatResponse, ProviderConfig, ProviderError
from providers.api._shared import (
    MALFORMED_ANSWER_ERRORS,
    ApiOptions,
    ClientPool,
    ResponseTooLarge,
    api_endpoint,
    base_urls,
    batch_settings,
    env_key_named,
    malformed_answer,
    status_error,
    transport_error,
)
from providers.base import Judge

C = TypeVar("C")  # the SDK's client


class ApiJudge(Judge, Generic[C]):
    label: ClassVar[str]  # the service's name in messages ("OpenAI", "Gemini")
    url_variable: ClassVar[str]  # the environment variable with the base URL
    key_variables: ClassVar[tuple[str, ...]]  # the variables with the key, first found wins
    official_base_url: ClassVar[str | None] = None  # None: self-hosted, no official service
    needs_key: ClassVar[bool] = True  # False: a server that may run without a key
    keyless_placeholder: ClassVar[str] = "EMPTY"  # sent where no key is needed and none is set
    Options = ApiOptions
    config: ApiOptions

    def __init__(self, config: ProviderConfig) -> None:
        super().__init__(config)
        self.urls = base_urls(self.config, self.url_variable)
        self.sample_rate = self.config.sample_rate
        self._pool: ClientPool[tuple[C, str | None]] = ClientPool(self.urls, self._pooled)
        self._batch_settings = batch_settings(self.config, self.urls)

    def headers_seen(self, headers: Mapping[str, str]) -> None:
        if self.on_headers is not None:
            self.on_headers(headers)

    @property
    def key_names(self) -> tuple[str, ...]:
        """The variables the key is read from: `provider.api_key_env`, else the class's."""
        own = self.config.api_key_env
        return (own,) if own else self.key_variables

    @property
    def key_env(self) -> str:
        """The variable a message about the key names: the one set, else the first."""
        found = env_key_named(self.key_names)
        return found[0] if found else self.key_names[0]

    def wire_url(self, url: str | None) -> str | None:
        return url or self.official_base_url  # None: no URL configured

    def endpoint(self) -> dict[str, Any]:
        """run.json's provenance, from the values the clients are built with."""
        found = env_key_named(self.key_names)
        configured: list[str | None] = [*self.urls] or [None]  # as the ClientPool builds
        wire = [u for u in map(self.wire_url, configured) if u]
        endpoint = api_endpoint(
            self.config, self.urls, self.url_variable, self.official_base_url, wire
        )
        endpoint |= {"api_key_env": found[0] if found else None}
        if len(configured) > 1:  # how many answers each server of the pool gave
            answered = zip(configured, self._pool.answered, strict=True)
            endpoint["answered"] = {scrub(url or ""): n for url, n in answered}
        return endpoint

    def missing_key(self) -> str | None:
        if not self.needs_key or self.urls or env_key_named(self.key_names) is not None:
            return None  # a stand-in server needs none
        names = self.key_names
        return names[0] + (f" (or {' or '.join(names[1:])})" if len(names) > 1 else "")

    def identity(self) -> dict[str, Any]:
        """With the endpoint as the key knows it (`endpoint_id`, else the base URLs) and the
        sample rate even at its default."""
        identity = super().identity()
        identity.pop("base_url", None)
        endpoint = identity.pop("endpoint_id", None)
        if endpoint is not None:
            identity["endpoint"] = str(endpoint)
        elif self.urls:
            identity["base_url"] = self.urls[0] if len(self.urls) == 1 else sorted(self.urls)
        return identity | {"sample_rate": self.sample_rate}

    def _pooled(self, url: str | None) -> tuple[C, str | None]:
        found = env_key_named(self.key_names)
        if found is None:
            if self.needs_key and url is None:
                raise ProviderError(
                    f"no {self.label} API key: set {self.missing_key()} in the environment",
                    transient=False,
                    kind="auth",
                )
            key = self.keyless_placeholder  # a local server (vLLM, the fake) needs none
        else:
            key = found[1]
        return self.make_client(self.wire_url(url), key), url

    @abstractmethod
    def make_client(self, base_url: str | None, key: str) -> C:
        """The SDK client that sends to `base_url` (never a URL of the SDK's choosing)."""

    async def ready(self) -> None:
        self._pool.clients  # noqa: B018  # imports the SDK and builds its clients, untimed

    def batch_client(self) -> tuple[C, str | None]:
        return self._pool.clients[0]  # batches go to the one base URL

    async def close_client(self, client: C) -> None:
        await client.close()  # type: ignore[attr-defined]

    async def aclose(self) -> None:
        for client, _ in self._pool.built():
            await self.close_client(client)

    @abstractmethod
    def build_request(self, request: ChatRequest) -> Any:
        """What `send` sends for `request` (built before a client is leased)."""

    @abstractmethod
    async def send(self, client: C, built: Any) -> ChatResponse:
        """Send one built request and read the answer."""

    async def generate(self, request: ChatRequest) -> ChatResponse:
        built = self.build_request(request)
        sent = 0

        async def send(pooled: tuple[C, str | None]) -> ChatResponse:
            nonlocal sent
            sent += 1
            client, url = pooled
            with self.sdk_errors(url):
                response = await self.send(client, built)
            if len(self.urls) > 1:  # a pool: the record names the server that answered
                response.extra["server"] = scrub(url or "")
            return response

        try:
            response = await self._pool.ask(send)
        except ProviderError as exc:
            exc.resent = max(sent - 1, 0)  # counted by the run as model calls and retries
            raise
        return dataclasses.replace(response, resent=sent - 1) if sent > 1 else response

    def check_model(self, answered: str | None) -> None:
        """Refuse an answer naming another model (the server's fault: another one is asked)."""
        if not same_model(self.model, answered):
            raise WrongModel(answered)

    def is_malformed(self, exc: BaseException) -> bool:
        """Whether the SDK raised `exc` on an answer it could not read (asked again)."""
        return isinstance(exc, MALFORMED_ANSWER_ERRORS)

    @abstractmethod
    def status_code(self, exc: BaseException) -> int | None:
        """The HTTP status of an SDK error for an error answer (None: not one)."""

    def error_message(self, exc: BaseException) -> str:
        return str(exc)

    def retry_after(self, exc: BaseException) -> float | None:
        return None  # seconds the service asked to wait

    def is_auth_failure(self, exc: BaseException) -> bool:
        return self.status_code(exc) == 401

    def is_timeout(self, exc: BaseException) -> bool:
        return isinstance(exc, TimeoutError)

    def is_connection_error(self, exc: BaseException) -> bool:
        return isinstance(exc, ConnectionError)

    def should_retry(self, exc: BaseException) -> bool:
        """408, 429 and 5xx answers; timeouts, failed connections, unreadable answers."""
        status = self.status_code(exc)
        if status is not None:
            return (status in (408, 429) or status >= 500) and not self.is_auth_failure(exc)
        return True

    @contextmanager
    def sdk_errors(self, url: str | None, label: str | None = None) -> Iterator[None]:
        """Raise the SDK's exceptions as the ProviderErrors they mean (others unchanged)."""
        try:
            yield
        except ProviderError:
            raise
        except Exception as exc:
            error = self.provider_error(exc, url, label or self.label)
            if error is None:
                raise
            raise error from None

    def provider_error(
        self, exc: BaseException, url: str | None, label: str
    ) -> ProviderError | None:
        status = self.status_code(exc)
        if status is not None:
            error = status_error(
                status,
                self.error_message(exc),
                provider=label,
                model=self.model,
                key_env=self.key_env,
                url=url,
                retry_after=self.retry_after(exc),
                key_refused=self.is_auth_failure(exc),
            )
        elif self.is_timeout(exc):
            error = transport_error(label, exc, url, timeout=True)
        elif self.is_connection_error(exc) and isinstance(exc.__cause__, ResponseTooLarge):
            error = malformed_answer(label, exc.__cause__, url)  # a body refused unread
        elif self.is_connection_error(exc):
            error = transport_error(label, exc, url, timeout=False)
        elif isinstance(exc, WrongModel):
            error = ProviderError(
                f"{label}{f' at {scrub(url)}' if url else ''} answered as model {exc.args[0]!r}, "
                f"not {self.model!r}: the server serves another model",
                transient=True,
                kind="wrong_model",
            )
        elif self.is_malformed(exc):
            error = malformed_answer(label, exc, url)
        else:
            return None
        error.transient = self.should_retry(exc)
        return error


class WrongModel(Exception):
    """An answer naming another model than the one asked (args: the name it gave)."""


def same_model(asked: str, answered: str | None) -> bool:
    """The same name (`models/` aside) or a dated or tagged release of it (`gpt-4o-2024-08-06`,
    `gemini-1.5-flash-002`, `llama3:latest`), not a longer name (`gpt-4o-mini`); a server that
    names none is taken at its word."""
    if not answered:
        return True
    asked, answered = asked.removeprefix("models/"), answered.removeprefix("models/")
    release = answered.removeprefix(asked)
    return answered.startswith(asked) and re.fullmatch(r"(-[0-9]+)*|[:@].+", release) is not None
