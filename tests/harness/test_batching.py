"""`batch: true` through the real SDKs against the fake API's batch endpoints: answers land in
the cache under the online keys, a re-run is free, and nothing is paid twice."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.cache import ResponseCache
from harness.config import load_experiments
from harness.runner import RunResult, run_experiment
from harness.testing.fake_api import FakeServer
from tests.reliability.conftest import answers_of, fast_settings, read_jsonl, write_dataset

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
