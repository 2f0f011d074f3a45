"""The fake API server at the wire level (plain HTTP); the SDK-level tests live with the
providers (tests/providers/api/test_gemini.py, tests/providers/api/test_openai_chat.py)."""

from __future__ import annotations

import base64
import io
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
import soundfile

from harness.calls.prompting.parsing import parse_pointwise
from harness.fake_api import (
    ANSWER_MODES,
    MALFORMED_KINDS,
    FakeServer,
    FakeSettings,
    parse_args,
)
from tests.conftest import run_config

KEY = "sk-fake-test-key-0123456789"


def wav_b64(freq: float, seconds: float = 0.25, rate: int = 16000) -> str:
    t = np.arange(int(rate * seconds)) / rate
    buffer = io.BytesIO()
    soundfile.write(buffer, 0.2 * np.sin(2 * np.pi * freq * t), rate, format="WAV")
    return base64.b64encode(buffer.getvalue()).decode()


def openai_body(
    model: str = "gpt-4o-audio-preview", freq: float = 440.0, **extra: Any
) -> dict[str, Any]:
    return {
        "model": model,
        "messages": [
            {"role": "system", "content": "You judge music."},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "Rate this clip:"},
                    {
                        "type": "input_audio",
                        "input_audio": {"data": wav_b64(freq), "format": "wav"},
                    },
                ],
            },
        ],
        "temperature": 0.0,
        **extra,
    }


def gemini_body(freq: float = 440.0, schema: dict[str, Any] | None = None) -> dict[str, Any]:
    config: dict[str, Any] = {"temperature": 0.0}
    if schema is not None:
        config |= {"responseMimeType": "application/json", "responseJsonSchema": schema}
    return {
        "systemInstruction": {"parts": [{"text": "You judge music."}]},
        "contents": [
            {
                "role": "user",
                "parts": [
                    {"text": "Rate this clip:"},
                    {"inlineData": {"mimeType": "audio/wav", "data": wav_b64(freq)}},
                ],
            }
        ],
        "generationConfig": config,
    }


@pytest.fixture
def http() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=10.0) as client:
        yield client


def chat(http: httpx.Client, server: FakeServer, body: dict[str, Any], **kw: Any) -> httpx.Response:
    return http.post(
        server.openai_base_url + "/chat/completions",
        json=body,
        headers={"Authorization": f"Bearer {KEY}"},
        **kw,
    )


def generate(
    http: httpx.Client, server: FakeServer, body: dict[str, Any], model: str = "gemini-2.5-flash"
) -> httpx.Response:
    return http.post(
        f"{server.url}/v1beta/models/{model}:generateContent",
        json=body,
        headers={"x-goog-api-key": KEY},
    )


def content(response: httpx.Response) -> str:
    return str(response.json()["choices"][0]["message"]["content"])


def test_scores_are_deterministic_and_depend_on_the_audio(
    server: FakeServer, http: httpx.Client
) -> None:
    first = content(chat(http, server, openai_body(freq=440)))
    again = content(chat(http, server, openai_body(freq=440)))
    others = {content(chat(http, server, openai_body(freq=f))) for f in (220, 330, 550, 660, 770)}
    assert first == again
    assert parse_pointwise(first, ["c"]).error is None
    assert len(others | {first}) > 2


def test_gemini_answer_usage_and_what_arrived(server: FakeServer, http: httpx.Client) -> None:
    schema = {"type": "object", "properties": {"score": {"type": "number"}}}
    response = generate(http, server, gemini_body(schema=schema))
    assert response.status_code == 200
    payload = response.json()
    text = payload["candidates"][0]["content"]["parts"][0]["text"]
    assert parse_pointwise(text, ["c"]).error is None
    details = {
        d["modality"]: d["tokenCount"] for d in payload["usageMetadata"]["promptTokensDetails"]
    }
    assert details["AUDIO"] == 8  # 0.25 s at 32 tokens per second
    (entry,) = server.requests()
    assert (entry.api, entry.model, entry.json_mode) == ("gemini", "gemini-2.5-flash", "schema")
    assert entry.audio_parts == 1 and entry.audio_decodable and entry.audio_formats == ["audio/wav"]
    assert entry.system == "You judge music." and entry.user_text == "Rate this clip:<audio>"
    assert entry.headers["x-goog-api-key"] == "[REDACTED]" and entry.key_present


