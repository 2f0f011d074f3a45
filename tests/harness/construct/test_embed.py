from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from harness.construct.embed import EmbedderConfig, embed_texts
from harness.core.errors import HarnessError


def fake_vector(text: str, dims: int = 6) -> list[float]:
    digest = hashlib.sha256(text.encode()).digest()
    return [b - 128.0 for b in digest[:dims]]


class EmbeddingsStub(ThreadingHTTPServer):
    """A tiny OpenAI-compatible `/v1/embeddings` endpoint: records requests, can answer 429s."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.requests: list[dict[str, Any]] = []
        self.headers_seen: list[dict[str, str]] = []
        self.rate_limit_next = 0
        self.status: int | None = None


class _Handler(BaseHTTPRequestHandler):
    server: EmbeddingsStub

    def log_message(self, format: str, *args: Any) -> None:
        return

    def _reply(
        self, status: int, body: dict[str, Any], headers: dict[str, str] | None = None
    ) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.requests.append(body)
        self.server.headers_seen.append({k.lower(): v for k, v in self.headers.items()})
        if self.path != "/v1/embeddings":
            self._reply(404, {"error": {"message": "no such route"}})
        elif self.server.status is not None:
            self._reply(self.server.status, {"error": {"message": "invalid api key"}})
        elif self.server.rate_limit_next > 0:
            self.server.rate_limit_next -= 1
            self._reply(429, {"error": {"message": "slow down"}}, {"Retry-After": "0"})
        else:
            data = [
                {"object": "embedding", "index": i, "embedding": fake_vector(text)}
                for i, text in enumerate(body["input"])
            ]
            data.reverse()  # the index, not the order, says which text a vector belongs to
            usage = {"prompt_tokens": 1, "total_tokens": 1}
            self._reply(
                200, {"object": "list", "data": data, "model": body["model"], "usage": usage}
            )


@pytest.fixture
def stub() -> Iterator[EmbeddingsStub]:
    server = EmbeddingsStub()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def config_for(stub: EmbeddingsStub, **kwargs: Any) -> EmbedderConfig:
    return EmbedderConfig(
        kind="openai", base_url=f"http://127.0.0.1:{stub.server_port}/v1", **kwargs
    )


def test_endpoint_batches_orders_retries_and_caches(
    stub: EmbeddingsStub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-secret-123456")
    texts = ["calm piano", "loud rock", "calm piano", "sad strings", "disco", "jazz"]
    stub.rate_limit_next = 1
    config = config_for(stub, batch_size=2, dimensions=6)
    vectors = embed_texts(texts, config, cache_dir=tmp_path / "cache")
    expected = np.array([fake_vector(t) for t in texts])
    expected /= np.linalg.norm(expected, axis=1, keepdims=True)
    np.testing.assert_allclose(vectors, expected)
    # 5 distinct texts in batches of 2 = 3 requests, plus the one answered 429.
    assert len(stub.requests) == 4
    assert stub.requests[0] == stub.requests[1]
    assert stub.requests[0]["model"] == "text-embedding-3-large"
    assert stub.requests[0]["dimensions"] == 6 and stub.requests[0]["encoding_format"] == "float"
    assert stub.headers_seen[0]["authorization"] == "Bearer sk-test-secret-123456"
    again = embed_texts(texts[::-1], config, cache_dir=tmp_path / "cache")
    np.testing.assert_allclose(again, expected[::-1])
    assert len(stub.requests) == 4  # all from the cache


def test_endpoint_permanent_error_is_one_line(
    stub: EmbeddingsStub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-wrong-key-abcdef")
    stub.status = 401
    with pytest.raises(HarnessError, match="answered 401") as caught:
        embed_texts(["x"], config_for(stub), cache_dir=tmp_path / "cache")
    assert "sk-wrong-key-abcdef" not in str(caught.value)
    assert len(stub.requests) == 1  # permanent: not retried


def test_endpoint_needs_a_key_or_a_base_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(HarnessError, match="OPENAI_API_KEY"):
        embed_texts(["x"], EmbedderConfig(kind="openai"))


def test_offline_model_is_normalised_and_semantic() -> None:
    vectors = embed_texts(
        ["slow calm piano", "gentle quiet piano music", "aggressive heavy metal"], EmbedderConfig()
    )
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-6)
    similarity = vectors @ vectors.T
    assert similarity[0, 1] > similarity[0, 2]
