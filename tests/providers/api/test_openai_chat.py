"""The chat-completions judges (openai-audio, openai-compatible) through the real openai SDK
against the local fake server: wire format, retries of every transient fault, fast permanent
failures, blocked and malformed answers, the cache, several base URLs, and keys kept out of
everything written."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from pathlib import Path
from typing import Any

import pytest

from harness.calls.prompting.variants import POINTWISE_SCHEMA
from harness.config.experiment import ExperimentConfig, provider_config
from harness.config.loading import load_experiments
from harness.core.errors import ConfigError
from harness.core.records import Record
from harness.core.types import AudioRef, ChatRequest, ProviderError
from harness.fake_api import FakeServer, FakeSettings
from harness.runs.runner import RunResult
from providers import create_provider, provider_options
from providers.api.openai_chat import OpenAIAudioJudge, OpenAICompatibleJudge
from tests.conftest import run_config
from tests.support.chat_completion import chat_completion

KEY = "sk-fake-openai-test-key-0123456789"
N_CALLS = 12  # the tiny dataset: 3 items x 4 candidates, pointwise
PROVIDERS = ("openai-audio", "openai-compatible")
EXPERIMENTS = Path(__file__).parents[3] / "experiments"


@pytest.fixture(autouse=True)
def openai_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


def provider_block(name: str, server: FakeServer | None, **extra: Any) -> dict[str, Any]:
    block: dict[str, Any] = {"name": name, "max_concurrency": 4, "retry_wait_s": 0.02}
    if name == "openai-compatible":
        block["model"] = "Qwen/Qwen2.5-Omni-7B"
    if server is not None:
        block["base_url"] = server.openai_base_url
    return {**block, **extra}


def run(
    tmp_path: Path, dataset: Path, provider: dict[str, Any], *, limit: int | None = None
) -> tuple[RunResult, list[Record]]:
    config = ExperimentConfig.model_validate(
        {
            "name": "openai_test",
            "dataset": str(dataset),
            "provider": provider,
            "limit": limit,
            "n_bootstrap": 10,
        }
    )
    return run_config(config, tmp_path)


def test_gpt4o_audio_on_the_wire(tmp_path: Path, tiny_dataset: Path, server: FakeServer) -> None:
    result, records = run(
        tmp_path, tiny_dataset, provider_block("openai-audio", server, max_tokens=20)
    )
    assert result.stats.errors == 0 and result.stats.parse_failures == 0
    requests = server.requests()
    assert len(requests) == N_CALLS
    for entry in requests:
        assert entry.api == "openai" and entry.path == "/v1/chat/completions"
        assert entry.model == "gpt-4o-audio-preview"
        assert entry.audio_parts == 1 and entry.audio_decodable and entry.audio_formats == ["wav"]
        assert (
            entry.json_mode is None
        )  # these models reject json_schema: JSON is asked for in the prompt
        assert (
            entry.system.startswith("You are a music supervisor") and "<audio>" in entry.user_text
        )
        assert {"modalities", "max_completion_tokens"} <= set(entry.fields)
        assert entry.headers["authorization"] == "[REDACTED]" and entry.key_present
    assert {r.extra["input_audio_tokens"] for r in records} == {5}  # 0.5 s at 10 tokens/s
    assert len({s for r in records for s in r.scores.values()}) > 2


def test_openai_compatible_on_the_wire(
    tmp_path: Path, tiny_dataset: Path, server: FakeServer
) -> None:
    block = provider_block(
        "openai-compatible", server, max_tokens=20, audio_format="audio_url", sample_rate=8000
    )
    result, _ = run(tmp_path, tiny_dataset, block)
    assert result.stats.errors == 0 and result.stats.parse_failures == 0
    for entry in server.requests():
        assert entry.model == "Qwen/Qwen2.5-Omni-7B"
        assert entry.json_mode == "schema" and entry.response_schema == POINTWISE_SCHEMA
        assert entry.audio_formats == ["audio/wav"] and entry.audio_decodable
        assert entry.audio_sample_rates == [8000]
        assert "max_tokens" in entry.fields and "modalities" not in entry.fields


@pytest.mark.parametrize("name", PROVIDERS)
def test_rerun_makes_zero_requests(
    tmp_path: Path, tiny_dataset: Path, server: FakeServer, name: str
) -> None:
    first, _ = run(tmp_path, tiny_dataset, provider_block(name, server))
    again, records = run(tmp_path, tiny_dataset, provider_block(name, server))
    assert server.stats()["requests"] == N_CALLS
    assert again.stats.model_calls == 0 and all(r.cache_hit for r in records)
    assert again.aggregate.to_json()["metrics"] == first.aggregate.to_json()["metrics"]


@pytest.mark.parametrize("name", PROVIDERS)
@pytest.mark.parametrize(
    ("kind", "fail_first"), [("429", 2), ("503", 2), ("500", 1), ("drop", 1), ("timeout", 1)]
)
def test_transient_faults_are_retried_and_succeed(
    tmp_path: Path, tiny_dataset: Path, name: str, kind: str, fail_first: int
) -> None:
    settings = FakeSettings(fail_first=fail_first, faults=(kind,), retry_after_s=0.05, slow_s=5.0)
    with FakeServer(settings) as server:
        # 2 s, as in tests/reliability: a loaded machine timed out fault-free calls at 0.5 s,
        # and the stalled answer (5 s) still outlasts it
        result, records = run(
            tmp_path, tiny_dataset, provider_block(name, server, timeout_s=2.0), limit=1
        )
        stats = server.stats()
    assert result.stats.errors == 0
    assert all(s is not None for r in records for s in r.scores.values())
    assert result.stats.retries == 4 * fail_first
    assert (
        stats["max_arrivals"] == fail_first + 1
        and stats["outcome"][f"fault:{kind}"] == 4 * fail_first
    )


def test_retries_stop_at_max_attempts(
    tmp_path: Path, tiny_dataset: Path, server: FakeServer
) -> None:
    block = provider_block("openai-audio", server, model="gpt-error-503", max_attempts=2)
    server.configure(retry_after_s=0.01)
    result, records = run(tmp_path, tiny_dataset, block, limit=1)
    assert server.stats()["requests"] == 8 and result.stats.errors == 4
    assert all((r.error or "").startswith("server_error: ") for r in records)


def test_server_rpm_limit_is_waited_out(tmp_path: Path, tiny_dataset: Path) -> None:
    with FakeServer(FakeSettings(rpm=2, rpm_window_s=0.3)) as server:
        result, records = run(
            tmp_path, tiny_dataset, provider_block("openai-audio", server), limit=1
        )
        stats = server.stats()
    assert result.stats.errors == 0 and all(r.scores != {} for r in records)
    assert stats["outcome"]["rpm"] > 0 and stats["answered"] == 4
    assert result.stats.retries == stats["outcome"]["rpm"]


def test_rate_limit_error_carries_retry_after(server: FakeServer) -> None:
    server.configure(fail_first=1, faults=("429",), retry_after_s=3)
    judge = create_provider(provider_config(name="openai-audio", base_url=server.openai_base_url))

    async def ask() -> ProviderError:
        try:
            with pytest.raises(ProviderError) as caught:
                await judge.generate(ChatRequest("s", ("u",)))  # type: ignore[attr-defined]
            return caught.value
        finally:
            await judge.aclose()

    error = asyncio.run(ask())
    assert error.transient and error.kind == "rate_limited" and error.retry_after == 3


@pytest.mark.parametrize("name", PROVIDERS)
@pytest.mark.parametrize(
    ("status", "kind", "hint"),
    [
        (400, "bad_request", "rejected"),
        (401, "auth", "OPENAI_API_KEY"),
        (403, "permission", "OPENAI_API_KEY"),
        (404, "not_found", "provider.model"),
    ],
)
def test_permanent_errors_fail_fast(
    tmp_path: Path,
    tiny_dataset: Path,
    server: FakeServer,
    name: str,
    status: int,
    kind: str,
    hint: str,
) -> None:
    block = provider_block(name, server, model=f"m-error-{status}")
    result, records = run(tmp_path, tiny_dataset, block, limit=1)
    # No request is retried; the runner may stop sending the rest once it has seen the failure.
    assert server.stats()["max_arrivals"] == 1 and result.stats.retries == 0
    errors = [e for r in records if not (e := r.error or "").startswith("not_sent: ")]
    assert errors and all(e.startswith(f"{kind}: ") for e in errors)
    assert all(hint in e and f"({status})" in e for e in errors)


@pytest.mark.parametrize("name", PROVIDERS)
def test_no_key_in_records_logs_or_cache(
    tmp_path: Path, tiny_dataset: Path, name: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    settings = FakeSettings(fault_rate=0.5, faults=("429", "500"), retry_after_s=0.01, api_key=KEY)
    with FakeServer(settings) as server:
        result, _ = run(tmp_path, tiny_dataset, provider_block(name, server))
        with FakeServer(FakeSettings(api_key="another-key")) as strict:
            refused, bad = run(
                tmp_path / "refused", tiny_dataset, provider_block(name, strict), limit=1
            )
        reported = json.dumps(server.stats()) + json.dumps([vars(r) for r in server.requests()])
    assert result.stats.errors == 0 and result.stats.retries > 0  # the right key was sent
    assert refused.stats.errors == 4 and any((r.error or "").startswith("auth: ") for r in bad)
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert any(p.parent.name == "cache" for p in files)
    for path in files:
        assert KEY.encode() not in path.read_bytes(), path
    assert KEY not in caplog.text + reported


@pytest.mark.parametrize("name", PROVIDERS)
@pytest.mark.parametrize(
    ("mode", "error", "extra"),
    [
        ("blocked", "empty", {"blocked": "content_filter", "finish_reason": "content_filter"}),
        ("empty", "empty", {"finish_reason": "length"}),
        ("malformed", "not_json", {}),
        ("out_of_range", "out_of_range", {}),
        ("prose", "not_json", {}),
    ],
)
def test_unusable_answers_are_recorded_and_reasked_once(
    tmp_path: Path,
    tiny_dataset: Path,
    server: FakeServer,
    name: str,
    mode: str,
    error: str,
    extra: dict[str, str],
) -> None:
    block = provider_block(name, server, model=f"fake-answer-{mode}")
    result, records = run(tmp_path, tiny_dataset, block, limit=1)
    assert result.stats.errors == 0 and result.stats.parse_failures == 4
    assert server.stats()["requests"] == 8
    reasks = [e for e in server.requests() if len(e.roles) > 1]
    # The unusable answer comes back as the model's turn (an empty one has none to show).
    turns = [["user", "assistant", "user"], ["user", "user"]]
    assert len(reasks) == 4 and all(e.roles in turns for e in reasks)
    for record in records:
        assert (record.parse_error or "").startswith(error)
        assert len(record.attempts) == 1 and extra.items() <= record.extra.items()


def test_requests_are_spread_over_several_servers(tmp_path: Path, tiny_dataset: Path) -> None:
    with FakeServer() as one, FakeServer() as two:
        block = provider_block(
            "openai-compatible", None, base_url=[one.openai_base_url, two.openai_base_url]
        )
        result, _ = run(tmp_path, tiny_dataset, block)
        counts = [one.stats()["answered"], two.stats()["answered"]]
    assert result.stats.errors == 0
    assert sum(counts) == N_CALLS and min(counts) > 0


def test_server_key_from_a_named_variable(
    tmp_path: Path, tiny_dataset: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VLLM_TEST_KEY", "vllm-secret-key")
    with FakeServer(FakeSettings(api_key="vllm-secret-key")) as server:
        block = provider_block("openai-compatible", server, api_key_env="VLLM_TEST_KEY")
        result, _ = run(tmp_path, tiny_dataset, block, limit=1)
    assert result.stats.errors == 0


def test_compatible_server_without_a_key(
    tmp_path: Path, tiny_dataset: Path, monkeypatch: pytest.MonkeyPatch, server: FakeServer
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY")
    result, _ = run(tmp_path, tiny_dataset, provider_block("openai-compatible", server), limit=1)
    assert result.stats.errors == 0 and {e.key_present for e in server.requests()} == {True}


def test_openai_audio_needs_a_key_for_the_real_api(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY")
    judge = OpenAIAudioJudge(provider_config(name="openai-audio"))
    with pytest.raises(ProviderError, match="OPENAI_API_KEY") as caught:
        asyncio.run(judge.generate(ChatRequest("s", ("u",))))
    assert caught.value.kind == "auth" and not caught.value.transient


def test_openai_compatible_needs_a_url_and_a_model(server: FakeServer) -> None:
    with pytest.raises(ConfigError, match="OPENAI_BASE_URL"):
        OpenAICompatibleJudge(provider_config(name="openai-compatible", model="m"))
    with pytest.raises(ConfigError, match=r"provider\.model"):
        OpenAICompatibleJudge(
            provider_config(name="openai-compatible", base_url=server.openai_base_url)
        )
    with pytest.raises(ConfigError, match="http"):
        OpenAICompatibleJudge(
            provider_config(name="openai-compatible", model="m", base_url="localhost:8000")
        )


def test_identity(server: FakeServer, monkeypatch: pytest.MonkeyPatch) -> None:
    one = OpenAICompatibleJudge(
        provider_config(
            name="openai-compatible",
            model="m",
            base_url=[server.url + "/b/v1", server.url + "/a/v1"],
        )
    ).identity()
    assert one["base_url"] == sorted([server.url + "/b/v1", server.url + "/a/v1"])
    assert one["json_mode"] == "schema" and one["audio_format"] == "input_audio"
    monkeypatch.setenv("OPENAI_BASE_URL", server.openai_base_url)
    from_env = OpenAICompatibleJudge(
        provider_config(name="openai-compatible", model="m")
    ).identity()
    assert from_env["base_url"] == server.openai_base_url
    grouped = [
        OpenAICompatibleJudge(
            provider_options(
                {"name": "openai-compatible", "model": "m", "base_url": urls, "endpoint_id": "pool"}
            )
        ).identity()
        for urls in ([server.openai_base_url], [server.openai_base_url, server.url + "/2/v1"])
    ]
    assert grouped[0] == grouped[1]  # adding a server to the pool keeps the cache
    assert KEY not in json.dumps([one, from_env, *grouped])


@pytest.mark.parametrize(
    ("experiment", "model"),
    [
        ("zeroshot_gpt4o_audio", "gpt-4o-audio-preview"),
        ("zeroshot_qwen_omni_vllm", "Qwen/Qwen2.5-Omni-7B"),
    ],
)
def test_experiment_files_run_against_the_fake_server(
    tmp_path: Path,
    tiny_dataset: Path,
    server: FakeServer,
    monkeypatch: pytest.MonkeyPatch,
    experiment: str,
    model: str,
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", server.openai_base_url)
    (config,) = load_experiments(EXPERIMENTS / f"{experiment}.yaml")
    config = config.model_copy(update={"dataset": tiny_dataset, "n_bootstrap": 10})
    result, _ = run_config(config, tmp_path)
    assert result.stats.errors == 0 and result.stats.model_calls == N_CALLS
    assert {e.model for e in server.requests()} == {model}
    cost = json.loads((result.out_dir / "run.json").read_text())["cost"]
    if model.startswith("gpt"):
        assert cost["usd"] > 0 and cost["usage"]["input_audio_tokens"] == 5 * N_CALLS
    else:
        assert cost["usd"] is None and "provider.prices" in cost["note"]


def test_openai_chat_models_on_the_wire(
    tmp_path: Path, tiny_dataset: Path, server: FakeServer
) -> None:
    block = provider_block(
        "openai", server, temperature=1.0, reasoning_effort="low", max_tokens=256
    )
    result, records = run(tmp_path, tiny_dataset, block, limit=1)
    assert result.stats.errors == 0 and result.stats.parse_failures == 0
    for entry in server.requests():
        assert entry.model == "gpt-5-mini" and entry.json_mode == "schema"
        assert {"reasoning_effort", "max_completion_tokens"} <= set(entry.fields)
        assert "max_tokens" not in entry.fields and "modalities" not in entry.fields
    assert len(records) == 4


def test_the_sdk_is_imported_only_when_a_client_is_built() -> None:
    """A run answered from the cache never builds a client: it does not pay the ~0.4 s the
    openai SDK takes to import, nor the ~0.3 s of httpx (with ssl) under its transport."""
    import subprocess
    import sys

    script = (
        "import sys\n"
        "from harness.config.experiment import provider_config\n"
        "from providers import create_provider\n"
        "judge = create_provider(provider_config(name='openai-compatible', model='m',"
        " base_url='http://127.0.0.1:9/v1'))\n"
        "judge.identity()\n"
        "print('openai' in sys.modules, 'httpx' in sys.modules)\n"
        "judge.make_client('http://127.0.0.1:9/v1', 'k')\n"
        "print('openai' in sys.modules, 'httpx' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False", "True", "True"]


WIRE_CASES: dict[str, dict[str, Any]] = {
    "openai-audio": {"max_tokens": 20, "seed": 7},
    "openai": {"reasoning_effort": "low", "json_mode": "object"},
    "openai-compatible": {
        "audio_format": "audio_url",
        "score": "expected",
        "extra_body": {"top_k": 5, "repetition_penalty": 1.05},
    },
}


@pytest.mark.parametrize("name", sorted(WIRE_CASES))
def test_the_wire_carries_the_body_the_judge_builds(name: str, tiny_dataset: Path) -> None:
    """Through the SDK's public `chat.completions.create`: the JSON the server receives is
    the body the judge builds (its `extra_body` fields at the top level), with the key as a
    bearer token, for every body the judges build (audio parts, a re-ask's follow-ups,
    schema and object modes, extra_body, log-probabilities)."""
    import httpx2
    import openai

    block = {"name": name, "base_url": "http://wire.test/v1", **WIRE_CASES[name]}
    if name == "openai-compatible":
        block["model"] = "Qwen/Qwen2.5-Omni-7B"
    judge = create_provider(provider_config(**block))
    clip = next((tiny_dataset / "audio").glob("*.wav"))
    audio = AudioRef("c1", clip, "0" * 64)
    request = ChatRequest(
        "You judge music.", ("Dialogue: hi", audio, "Score it."), POINTWISE_SCHEMA
    ).with_follow_up('{"score": 11}', "The score must be 0-10.")
    body = judge.request_body(request)  # type: ignore[attr-defined]
    seen: list[httpx2.Request] = []

    def answer(wire: httpx2.Request) -> httpx2.Response:
        seen.append(wire)
        asked = json.loads(wire.content)["model"]  # an answer of the model asked for
        return httpx2.Response(200, json=chat_completion('{"score": 7}') | {"model": asked})

    client = openai.AsyncOpenAI(
        api_key=KEY,
        base_url="http://wire.test/v1",
        max_retries=0,
        http_client=openai.DefaultAsyncHttpxClient(transport=httpx2.MockTransport(answer)),
    )

    async def send() -> Any:
        try:
            return await judge.send(client, body)  # type: ignore[attr-defined]
        finally:
            await client.close()

    response = asyncio.run(send())
    assert response.text == '{"score": 7}'
    (wire,) = seen
    assert (wire.method, str(wire.url)) == ("POST", "http://wire.test/v1/chat/completions")
    expected = {k: v for k, v in body.items() if k != "extra_body"} | body.get("extra_body", {})
    assert json.loads(wire.content) == expected
    assert json.loads(wire.content)["messages"][2]["role"] == "assistant"
    if "extra_body" in WIRE_CASES[name]:
        assert json.loads(wire.content)["top_k"] == 5
    assert wire.headers["authorization"] == f"Bearer {KEY}"


def test_the_timeout_does_not_count_the_clients_creation(
    tmp_path: Path, tiny_dataset: Path, server: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first call used to create the SDK client (and import the SDK) inside its timeout:
    a cold start longer than `timeout_s` became a timeout, a retry and, on a real service, an
    answer paid for twice."""
    make_client = OpenAIAudioJudge.make_client

    def slow_make_client(self: OpenAIAudioJudge, base_url: str | None, key: str) -> Any:
        time.sleep(0.4)  # a cold import of the SDK
        return make_client(self, base_url, key)

    monkeypatch.setattr(OpenAIAudioJudge, "make_client", slow_make_client)
    block = provider_block("openai-audio", server, timeout_s=0.3, max_attempts=1)
    result, _ = run(tmp_path, tiny_dataset, block, limit=1)
    assert (result.stats.errors, result.stats.retries, server.stats()["requests"]) == (0, 0, 4)