def test_keys_are_redacted_everywhere_the_server_reports(
    server: FakeServer, http: httpx.Client
) -> None:
    chat(http, server, openai_body())
    generate(http, server, gemini_body())
    reported = http.get(server.url + "/_requests").text + http.get(server.url + "/_stats").text
    assert KEY not in reported
    assert reported.count("[REDACTED]") >= 2


def test_wrong_key_gets_401_or_gemini_400(http: httpx.Client) -> None:
    with FakeServer(FakeSettings(api_key="the-right-key")) as server:
        response = chat(http, server, openai_body())
        assert response.status_code == 401
        refused = generate(http, server, gemini_body())
        assert refused.status_code == 400  # as Gemini answers a key that is not valid
        assert refused.json()["error"]["details"][0]["reason"] == "API_KEY_INVALID"
        assert server.stats()["outcome"] == {"bad_key": 2}
        assert "the-right-key" not in http.get(server.url + "/_stats").text


@pytest.mark.parametrize("kind", ["429", "500", "503"])
def test_fail_first_faults_then_answers(kind: str, http: httpx.Client) -> None:
    with FakeServer(FakeSettings(fail_first=2, faults=(kind,), retry_after_s=0.5)) as server:
        statuses = [chat(http, server, openai_body()) for _ in range(3)]
        assert [r.status_code for r in statuses] == [int(kind), int(kind), 200]
        if kind in ("429", "503"):
            assert statuses[0].headers["Retry-After"] == "0.5"
        stats = server.stats()
        assert stats["max_arrivals"] == 3 and stats["distinct_bodies"] == 1
        assert stats["outcome"] == {f"fault:{kind}": 2, "answered:score": 1}


def test_dropped_connection(http: httpx.Client) -> None:
    with FakeServer(FakeSettings(fail_first=1, faults=("drop",))) as server:
        with pytest.raises(httpx.RemoteProtocolError):
            chat(http, server, openai_body())
        assert chat(http, server, openai_body()).status_code == 200


def test_stalled_answer_times_out(http: httpx.Client) -> None:
    with FakeServer(FakeSettings(fail_first=1, faults=("timeout",), slow_s=5.0)) as server:
        with pytest.raises(httpx.ReadTimeout):
            chat(http, server, openai_body(), timeout=0.3)
        assert chat(http, server, openai_body()).status_code == 200


def test_a_request_the_client_abandons_is_not_logged_as_answered(http: httpx.Client) -> None:
    """The server's handler is cancelled when the client goes away: its log entry used to keep
    the defaults (status 200, "answered"), so the tests' count of answers paid for counted an
    abandoned request as an answer."""
    with FakeServer(FakeSettings(latency_s=2.0)) as server:
        with pytest.raises(httpx.ReadTimeout):
            chat(http, server, openai_body(), timeout=0.3)
        deadline = time.monotonic() + 5
        while not server.requests() and time.monotonic() < deadline:
            time.sleep(0.05)
        (entry,) = server.requests()
    assert (entry.status, entry.outcome) == (0, "abandoned")


def test_fault_rate_is_reproducible(http: httpx.Client) -> None:
    outcomes = []
    for _ in range(2):
        with FakeServer(FakeSettings(fault_rate=0.5, faults=("500",), seed=3)) as server:
            outcomes.append(
                [chat(http, server, openai_body(freq=f)).status_code for f in range(200, 220)]
            )
    assert outcomes[0] == outcomes[1]
    assert 200 in outcomes[0] and 500 in outcomes[0]


