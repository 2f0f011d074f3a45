"""`max_retry_time_s` bounds the whole wait of a call: a Retry-After longer than what is left
of it ends the call at once (a transient failure, retried by the next run) instead of
sleeping past the budget."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from harness.calls.cache import ResponseCache
from harness.config.loading import load_experiments
from harness.fake_api import FakeServer
from tests.conftest import run_experiment
from tests.reliability.conftest import MakeDataset, fast_settings, read_jsonl, write_experiment


@pytest.mark.parametrize("retry_after", [40.0, 1e308])
def test_retry_after_never_outlasts_max_retry_time(
    retry_after: float, make_dataset: MakeDataset, tmp_path: Path
) -> None:
    dataset = make_dataset(n_items=1)
    with FakeServer(fast_settings(retry_after_s=retry_after)) as server:
        experiment = write_experiment(
            tmp_path / "exp.yaml",
            dataset,
            server,
            model="always-error-429",
            max_retry_time_s=2.0,
            max_attempts=5,
        )
        (config,) = load_experiments(experiment)
        cache = ResponseCache(tmp_path / "cache")
        started = time.monotonic()
        try:
            result = run_experiment(
                config, cache=cache, results_dir=tmp_path / "results", show_progress=False
            )
        finally:
            cache.close()
        elapsed = time.monotonic() - started
        requests = server.stats()["requests"]
    assert elapsed < 10.0
    assert requests == 4  # one attempt each: the wait asked for is past the budget
    records = read_jsonl(result.out_dir / "records.jsonl")
    assert all(r["error"].startswith("rate_limited: ") for r in records)
    assert all("max_retry_time_s" in r["error"] for r in records)
