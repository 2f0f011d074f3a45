"""API keys never reach a file: after runs with faults, refused keys and servers that echo the
key back in their error messages, neither key appears under results/, in the cache directory
or in anything the processes printed; the echoed messages are stored scrubbed."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.core.secrets import REDACTED, scrub
from harness.fake_api import FakeServer
from tests.reliability.conftest import FAST, MakeDataset, fast_settings, harness_command, read_jsonl

# Distinctive keys, one not shaped like any known key format (caught only because it is in
# the environment), one shaped like an OpenAI key.
GEMINI_KEY = "gmk-RELIABILITY-secret-5b1e0c7d9a"
OPENAI_KEY = "sk-RELIABILITY-secret-83c0ffee42"


class _EchoHandler(BaseHTTPRequestHandler):
    """A careless API: its errors quote the key it was sent (some real services echo part of
    it), as 401, as 400, or as a 500 that is retried first."""

    statuses = itertools.cycle((400, 500, 401))  # 401 stops the run: it comes third
    lock = threading.Lock()

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", 0)))
        key = self.headers.get("x-goog-api-key") or self.headers.get("authorization", "")
        key = key.removeprefix("Bearer ")
        with self.lock:
            status = next(self.statuses)
        message = f"Incorrect API key provided: {key}. Request headers: {dict(self.headers)}"
        body = json.dumps({"error": {"code": status, "message": message, "status": "X"}}).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def echo_server() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _EchoHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _experiment(path: Path, dataset: Path, run_name: str, **provider: Any) -> Path:
    settings = {**FAST, "max_attempts": 3, "max_concurrency": 4, **provider}
    config = {"name": run_name, "dataset": str(dataset), "provider": settings}
    path.write_text(yaml.safe_dump(config))
    return path


def test_keys_appear_nowhere_after_faults_and_errors(
    make_dataset: MakeDataset, echo_server: str, tmp_path: Path
) -> None:
    dataset = make_dataset(n_items=6)
    results, cache_dir = tmp_path / "results", tmp_path / "cache"
    env = {
        **os.environ,
        "GEMINI_API_KEY": GEMINI_KEY,
        "OPENAI_API_KEY": OPENAI_KEY,
        "BGM_JUDGE_CACHE": str(cache_dir),
        "OPENAI_LOG": "debug",  # the SDK's own debug log goes to the captured stderr too
    }
    printed: list[str] = []
    exit_codes: list[int] = []

    def run(experiment: Path) -> None:
        done = subprocess.run(
            harness_command("run", str(experiment), "--results-dir", str(results)),
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        printed.extend([done.stdout, done.stderr])
        exit_codes.append(done.returncode)

    with FakeServer(fast_settings(fault_rate=0.3, api_key=GEMINI_KEY)) as server:
        url = server.gemini_base_url
        # the right key, 30% transient faults: answered after retries
        run(_experiment(tmp_path / "g.yaml", dataset, "ok", name="gemini", base_url=url))
        # a wrong key (the OpenAI one) and a wrong model: refused
        wrong = server.openai_base_url
        run(
            _experiment(
                tmp_path / "o.yaml", dataset, "refused", name="openai-audio", base_url=wrong
            )
        )
        run(
            _experiment(
                tmp_path / "m.yaml", dataset, "nomodel", name="gemini", base_url=url,
                model="gone-error-404",
            )
        )  # fmt: skip
        assert server.stats()["requests"] > 24
    # servers that quote the key in their errors
    run(_experiment(tmp_path / "e1.yaml", dataset, "echo_g", name="gemini", base_url=echo_server))
    run(
        _experiment(
            tmp_path / "e2.yaml",
            dataset,
            "echo_o",
            name="openai-audio",
            base_url=echo_server + "/v1",
        )
    )
    assert exit_codes == [0, 1, 1, 1, 1], printed

    # the echoed messages were stored, scrubbed
    for name in ("echo_g", "echo_o"):
        records = read_jsonl(results / name / "records.jsonl")
        errors = [r["error"] for r in records if not r["error"].startswith("not_sent")]
        assert errors and all(REDACTED in e for e in errors)
        assert any("(401)" in e for e in errors) and any("(400)" in e for e in errors)

    files = [p for p in [*results.rglob("*"), *cache_dir.rglob("*")] if p.is_file()]
    assert len(files) > 20
    for key in (GEMINI_KEY, OPENAI_KEY):
        for path in files:
            assert key.encode() not in path.read_bytes(), path
        for text in printed:
            assert key not in text


def test_scrub_removes_keys_from_the_environment_and_key_shaped_strings(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("GEMINI_API_KEY", GEMINI_KEY)
    monkeypatch.setenv("SOME_SERVICE_TOKEN", "tok-abcdefgh")
    text = (
        f"bad key {GEMINI_KEY}; header Bearer {OPENAI_KEY}; token tok-abcdefgh; "
        "AIzaSyA1234567890abcdefghijklmnopq in a URL"
    )
    cleaned = scrub(text)
    for secret in (GEMINI_KEY, OPENAI_KEY, "tok-abcdefgh", "AIzaSyA1234567890abcdefghijklmnopq"):
        assert secret not in cleaned
    assert cleaned.count(REDACTED) == 4


# ------------------------------------------------------- round two: keys the scrubber missed
VLLM_KEY = "vllm-cred-2f9a7c41d3e8b6"  # a name the scrubber's patterns do not know
URL_KEY = "urlpass-7c1e55aa93d0"


class _EchoAnswerHandler(BaseHTTPRequestHandler):
    """A chat server whose *answers* quote the key they were sent."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", 0)))
        key = self.headers.get("authorization", "").removeprefix("Bearer ")
        content = f'{{"score": 5.0}} (answered for the key {key})'
        body = json.dumps(
            {
                "id": "x",
                "object": "chat.completion",
                "created": 0,
                "model": "m",
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": content},
                        "finish_reason": "stop",
                    }
                ],
            }
        ).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def echo_answer_server() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _EchoAnswerHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _run_and_collect(
    experiment: Path, results: Path, cache_dir: Path, env: dict[str, str]
) -> tuple[int, str]:
    done = subprocess.run(
        harness_command("run", str(experiment), "--results-dir", str(results)),
        env={**os.environ, "BGM_JUDGE_CACHE": str(cache_dir), **env},
        capture_output=True,
        text=True,
        timeout=300,
    )
    return done.returncode, done.stdout + done.stderr


