"""`batch: true` through the real SDKs against the fake API's batch endpoints: answers land in
the cache under the online keys, a re-run is free, and nothing is paid twice."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.calls.cache import ResponseCache
from harness.config.loading import load_experiments
from harness.fake_api import FakeServer
from harness.runs.runner import RunResult
from tests.conftest import run_experiment
from tests.reliability.conftest import (
    answers_of,
    fast_settings,
    harness_command,
    read_jsonl,
    write_dataset,
)

BATCH = {"batch": True, "batch_poll_s": 0.02, "batch_collect_s": 0.05}


def experiment(
    path: Path, dataset: Path, server: FakeServer, provider: str = "openai-compatible", **extra: Any
) -> Path:
    if provider == "gemini":
        block = {"name": "gemini", "model": "gemini-2.5-flash", "base_url": server.gemini_base_url}
    else:
        block = {"name": provider, "model": "fake-judge", "base_url": server.openai_base_url}
    block.update({"retry_wait_s": 0.01, "retry_max_wait_s": 0.05, "timeout_s": 5.0, **extra})
    config = {"name": "batch", "dataset": str(dataset), "provider": block, "n_bootstrap": 50}
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def run(path: Path, cache_dir: Path, results: Path, **update: Any) -> RunResult:
    (config,) = load_experiments(path)
    if update:
        config = config.model_copy(update=update)
    cache = ResponseCache(cache_dir)
    try:
        return run_experiment(config, cache=cache, results_dir=results, show_progress=False)
    finally:
        cache.close()


@pytest.mark.parametrize("provider", ["openai-compatible", "gemini"])
def test_batch_answers_are_the_online_answers(provider: str, tmp_path: Path) -> None:
    dataset = write_dataset(tmp_path / "data", n_items=5)
    with FakeServer(fast_settings()) as server:
        online = experiment(tmp_path / "online.yaml", dataset, server, provider)
        batched = experiment(tmp_path / "batch.yaml", dataset, server, provider, **BATCH)
        first = run(batched, tmp_path / "cache", tmp_path / "results")
        assert first.complete and first.stats.model_calls == 20
        assert first.stats.batch is not None and first.stats.batch["batches"] == 1
        stats = server.stats()
        assert stats["batch_jobs"] == 1 and stats["paid_requests"] == 20
        assert stats["requests"] == 0  # no online call
        records = read_jsonl(tmp_path / "results" / "batch" / "records.jsonl")
        assert all(r["extra"]["batch"] for r in records)
        # the same requests online, in a fresh cache: the same answers
        separate = run(online, tmp_path / "cache2", tmp_path / "results2")
        assert separate.complete
        again = read_jsonl(tmp_path / "results2" / "batch" / "records.jsonl")
        assert answers_of(records) == answers_of(again)
        # online against the batch run's cache: every answer from the cache, nothing paid
        paid = server.stats()["paid_requests"]
        hits = run(online, tmp_path / "cache", tmp_path / "results3")
        assert hits.stats.model_calls == 0 and hits.stats.cache_hits == 20
        rerun = run(batched, tmp_path / "cache", tmp_path / "results4")
        assert rerun.stats.model_calls == 0
        assert server.stats()["paid_requests"] == paid
        assert server.stats()["batch_jobs"] == 1


def long_dialogues(dataset: Path) -> Path:
    """The dataset with dialogues long enough (over 1,024 tokens) for prompt caching."""
    path = dataset / "items.jsonl"
    items = [json.loads(line) for line in path.read_text().splitlines()]
    for item in items:
        turn = f"Let me tell you the whole story of plan {item['id']} once more. " * 80
        item["dialogue"].append({"speaker": "A", "text": turn})
    path.write_text("".join(json.dumps(i) + "\n" for i in items))
    return dataset


PRICES = {"input": 1.0, "input_cached": 0.1, "output": 4.0}


@pytest.mark.parametrize("provider", ["openai-compatible", "gemini"])
@pytest.mark.parametrize("batch", [False, True], ids=["online", "batch"])
def test_cached_tokens_are_recorded_and_priced_at_the_cached_rate(
    provider: str, batch: bool, tmp_path: Path
) -> None:
    dataset = long_dialogues(write_dataset(tmp_path / "data", n_items=3))
    extra: dict[str, Any] = {"prices": PRICES, "max_concurrency": 1}
    if batch:
        extra.update(BATCH)
    with FakeServer(fast_settings(prefix_cache=True)) as server:
        result = run(
            experiment(tmp_path / "exp.yaml", dataset, server, provider, **extra),
            tmp_path / "cache",
            tmp_path / "results",
        )
    assert result.complete
    records = read_jsonl(tmp_path / "results" / "batch" / "records.jsonl")
    cached = [r["extra"].get("cached_input_tokens", 0) for r in records]
    # each item's first request fills the cache; its other three candidates read the prefix
    assert sum(1 for c in cached if c > 0) >= 9
    cost = json.loads((tmp_path / "results" / "batch" / "run.json").read_text())["cost"]
    assert cost["usage"]["cached_input_tokens"] == sum(cached)
    assert cost["cache_discount"] == pytest.approx(sum(cached) * 0.9 / 1e6, abs=1e-6)
    online = sum(r["input_tokens"] * 1.0 + r["output_tokens"] * 4.0 for r in records) / 1e6
    assert cost["usd_online"] == pytest.approx(online, abs=1e-6)
    expected = online - cost["cache_discount"]
    if batch:
        assert cost["batch_discount"] == pytest.approx(expected / 2, abs=1e-6)
        expected /= 2
        assert cost["usage"]["batch_calls"] == 12
    else:
        assert cost["batch_discount"] == 0
    assert cost["usd"] == pytest.approx(expected, abs=1e-6)
    report = (tmp_path / "results" / "batch" / "report.md").read_text()
    assert "prompt cache discount" in report
    assert (" batch and $" in report) == batch


def test_audio_chat_models_are_refused_with_batch_in_one_line(tmp_path: Path) -> None:
    dataset = write_dataset(tmp_path / "data", n_items=1)
    with FakeServer(fast_settings()) as server:
        path = experiment(tmp_path / "exp.yaml", dataset, server, "openai-audio", batch=True)
        done = subprocess.run(
            harness_command("run", str(path), "--results-dir", str(tmp_path / "r")),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert server.stats()["requests"] == 0 and server.stats()["batch_jobs"] == 0
    assert done.returncode == 2
    assert "openai-audio cannot use batch: true" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr


def test_a_list_of_base_urls_is_refused_with_batch(tmp_path: Path) -> None:
    dataset = write_dataset(tmp_path / "data", n_items=1)
    with FakeServer(fast_settings()) as server:
        path = experiment(tmp_path / "exp.yaml", dataset, server, batch=True)
        config = yaml.safe_load(path.read_text())
        config["provider"]["base_url"] = [server.openai_base_url, server.openai_base_url + "/"]
        path.write_text(yaml.safe_dump(config))
        done = subprocess.run(
            harness_command("run", str(path), "--results-dir", str(tmp_path / "r")),
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert done.returncode == 2
    assert "batch: true sends each batch to one server" in done.stderr


def test_requests_are_split_into_jobs_within_the_api_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from providers.api.openai_batch import OpenAIBatchApi

    monkeypatch.setattr(OpenAIBatchApi, "max_requests", 3)
    dataset = write_dataset(tmp_path / "data", n_items=2)
    with FakeServer(fast_settings()) as server:
        result = run(
            experiment(tmp_path / "exp.yaml", dataset, server, **BATCH),
            tmp_path / "cache",
            tmp_path / "results",
        )
        stats = server.stats()
    assert result.complete and stats["batch_jobs"] == 3 and stats["paid_requests"] == 8
    jobs = [e for e in read_jsonl(tmp_path / "results" / "batch" / "batches.jsonl")]
    sizes = [len(e["keys"]) for e in jobs if e["event"] == "submitting"]
    assert sorted(sizes) == [2, 3, 3]
