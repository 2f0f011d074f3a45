"""A bound (`MAX_BODY_BYTES`) on an API response after decompression, so a small gzip bomb is
refused unread (`ResponseTooLarge`) rather than inflated into memory: an httpx transport that
inflates gzip/deflate itself in bounded steps, and an aiohttp middleware (google-genai's)."""

from __future__ import annotations

import zlib
from collections.abc import AsyncIterator, Callable, Mapping
from types import ModuleType
from typing import Any

import httpx

from providers.api._shared import MAX_BODY_BYTES, ResponseTooLarge

httpx2: ModuleType | None
try:  # the openai SDK's fork of httpx (openai >= 3), with its own classes
    import httpx2
except ImportError:  # pragma: no cover - an install without the openai SDK
    httpx2 = None

_STEP = 1 << 16
Observe = Callable[[Mapping[str, str]], None]  # what is told each response's headers
_ACCEPTED = "gzip, deflate"


def _check(total: int) -> None:
    if total > MAX_BODY_BYTES:
        raise ResponseTooLarge(MAX_BODY_BYTES)


_STREAM_BASES: tuple[type, ...] = (httpx.AsyncByteStream,) + (
    (httpx2.AsyncByteStream,) if httpx2 is not None else ()
)


class _Inflating(*_STREAM_BASES):  # type: ignore[misc]
    """The raw body, inflated (gzip or deflate) or passed through, counted as it comes (an
    async byte stream to httpx and to httpx2 alike)."""

    def __init__(self, raw: Any, encoding: str) -> None:
        self.raw, self.encoding = raw, encoding

    async def __aiter__(self) -> AsyncIterator[bytes]:
        total = 0
        inflate: Any = None
        if self.encoding in ("gzip", "x-gzip"):
            inflate = zlib.decompressobj(zlib.MAX_WBITS | 32)
        elif self.encoding == "deflate":
            inflate = zlib.decompressobj(zlib.MAX_WBITS)
        async for chunk in self.raw:
            if inflate is None:
                total += len(chunk)
                _check(total)
                yield chunk
                continue
            pending = chunk
            while pending:
                try:
                    out = inflate.decompress(pending, _STEP)
                except zlib.error:
                    if self.encoding != "deflate" or total:
                        raise
                    inflate = zlib.decompressobj(-zlib.MAX_WBITS)  # raw deflate, no header
                    out = inflate.decompress(pending, _STEP)
                pending = inflate.unconsumed_tail
                total += len(out)
                _check(total)
                if out:
                    yield out
        if inflate is not None:
            rest = inflate.flush()
            _check(total + len(rest))
            if rest:
                yield rest

    async def aclose(self) -> None:
        await self.raw.aclose()


class BoundedTransport(httpx.AsyncBaseTransport):
    """An httpx (or httpx2: `http=httpx2`) transport whose response bodies stop at
    MAX_BODY_BYTES decoded."""

    def __init__(
        self, inner: Any = None, http: ModuleType = httpx, observe: Observe | None = None
    ) -> None:
        self.http, self.observe = http, observe
        self.inner = inner or http.AsyncHTTPTransport(
            limits=http.Limits(max_connections=1000, max_keepalive_connections=100)
        )

    async def handle_async_request(self, request: Any) -> Any:
        request.headers["Accept-Encoding"] = _ACCEPTED
        response = await self.inner.handle_async_request(request)
        if self.observe is not None:
            self.observe(response.headers)
        encoding = response.headers.get("content-encoding", "identity").strip().lower()
        if encoding not in ("", "identity", "gzip", "x-gzip", "deflate"):
            await response.aclose()
            raise ValueError(f"the response is {encoding}-encoded; only {_ACCEPTED} was asked for")
        headers = [
            (name, value)
            for name, value in response.headers.multi_items()
            if name.lower() not in ("content-encoding", "content-length")
        ]
        raw: Any = response.stream  # an async byte stream (httpx types it as either kind)
        return self.http.Response(
            response.status_code,
            headers=headers,
            stream=_Inflating(raw, encoding),
            extensions=response.extensions,
            request=request,
        )

    async def aclose(self) -> None:
        await self.inner.aclose()


def openai_transport(observe: Observe | None = None) -> Any:
    """The bounded transport for the openai SDK's client (httpx2 where the SDK uses it)."""
    import openai

    if httpx2 is not None and issubclass(openai.DefaultAsyncHttpxClient, httpx2.AsyncClient):
        return BoundedTransport(http=httpx2, observe=observe)
    return BoundedTransport(observe=observe)


async def bounded_aiohttp_body(request: Any, handler: Any, observe: Observe | None = None) -> Any:
    """aiohttp client middleware: read the (decompressed) body with the bound, and keep it
    where `ClientResponse.read()`/`.text()` find it."""
    response = await handler(request)
    if observe is not None:
        observe(response.headers)
    pieces, total = [], 0
    try:
        async for piece in response.content.iter_chunked(_STEP):
            total += len(piece)
            _check(total)
            pieces.append(piece)
    except ResponseTooLarge:
        response.close()
        raise
    response._body = b"".join(pieces)  # what ClientResponse.read() returns once read
    return response