def _assert_nowhere(secret: str, folders: list[Path], printed: str) -> None:
    files = [p for folder in folders for p in folder.rglob("*") if p.is_file()]
    assert files
    for path in files:
        assert secret.encode() not in path.read_bytes(), path
    assert secret not in printed


def test_a_key_under_any_variable_name_is_scrubbed(
    make_dataset: MakeDataset, echo_server: str, echo_answer_server: str, tmp_path: Path
) -> None:
    dataset = make_dataset(n_items=2)
    results, cache_dir = tmp_path / "results", tmp_path / "cache"
    printed = []
    for name, url in (("errors", echo_server), ("answers", "http://" + echo_answer_server)):
        experiment = _experiment(
            tmp_path / f"{name}.yaml",
            dataset,
            name,
            name="openai-compatible",
            model="m",
            base_url=url + "/v1",
            api_key_env="VLLM_CREDENTIAL",
        )
        code, output = _run_and_collect(
            experiment, results, cache_dir, {"VLLM_CREDENTIAL": VLLM_KEY}
        )
        printed.append(output)
        assert code == 1, output  # every call failed, or no answer was usable
    answered = read_jsonl(results / "answers" / "records.jsonl")
    assert len(answered) == 8 and all(REDACTED in r["raw"] for r in answered)  # scrubbed
    _assert_nowhere(VLLM_KEY, [results, cache_dir], "\n".join(printed))