def test_rpm_limit_answers_429_with_retry_after(http: httpx.Client) -> None:
    with FakeServer(FakeSettings(rpm=2)) as server:
        codes = [chat(http, server, openai_body(freq=f)) for f in (300, 400, 500)]
        assert [r.status_code for r in codes] == [200, 200, 429]
        assert 0 < float(codes[2].headers["Retry-After"]) <= 60
        assert server.stats()["outcome"]["rpm"] == 1


@pytest.mark.parametrize("status", [400, 401, 403, 404, 503])
def test_error_model_names(status: int, server: FakeServer, http: httpx.Client) -> None:
    response = generate(http, server, gemini_body(), model=f"fake-error-{status}")
    assert response.status_code == status
    assert response.json()["error"]["code"] == status


@pytest.mark.parametrize("mode", ANSWER_MODES)
def test_answer_modes(mode: str, http: httpx.Client) -> None:
    with FakeServer(FakeSettings(answer=mode)) as server:
        oa = chat(http, server, openai_body()).json()["choices"][0]
        gm = generate(http, server, gemini_body()).json()
    text = oa["message"]["content"]
    if mode == "blocked":
        assert text is None and oa["finish_reason"] == "content_filter"
        assert gm["promptFeedback"]["blockReason"] == "SAFETY" and "candidates" not in gm
        return
    if mode == "empty":
        assert text == "" and oa["finish_reason"] == "length"
        assert "parts" not in gm["candidates"][0]["content"]
        return
    gemini_text = gm["candidates"][0]["content"]["parts"][0]["text"]
    expected_error = {
        "score": None,
        "fenced": None,
        "malformed": "not_json",
        "out_of_range": "out_of_range",
        "prose": "not_json",
        "wrong_keys": "wrong_keys",
        "partial_ranking": None,  # a pointwise prompt gets its score
        "huge_number": "not_json",
        "deep_nesting": "not_json",
        "lone_surrogate": "not_json",  # a cut answer between two lone surrogates
    }[mode]
    for answer in (text, gemini_text):
        error = parse_pointwise(answer, ["c"]).error
        assert (error or "").split(":")[0] == (expected_error or "")


def test_answer_mode_from_model_name(server: FakeServer, http: httpx.Client) -> None:
    text = content(chat(http, server, openai_body(model="fake-answer-fenced")))
    assert text.startswith("```json\n")


def test_json_schema_answers_follow_the_schema(server: FakeServer, http: httpx.Client) -> None:
    schema = {
        "type": "object",
        "properties": {
            "reasoning": {"type": "string"},
            "scores": {"type": "array", "items": {"type": "number"}, "minItems": 4},
        },
    }
    fmt = {"type": "json_schema", "json_schema": {"name": "joint", "schema": schema}}
    answer = json.loads(content(chat(http, server, openai_body(response_format=fmt))))
    assert isinstance(answer["reasoning"], str)
    assert len(answer["scores"]) == 4 and all(0 <= s <= 10 for s in answer["scores"])
    assert server.requests()[0].json_mode == "schema"


@pytest.mark.parametrize("form", ["description", "feedback"])
def test_free_text_forms_by_schema_and_by_prompt(
    form: str, server: FakeServer, http: httpx.Client
) -> None:
    """`prompt: describe` and the user simulator: `{"description"|"feedback": "..."}`, the
    same text for the same request, from the schema (JSON mode) or the prompt's words."""
    schema = {"type": "object", "properties": {form: {"type": "string"}}, "required": [form]}
    fmt = {"type": "json_schema", "json_schema": {"name": form, "schema": schema}}
    by_schema = json.loads(content(chat(http, server, openai_body(response_format=fmt))))
    body = openai_body()
    body["messages"][1]["content"][0]["text"] = f'Answer in this form: {{"{form}": "..."}}'
    by_prompt = json.loads(content(chat(http, server, body)))
    again = json.loads(content(chat(http, server, body)))
    gemini = generate(http, server, gemini_body(schema=schema)).json()
    text = gemini["candidates"][0]["content"]["parts"][0]["text"]
    for answer in (by_schema, by_prompt, json.loads(text)):
        assert list(answer) == [form] and len(answer[form].split()) >= 6
    assert by_prompt == again


