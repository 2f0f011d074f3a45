"""Secrets stay out of what a run prints and every report it writes (issue 27, class 3): D4,
credentials in a base URL, D5, a model name equal to the key, and D24, a redirect to another
origin, which must not carry the Gemini key along."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest
import yaml
from typer.testing import CliRunner

from harness.cli.main import app
from harness.fake_api import FakeServer
from tests.reliability.conftest import FAST, MakeDataset, fast_settings

URL_KEY = "urlpass-4d8e19bb27c6"
MODEL_KEY = "modelkey-91c3e7aa5f02"


def _run(experiment: Path, tmp_path: Path, env: dict[str, str] | None = None) -> Any:
    return CliRunner().invoke(
        app,
        ["run", str(experiment), "--results-dir", str(tmp_path / "results"),
         "--cache-dir", str(tmp_path / "cache"), "--no-progress"],
        env=env,
    )  # fmt: skip


def _nowhere(secret: str, folder: Path, printed: str) -> None:
    files = [p for p in folder.rglob("*") if p.is_file()]
    assert any(p.suffix == ".md" for p in files)
    for path in files:
        assert secret.encode() not in path.read_bytes(), path
    assert secret not in printed


@pytest.mark.slow
@pytest.mark.parametrize("form", ["userinfo", "query"])
def test_d4_credentials_in_a_base_url_are_not_in_the_endpoint_line_or_report_md(
    form: str, make_dataset: MakeDataset, tmp_path: Path
) -> None:
    """D4: the unofficial-endpoint line (console) and report.md were made from unscrubbed
    stats, while run.json and config.yaml were scrubbed."""
    dataset = make_dataset(n_items=2)
    with FakeServer(fast_settings()) as server:
        base = server.openai_base_url
        url = (
            base.replace("://", f"://user:{URL_KEY}@", 1) if form == "userinfo"
            else f"{base}?key={URL_KEY}"
        )  # fmt: skip
        # the OpenAI provider at another server: an unofficial endpoint, named on the console
        block = {"name": "openai", "model": "gpt-4o-mini", "base_url": url, **FAST}
        config = {"name": "creds", "dataset": str(dataset), "provider": block, "n_bootstrap": 50}
        experiment = tmp_path / "exp.yaml"
        experiment.write_text(yaml.safe_dump(config))
        result = _run(experiment, tmp_path, {"OPENAI_API_KEY": "sk-test-d4-not-a-real-key"})
        report = CliRunner().invoke(
            app, ["report", str(tmp_path / "results" / "creds"), "--out", str(tmp_path / "rep")]
        )
    assert result.exit_code in (0, 1), result.output  # `?key=` may not reach the API's path
    assert "127.0.0.1" in result.output  # the endpoint line is still there, without the key
    assert report.exit_code in (0, 2) and "Traceback" not in report.output, report.output
    _nowhere(URL_KEY, tmp_path / "results", result.output + report.output)
    if report.exit_code == 0:  # a run with no usable score is left out of reports (exit 2)
        _nowhere(URL_KEY, tmp_path / "rep", "")
    else:
        assert result.exit_code == 1 and "no metrics, every call failed" in report.output, (
            report.output
        )


@pytest.mark.slow
def test_d5_a_model_name_equal_to_the_key_is_not_in_report_md(
    make_dataset: MakeDataset, tmp_path: Path
) -> None:
    """D5: report.md printed the configured model name even when it was the key itself."""
    dataset = make_dataset(n_items=2)
    with FakeServer(fast_settings()) as server:
        block = {
            "name": "openai-compatible",
            "model": MODEL_KEY,
            "base_url": server.openai_base_url,
            "api_key_env": "LOCAL_SERVER_API_KEY",
            **FAST,
        }
        config = {"name": "mk", "dataset": str(dataset), "provider": block, "n_bootstrap": 50}
        experiment = tmp_path / "exp.yaml"
        experiment.write_text(yaml.safe_dump(config))
        result = _run(experiment, tmp_path, {"LOCAL_SERVER_API_KEY": MODEL_KEY})
    assert result.exit_code == 0, result.output
    _nowhere(MODEL_KEY, tmp_path / "results", result.output)


class _Redirect(BaseHTTPRequestHandler):
    target = ""
    hits = 0

    def do_POST(self) -> None:
        _Redirect.hits += 1
        self.rfile.read(int(self.headers.get("content-length", 0)))
        self.send_response(307)
        self.send_header("location", self.target + self.path)
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


class _Record(BaseHTTPRequestHandler):
    seen: ClassVar[list[dict[str, str]]] = []

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", 0)))
        _Record.seen.append({k.lower(): v for k, v in self.headers.items()})
        self.send_response(500)
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def redirect_to_other_origin() -> Iterator[str]:
    servers = [ThreadingHTTPServer(("127.0.0.1", 0), h) for h in (_Record, _Redirect)]
    other, redirect = servers
    # another origin: same host, another port
    _Redirect.target = f"http://127.0.0.1:{other.server_address[1]}"
    threads = [threading.Thread(target=s.serve_forever, daemon=True) for s in servers]
    for thread in threads:
        thread.start()
    _Record.seen.clear()
    _Redirect.hits = 0
    try:
        yield f"http://127.0.0.1:{redirect.server_address[1]}"
    finally:
        for server in servers:
            server.shutdown()
            server.server_close()


def test_d24_gemini_never_sends_its_key_to_another_origin_on_a_redirect(
    redirect_to_other_origin: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """D24: the Gemini provider's aiohttp transport followed a 307 to another origin with
    `x-goog-api-key` (the openai SDK drops Authorization on such a redirect)."""
    from harness.core.types import ChatRequest, ProviderError
    from providers import create_provider, provider_options

    key = "gemini-redirect-secret-6a1f"
    monkeypatch.setenv("GEMINI_API_KEY", key)
    judge = create_provider(
        provider_options(
            {
                "name": "gemini",
                "model": "gemini-2.5-flash",
                "base_url": redirect_to_other_origin,
                "max_attempts": 1,
                "timeout_s": 5.0,
            }
        )
    )

    async def ask() -> None:
        try:
            await judge.answer(ChatRequest(system="s", parts=("hello",)))
        except ProviderError:
            pass
        finally:
            await judge.aclose()

    asyncio.run(ask())
    assert _Redirect.hits >= 1  # the request went out, and was answered with a redirect
    assert all(key not in " ".join(headers.values()) for headers in _Record.seen), _Record.seen