@pytest.mark.parametrize(
    "url", [f"http://user:{URL_KEY}@{{host}}/v1", f"http://{{host}}/v1?key={URL_KEY}"]
)
def test_credentials_in_a_base_url_appear_nowhere(
    url: str, make_dataset: MakeDataset, tmp_path: Path
) -> None:
    dataset = make_dataset(n_items=2)
    results, cache_dir = tmp_path / "results", tmp_path / "cache"
    experiment = _experiment(
        tmp_path / "exp.yaml",
        dataset,
        "url",
        name="openai-compatible",
        model="m",
        base_url=url.format(host="127.0.0.1:9"),  # nothing listens: every call fails
        max_attempts=2,
    )
    code, output = _run_and_collect(experiment, results, cache_dir, {})
    assert code == 1, output
    again, output_again = _run_and_collect(experiment, results, cache_dir, {})
    assert again == 1, output_again  # the same configuration (config.yaml is scrubbed)
    output += output_again
    records = read_jsonl(results / "url" / "records.jsonl")
    assert all(r["error"] and "127.0.0.1:9" in r["error"] for r in records)
    assert "127.0.0.1:9" in output  # the server is still named
    _assert_nowhere(URL_KEY, [results, cache_dir], output)


def test_scrub_redacts_credentials_in_urls_and_registered_values() -> None:
    from harness.core.secrets import register

    register("a-registered-secret-value")
    text = (
        "GET http://user:pa55word@host:8000/v1?key=abc123&x=1 and "
        "https://h/v1?api_key=zzz&token=t0k failed; a-registered-secret-value"
    )
    cleaned = scrub(text)
    for secret in ("pa55word", "abc123", "zzz", "t0k", "a-registered-secret-value"):
        assert secret not in cleaned
    assert "host:8000/v1" in cleaned and "x=1" in cleaned


def test_a_scan_of_the_environment_taken_once_still_scrubs_later_registered_keys(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A run scans the environment once (`env_secrets`) and scrubs every answer with it; a key
    a provider registers afterwards (read on its first call) is scrubbed as well."""
    from harness.core.secrets import env_secrets, register, scrub_value

    monkeypatch.setenv("SNAPSHOT_API_KEY", "snap-shot-secret-1")
    named = env_secrets()
    assert "snap-shot-secret-1" in named
    register("registered-after-the-scan")
    answer = {
        "text": "snap-shot-secret-1 and registered-after-the-scan",
        "extra": {"quotes": ["snap-shot-secret-1"]},
        "input_tokens": 3,
    }
    cleaned = scrub_value(answer, named)
    assert cleaned == {
        "text": f"{REDACTED} and {REDACTED}",
        "extra": {"quotes": [REDACTED]},
        "input_tokens": 3,
    }
    assert scrub_value(answer) == cleaned  # the same as a fresh scan


def test_a_value_under_a_key_named_like_a_secret_is_scrubbed() -> None:
    """The repeat of issue 48's attacks: a key sent in the body (`extra_body: {api_key: ...}`)
    reached config.yaml as written. A token of log-probabilities is no secret."""
    from harness.core.secrets import scrub_value

    settings = {
        "extra_body": {"api_key": "plain-value-123", "Password": "hunter2-x", "top_k": 5},
        "vllm": {"auth_token": "t0k-t0k-t0k", "client_secret": "cs-cs-cs"},
        "logprobs": [{"token": "5", "logprob": -0.1}],
        "max_tokens": 10,
    }
    assert scrub_value(settings) == {
        "extra_body": {"api_key": REDACTED, "Password": REDACTED, "top_k": 5},
        "vllm": {"auth_token": REDACTED, "client_secret": REDACTED},
        "logprobs": [{"token": "5", "logprob": -0.1}],
        "max_tokens": 10,
    }