def test_undecodable_audio_is_rejected_and_counted(server: FakeServer, http: httpx.Client) -> None:
    body = openai_body()
    body["messages"][1]["content"][1]["input_audio"]["data"] = base64.b64encode(
        b"not audio"
    ).decode()
    response = chat(http, server, body)
    assert response.status_code == 400
    assert "could not be decoded" in response.json()["error"]["message"]
    assert server.stats()["audio_undecodable"] == 1


def test_audio_url_data_urls_are_accepted(server: FakeServer, http: httpx.Client) -> None:
    body = openai_body()
    body["messages"][1]["content"][1] = {
        "type": "audio_url",
        "audio_url": {"url": "data:audio/wav;base64," + wav_b64(440)},
    }
    assert chat(http, server, body).status_code == 200
    assert server.requests()[0].audio_formats == ["audio/wav"]


def test_settings_and_reset_over_http(server: FakeServer, http: httpx.Client) -> None:
    http.post(server.url + "/_settings", json={"fail_first": 1, "faults": ["500"]})
    assert chat(http, server, openai_body()).status_code == 500
    assert http.post(server.url + "/_settings", json={"answer": "nonsense"}).status_code == 400
    http.post(server.url + "/_reset")
    assert server.stats()["requests"] == 0
    assert chat(http, server, openai_body()).status_code == 500  # arrivals were reset too


def test_unknown_paths_are_404(server: FakeServer, http: httpx.Client) -> None:
    assert http.post(server.url + "/v1/embeddings", json={}).status_code == 404
    assert http.post(server.url + "/v1beta/models/x:countTokens", json={}).status_code == 404


def test_command_line_arguments() -> None:
    args, settings = parse_args(
        [
            "--port",
            "9",
            "--latency",
            "0.2",
            "--fault-rate",
            "0.2",
            "--rpm",
            "600",
            "--faults",
            "429,drop",
        ]
    )
    assert args.port == 9
    assert (settings.latency_s, settings.fault_rate, settings.rpm) == (0.2, 0.2, 600)
    assert settings.faults == ("429", "drop")
    with pytest.raises(ValueError, match="unknown fault"):
        parse_args(["--faults", "explode"])


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_runs_as_a_process(http: httpx.Client) -> None:
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "harness.fake_api", "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        assert proc.stdout is not None
        assert "fake API server on" in proc.stdout.readline().decode()
        base = f"http://127.0.0.1:{port}"
        for _ in range(50):
            try:
                if http.get(base + "/health").status_code == 200:
                    break
            except httpx.ConnectError:
                time.sleep(0.1)
        response = http.post(base + "/v1/chat/completions", json=openai_body())
        assert response.status_code == 200
        assert http.get(base + "/_stats").json()["answered"] == 1
    finally:
        proc.terminate()
        proc.wait(timeout=10)


# ---------------------------------------------------------------- every variant, end to end
VARIANT_CASES = [
    ("zero_shot", {}, "audio"),
    ("cot", {}, "audio"),
    ("joint", {"answer": "scores", "order": "permuted"}, "audio"),
    ("joint", {"answer": "ranking"}, "audio"),
    ("rubric", {}, "audio"),
    ("text_only", {}, "caption"),
]


