"""D23: a small gzip (or deflate) response that inflates to far more than any answer is that
request's `bad_response` error, read no further than `MAX_BODY_BYTES` decoded, on every
transport: the openai SDK (httpx), google-genai over aiohttp (its default) and over httpx.
Ordinary compressed answers still read."""

from __future__ import annotations

import asyncio
import gzip
import json
import resource
import threading
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from harness.config.experiment import provider_config
from harness.core.types import ChatRequest, ProviderError
from providers import create_provider
from providers.api import _bounded_body
from tests.support.chat_completion import chat_completion

LIMIT = 4 * 2**20  # the bound, lowered for the test
BOMB_BYTES = 64 * 2**20  # what the bomb inflates to: 16 x the bound (about 64 KB gzipped)


def _openai_answer() -> bytes:
    return json.dumps(chat_completion('{"score": 7}')).encode()


def _gemini_answer() -> bytes:
    return json.dumps(
        {
            "candidates": [
                {
                    "content": {"role": "model", "parts": [{"text": '{"score": 7}'}]},
                    "finishReason": "STOP",
                }
            ],
            "usageMetadata": {
                "promptTokenCount": 3,
                "candidatesTokenCount": 2,
                "totalTokenCount": 5,
            },
        }
    ).encode()


def _bomb(encoding: str) -> bytes:
    body = b'{"pad": "' + b" " * BOMB_BYTES + b'"}'
    return gzip.compress(body, 9) if encoding == "gzip" else zlib.compress(body, 9)


class BombServer:
    """Answers every POST with `mode`: a bomb, or a small compressed answer."""

    def __init__(self) -> None:
        self.mode = ("bomb", "gzip")
        self.bombs = {enc: _bomb(enc) for enc in ("gzip", "deflate")}

    async def handle(self, request: web.Request) -> web.Response:
        await request.read()
        kind, encoding = self.mode
        if kind == "bomb":
            body = self.bombs[encoding]
        else:
            plain = _gemini_answer() if "generateContent" in request.path else _openai_answer()
            body = gzip.compress(plain) if encoding == "gzip" else zlib.compress(plain)
        return web.Response(
            body=body,
            headers={"Content-Type": "application/json", "Content-Encoding": encoding},
        )


@pytest.fixture
def bomb_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[BombServer, str]]:
    monkeypatch.setattr(_bounded_body, "MAX_BODY_BYTES", LIMIT)
    server = BombServer()
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", server.handle)
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    test_server = TestServer(app, loop=loop)
    asyncio.run_coroutine_threadsafe(test_server.start_server(), loop).result(10)
    try:
        yield server, f"http://127.0.0.1:{test_server.port}"
    finally:
        asyncio.run_coroutine_threadsafe(test_server.close(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


PROVIDERS = {
    "openai-compatible": lambda url: {
        "name": "openai-compatible",
        "model": "m",
        "base_url": url + "/v1",
    },
    "gemini-aiohttp": lambda url: {"name": "gemini", "base_url": url, "http_client": "aiohttp"},
    "gemini-httpx": lambda url: {"name": "gemini", "base_url": url, "http_client": "httpx"},
}


def _ask(settings: dict[str, Any]) -> Any:
    provider = create_provider(provider_config(**settings, timeout_s=20.0))
    request = ChatRequest("Judge.", ("Rate it.",), {"type": "object"})

    async def main() -> Any:
        try:
            return await provider.answer(request)
        finally:
            await provider.aclose()

    return asyncio.run(main())


@pytest.mark.slow
@pytest.mark.parametrize("encoding", ["gzip", "deflate"])
@pytest.mark.parametrize("name", sorted(PROVIDERS))
def test_d23_a_compression_bomb_is_that_requests_error(
    name: str, encoding: str, bomb_server: tuple[BombServer, str], tmp_path: Path
) -> None:
    server, url = bomb_server
    server.mode = ("bomb", encoding)
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(ProviderError) as caught:
        _ask(PROVIDERS[name](url))
    grown_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before
    assert caught.value.kind == "bad_response", caught.value
    assert f"larger than {LIMIT:,} bytes once decompressed" in str(caught.value)
    assert grown_kib < 3 * BOMB_BYTES // 1024 // 4, grown_kib  # never the whole bomb (x copies)


@pytest.mark.slow
@pytest.mark.parametrize("encoding", ["gzip", "deflate"])
@pytest.mark.parametrize("name", sorted(PROVIDERS))
def test_d23_compressed_answers_still_read(
    name: str, encoding: str, bomb_server: tuple[BombServer, str]
) -> None:
    server, url = bomb_server
    server.mode = ("answer", encoding)
    answer = _ask(PROVIDERS[name](url))
    assert answer["text"] == '{"score": 7}'
