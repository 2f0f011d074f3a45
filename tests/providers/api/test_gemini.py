"""The Gemini judge through the real google-genai SDK against the local fake server: what
arrives on the wire, retries of every transient fault, fast permanent failures, blocked and
malformed answers, the cache, and keys kept out of everything written."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from typing import Any

import pytest

from harness.calls.cache import ResponseCache
from harness.calls.prompting.variants import POINTWISE_SCHEMA
from harness.config.experiment import ExperimentConfig, provider_config
from harness.config.loading import load_experiments
from harness.core.errors import ConfigError
from harness.core.records import Record
from harness.core.types import ChatRequest, ProviderError
from harness.fake_api import FakeServer, FakeSettings
from harness.runs.runner import Runner, RunResult
from providers import create_provider, provider_options
from providers.api.gemini import GeminiJudge, _retry_info
from tests.conftest import run_config

KEY = "AIzaSyFAKE-gemini-test-key-0123456789"
# google-genai subclasses aiohttp.ClientSession, which aiohttp frowns on; nothing to act on here.
pytestmark = pytest.mark.filterwarnings("ignore:Inheritance class Aiohttp:DeprecationWarning")
N_CALLS = 12  # the tiny dataset: 3 items x 4 candidates, pointwise


@pytest.fixture(autouse=True)
def gemini_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GEMINI_API_KEY", KEY)
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    monkeypatch.delenv("GEMINI_BASE_URL", raising=False)


def run(
    tmp_path: Path,
    dataset: Path,
    provider: dict[str, Any],
    *,
    limit: int | None = None,
    name: str = "gemini_test",
) -> tuple[RunResult, list[Record]]:
    config = ExperimentConfig.model_validate(
        {
            "name": name,
            "dataset": str(dataset),
            "provider": {"name": "gemini", "max_concurrency": 4, "retry_wait_s": 0.02, **provider},
            "limit": limit,
            "n_bootstrap": 10,
        }
    )
    return run_config(config, tmp_path)


def test_what_arrives_at_the_server(tmp_path: Path, tiny_dataset: Path, server: FakeServer) -> None:
    result, records = run(tmp_path, tiny_dataset, {"base_url": server.url})
    assert result.stats.errors == 0 and result.stats.parse_failures == 0
    requests = server.requests()
    assert len(requests) == N_CALLS
    for entry in requests:
        assert entry.api == "gemini" and entry.model == "gemini-2.5-flash"
        assert entry.path == "/v1/models/gemini-2.5-flash:generateContent"
        assert entry.audio_parts == 1 and entry.audio_decodable
        assert entry.audio_formats == ["audio/wav"] and entry.audio_seconds == 0.5
        assert entry.audio_sample_rates == [16000]  # the file's own rate
        assert entry.json_mode == "schema" and entry.response_schema == POINTWISE_SCHEMA
        assert entry.temperature == 0.0
        assert entry.system.startswith("You are a music supervisor")
        assert "<audio>" in entry.user_text and "Hello" in entry.user_text
        assert entry.key_present and entry.headers["x-goog-api-key"] == "[REDACTED]"
    scores = [s for r in records for s in r.scores.values()]
    assert None not in scores and len(set(scores)) > 2  # scores depend on the clip
    assert all(r.input_tokens and r.output_tokens for r in records)
    assert {r.extra["input_audio_tokens"] for r in records} == {16}  # 0.5 s at 32 tokens/s


def test_rerun_makes_zero_requests(tmp_path: Path, tiny_dataset: Path, server: FakeServer) -> None:
    first, _ = run(tmp_path, tiny_dataset, {"base_url": server.url})
    again, records = run(tmp_path, tiny_dataset, {"base_url": server.url})
    assert server.stats()["requests"] == N_CALLS
    assert again.stats.model_calls == 0 and again.stats.cache_hits == N_CALLS
    assert all(r.cache_hit for r in records)
    assert again.aggregate.to_json()["metrics"] == first.aggregate.to_json()["metrics"]


@pytest.mark.parametrize("http_client", ["aiohttp", "httpx"])
@pytest.mark.parametrize(
    ("kind", "fail_first"), [("429", 2), ("503", 2), ("500", 1), ("drop", 1), ("timeout", 1)]
)
def test_transient_faults_are_retried_and_succeed(
    tmp_path: Path, tiny_dataset: Path, kind: str, fail_first: int, http_client: str
) -> None:
    settings = FakeSettings(fail_first=fail_first, faults=(kind,), retry_after_s=0.05, slow_s=5.0)
    with FakeServer(settings) as server:
        provider = {"base_url": server.url, "timeout_s": 2.0, "http_client": http_client}
        result, records = run(tmp_path, tiny_dataset, provider, limit=1)
        stats = server.stats()
    assert result.stats.errors == 0
    assert all(s is not None for r in records for s in r.scores.values())
    assert result.stats.retries == 4 * fail_first
    assert stats["max_arrivals"] == fail_first + 1 and stats["distinct_bodies"] == 4
    assert stats["outcome"][f"fault:{kind}"] == 4 * fail_first


def test_rate_limit_error_carries_retry_after(server: FakeServer) -> None:
    server.configure(fail_first=1, faults=("429",), retry_after_s=7)
    judge = create_provider(provider_config(name="gemini", base_url=server.url))
    request = ChatRequest("system", ("Rate it.",), POINTWISE_SCHEMA)

    async def ask() -> ProviderError:
        try:
            with pytest.raises(ProviderError) as caught:
                await judge.generate(request)  # type: ignore[attr-defined]
            return caught.value
        finally:
            await judge.aclose()

    error = asyncio.run(ask())
    assert error.transient and error.kind == "rate_limited" and error.retry_after == 7


def test_retry_delay_from_the_error_body() -> None:
    body = {"error": {"code": 429, "details": [{"@type": "x.RetryInfo", "retryDelay": "36s"}]}}
    assert _retry_info(body) == 36.0
    assert _retry_info({"error": {"code": 429}}) is None


@pytest.mark.parametrize(
    ("status", "kind", "hint"),
    [
        (400, "bad_request", "rejected"),
        (401, "auth", "GEMINI_API_KEY"),
        (403, "permission", "GEMINI_API_KEY"),
        (404, "not_found", "provider.model"),
    ],
)
def test_permanent_errors_fail_fast(
    tmp_path: Path, tiny_dataset: Path, server: FakeServer, status: int, kind: str, hint: str
) -> None:
    result, records = run(
        tmp_path, tiny_dataset, {"base_url": server.url, "model": f"m-error-{status}"}
    )
    # No request is retried; the runner may stop sending the rest once it has seen the failure.
    assert server.stats()["max_arrivals"] == 1 and result.stats.retries == 0
    assert result.stats.errors == N_CALLS
    errors = [sent_error(r) for r in records if sent_error(r)]
    assert errors and all(e.startswith(f"{kind}: ") for e in errors)
    assert all(hint in e and f"({status})" in e and KEY not in e for e in errors)


def sent_error(record: Record) -> str:
    """The error of a call that was sent ("" for one the runner held back after a failure
    every call would meet)."""
    error = record.error or ""
    return "" if error.startswith("not_sent: ") else error


def test_wrong_key_fails_fast_and_is_never_written(
    tmp_path: Path, tiny_dataset: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    with FakeServer(FakeSettings(api_key="the-key-the-server-wants")) as server:
        result, records = run(tmp_path, tiny_dataset, {"base_url": server.url})
        reported = json.dumps(server.stats()) + json.dumps([vars(r) for r in server.requests()])
    assert result.stats.errors == N_CALLS and result.stats.retries == 0
    assert all(sent_error(r).startswith("auth: ") for r in records if sent_error(r))
    assert_key_absent(tmp_path, caplog.text + reported)


def test_no_key_in_records_logs_or_cache(
    tmp_path: Path, tiny_dataset: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    settings = FakeSettings(fault_rate=0.5, faults=("429", "500"), retry_after_s=0.01, api_key=KEY)
    with FakeServer(settings) as server:
        result, _ = run(tmp_path, tiny_dataset, {"base_url": server.url})
        reported = json.dumps(server.stats()) + json.dumps([vars(r) for r in server.requests()])
    assert result.stats.errors == 0 and result.stats.retries > 0  # the key was sent and right
    assert_key_absent(tmp_path, caplog.text + reported)


def assert_key_absent(root: Path, *texts: str) -> None:
    files = [p for p in root.rglob("*") if p.is_file()]
    assert any(p.parent.name == "cache" for p in files)
    for path in files:
        assert KEY.encode() not in path.read_bytes(), path
    for text in texts:
        assert KEY not in text


@pytest.mark.parametrize(
    ("mode", "error", "extra"),
    [
        ("blocked", "empty", {"blocked": "SAFETY"}),
        ("empty", "empty", {"finish_reason": "MAX_TOKENS"}),
        ("malformed", "not_json", {}),
        ("out_of_range", "out_of_range", {}),
        ("wrong_keys", "wrong_keys", {}),
    ],
)
def test_unusable_answers_are_recorded_and_reasked_once(
    tmp_path: Path,
    tiny_dataset: Path,
    server: FakeServer,
    mode: str,
    error: str,
    extra: dict[str, str],
) -> None:
    result, records = run(
        tmp_path, tiny_dataset, {"base_url": server.url, "model": f"answer-{mode}"}, limit=1
    )
    assert result.stats.errors == 0 and result.stats.parse_failures == 4
    assert server.stats()["requests"] == 8  # each call asked twice (reask: 1)
    reasks = [e for e in server.requests() if len(e.roles) > 1]
    # The unusable answer comes back as the model's turn (an empty one has none to show).
    turns = [["user", "assistant", "user"], ["user", "user"]]
    assert len(reasks) == 4 and all(e.roles in turns for e in reasks)
    assert all("Your answer could not be used: " in e.user_text for e in reasks)
    for record in records:
        assert record.parse_error is not None and record.parse_error.startswith(error)
        assert len(record.attempts) == 1
        assert extra.items() <= record.extra.items()
        assert list(record.scores.values()) == [None]


def test_fenced_answers_parse(tmp_path: Path, tiny_dataset: Path, server: FakeServer) -> None:
    result, records = run(
        tmp_path, tiny_dataset, {"base_url": server.url, "model": "answer-fenced"}, limit=1
    )
    assert result.stats.parse_failures == 0
    assert all(r.raw and r.raw.startswith("```json") for r in records)


def test_clips_can_be_resampled(tmp_path: Path, tiny_dataset: Path, server: FakeServer) -> None:
    result, _ = run(tmp_path, tiny_dataset, {"base_url": server.url, "sample_rate": 8000}, limit=1)
    assert result.stats.errors == 0
    assert {tuple(e.audio_sample_rates) for e in server.requests()} == {(8000,)}
    assert {e.audio_seconds for e in server.requests()} == {0.5}
    with pytest.raises(ConfigError, match="sample_rate"):
        GeminiJudge(provider_options({"name": "gemini", "sample_rate": "fast"}))


@pytest.mark.parametrize(("json_mode", "on_wire"), [("object", "object"), ("prompt", None)])
def test_json_modes(
    tmp_path: Path, tiny_dataset: Path, server: FakeServer, json_mode: str, on_wire: str | None
) -> None:
    run(tmp_path, tiny_dataset, {"base_url": server.url, "json_mode": json_mode}, limit=1)
    assert {e.json_mode for e in server.requests()} == {on_wire}
    assert {json.dumps(e.response_schema) for e in server.requests()} == {"null"}


def test_base_url_from_the_environment(
    tmp_path: Path, tiny_dataset: Path, server: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GEMINI_BASE_URL", server.url)
    result, _ = run(tmp_path, tiny_dataset, {}, limit=1)
    assert result.stats.errors == 0 and server.stats()["answered"] == 4
    identity = create_provider(provider_config(name="gemini")).identity()
    assert identity["base_url"] == server.url


def test_requests_are_spread_over_several_base_urls(tmp_path: Path, tiny_dataset: Path) -> None:
    with FakeServer() as one, FakeServer() as two:
        result, _ = run(tmp_path, tiny_dataset, {"base_url": [one.url, two.url + "/gw"]})
        counts = [one.stats()["answered"], two.stats()["answered"]]
    assert result.stats.errors == 0
    assert sum(counts) == N_CALLS and min(counts) > 0


def test_missing_key_fails_fast_with_a_clear_message(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GEMINI_API_KEY")
    judge = GeminiJudge(provider_config(name="gemini"))
    with pytest.raises(ProviderError, match="GEMINI_API_KEY") as caught:
        asyncio.run(judge.generate(ChatRequest("s", ("u",))))
    assert not caught.value.transient and caught.value.kind == "auth"


def test_identity_names_what_changes_answers_and_never_the_key(server: FakeServer) -> None:
    base = GeminiJudge(provider_config(name="gemini", base_url=server.url)).identity()
    assert base["model"] == "gemini-2.5-flash" and base["sample_rate"] is None
    assert base["json_mode"] == "schema" and base["base_url"] == server.url
    assert KEY not in json.dumps(base)
    official = GeminiJudge(provider_config(name="gemini")).identity()
    assert "base_url" not in official and official != base
    named = GeminiJudge(
        provider_options({"name": "gemini", "base_url": server.url, "endpoint_id": "pool"})
    ).identity()
    assert named["endpoint"] == "pool" and "base_url" not in named
    same = provider_options({"name": "gemini", "max_concurrency": 3, "http_client": "httpx"})
    assert GeminiJudge(same).identity() == official


def test_a_key_in_the_experiment_file_is_refused() -> None:
    with pytest.raises(ConfigError, match="environment only"):
        GeminiJudge(provider_options({"name": "gemini", "api_key": "x"}))


def test_the_experiment_file_runs_against_the_fake_server(
    tmp_path: Path, tiny_dataset: Path, server: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GEMINI_BASE_URL", server.url)
    (config,) = load_experiments(Path(__file__).parents[3] / "experiments" / "zeroshot_gemini.yaml")
    config = config.model_copy(update={"dataset": tiny_dataset, "n_bootstrap": 10})
    cache = ResponseCache(tmp_path / "cache")
    try:
        runner = Runner(config, cache=cache, results_dir=tmp_path / "results", show_progress=False)
        result = asyncio.run(runner.run())
    finally:
        cache.close()
    assert result.stats.errors == 0 and result.stats.model_calls == N_CALLS
    assert {e.model for e in server.requests()} == {"gemini-2.5-pro"}
    run_json = json.loads((result.out_dir / "run.json").read_text())
    assert run_json["cost"]["usd"] > 0 and run_json["cost"]["model"] == "gemini-2.5-pro"
    assert "Estimated cost" in (result.out_dir / "report.md").read_text()