@pytest.mark.parametrize("provider", ["gemini", "openai-audio"])
@pytest.mark.parametrize(("prompt", "options", "music"), VARIANT_CASES)
def test_every_variant_parses_against_the_fake_server(
    provider: str,
    prompt: str,
    options: dict[str, str],
    music: str,
    tiny_dataset: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Through the real SDK, with JSON asked for by schema (Gemini) or only in the prompt
    (openai-audio), every variant's answer parses into a score for every candidate."""
    from harness.config.experiment import ExperimentConfig

    with FakeServer(FakeSettings()) as fake:
        monkeypatch.setenv("GEMINI_API_KEY", "test-key-gemini")
        monkeypatch.setenv("OPENAI_API_KEY", "test-key-openai")
        base_url = fake.gemini_base_url if provider == "gemini" else fake.openai_base_url
        config = ExperimentConfig.model_validate(
            {
                "name": "v",
                "dataset": tiny_dataset,
                "n_bootstrap": 20,
                "prompt": prompt,
                "prompt_options": options,
                "inputs": {"dialogue": "summary", "music": music},
                "provider": {"name": provider, "model": "fake-model", "base_url": base_url},
            }
        )
        result, _ = run_config(config, tmp_path)
    assert result.stats.errors == 0
    assert result.stats.parse_failures == 0
    assert result.aggregate.coverage == 1.0
    if prompt == "joint":
        assert result.aggregate.tie_rate is not None and result.aggregate.tie_rate < 1.0


def test_missing_summaries_are_generated_through_the_fake_server(
    tiny_dataset: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from harness.config.experiment import ExperimentConfig

    items = [json.loads(line) for line in (tiny_dataset / "items.jsonl").read_text().splitlines()]
    for item in items:
        del item["summary"]
    (tiny_dataset / "items.jsonl").write_text("".join(json.dumps(i) + "\n" for i in items))
    with FakeServer(FakeSettings()) as fake:
        monkeypatch.setenv("GEMINI_API_KEY", "test-key-gemini")
        config = ExperimentConfig.model_validate(
            {
                "name": "s",
                "dataset": tiny_dataset,
                "n_bootstrap": 20,
                "inputs": {"dialogue": "summary", "music": "audio"},
                "provider": {
                    "name": "gemini",
                    "model": "fake-model",
                    "base_url": fake.gemini_base_url,
                    "prices": {"input": 1.0, "output": 2.0},
                },
            }
        )
        result, _ = run_config(config, tmp_path)
        summary_requests = [
            r for r in fake.requests() if '"summary"' in json.dumps(r.response_schema)
        ]
    lines = [json.loads(x) for x in (result.out_dir / "summaries.jsonl").read_text().splitlines()]
    assert [line["source"] for line in lines] == ["generated"] * 3
    assert all(20 <= len(line["summary"].split()) <= 35 for line in lines)
    assert len(summary_requests) == 3
    assert result.stats.parse_failures == 0 and result.aggregate.coverage == 1.0
    run = json.loads((result.out_dir / "run.json").read_text())
    usage = run["summaries_cost"]["usage"]
    assert usage["calls"] == 3
    assert usage["input_tokens"] > 0 and usage["output_tokens"] > 0
    expected = (usage["input_tokens"] * 1.0 + usage["output_tokens"] * 2.0) / 1e6
    assert run["summaries_cost"]["usd"] == pytest.approx(expected, abs=1e-6)
    assert run["model_calls"] == 3 + 12
    assert "Summaries: estimated cost" in (result.out_dir / "report.md").read_text()


def _readable(content: bytes) -> bool:
    try:
        body = json.loads(content)
    except (ValueError, RecursionError):  # not UTF-8, not JSON, past the parser's limits
        return False
    return isinstance(body, dict) and bool(body.get("choices"))


@pytest.mark.parametrize("kind", MALFORMED_KINDS)
def test_malformed_faults_answer_200_that_no_sdk_can_read(kind: str, http: httpx.Client) -> None:
    with FakeServer(FakeSettings(fail_first=1, faults=("malformed",))) as server:
        assert server.settings.faults == MALFORMED_KINDS
        server.configure(faults=(kind,))
        bad = chat(http, server, openai_body())
        assert bad.status_code == 200 and not _readable(bad.content)
        assert chat(http, server, openai_body()).json()["choices"]  # the next arrival is fine
        assert server.stats()["outcome"] == {f"fault:{kind}": 1, "answered:score": 1}


def test_malformed_is_a_fault_kind_of_the_command_line() -> None:
    _, settings = parse_args(["--faults", "500,malformed", "--fault-rate", "0.1"])
    assert settings.faults == ("500", *MALFORMED_KINDS)
    with pytest.raises(ValueError, match="unknown fault kinds"):
        parse_args(["--faults", "html,bogus"])
