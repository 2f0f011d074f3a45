"""20% transient faults (429 + Retry-After, 500, 503, timeouts, dropped connections): every
candidate is scored once, nothing is paid twice, and the metrics equal a fault-free run's.

Scaled down here (160 calls); `python -m bench.soak --full` runs the 4,800-call version.
"""

from __future__ import annotations

import json
from pathlib import Path

from harness.calls.cache import ResponseCache
from harness.config.loading import load_experiments
from harness.fake_api import FakeServer
from harness.runs.runner import RunResult
from tests.conftest import run_experiment
from tests.reliability.conftest import (
    TRANSIENT,
    MakeDataset,
    answered_per_body,
    answers_of,
    fast_settings,
    faulted,
    paid_twice,
    read_jsonl,
    write_experiment,
)

N_ITEMS = 40


def _run(server: FakeServer, dataset: Path, work: Path) -> RunResult:
    work.mkdir()
    experiment = write_experiment(work / "exp.yaml", dataset, server, max_concurrency=16)
    (config,) = load_experiments(experiment)
    cache = ResponseCache(work / "cache")
    try:
        return run_experiment(
            config, cache=cache, results_dir=work / "results", show_progress=False
        )
    finally:
        cache.close()


def test_transient_faults_change_nothing_but_the_retry_count(
    make_dataset: MakeDataset, tmp_path: Path
) -> None:
    dataset = make_dataset(n_items=N_ITEMS, n_clips=16)
    with FakeServer(fast_settings()) as clean_server:
        clean = _run(clean_server, dataset, tmp_path / "clean")
    with FakeServer(fast_settings(fault_rate=0.2, faults=TRANSIENT)) as server:
        faulty = _run(server, dataset, tmp_path / "faulty")
        faults = faulted(server)
        answered = answered_per_body(server)
        duplicates = paid_twice(server)

    n_calls = 4 * N_ITEMS
    assert clean.complete and clean.stats.retries == 0
    assert faulty.complete, faulty.stats.first_errors
    # every kind of fault was met, about 20% of first attempts, and each was retried once
    assert set(faults) == set(TRANSIENT)
    assert 0.1 * n_calls <= sum(faults.values()) <= 0.35 * n_calls
    assert faulty.stats.retries == sum(faults.values())
    # one paid answer per call, none twice
    assert len(answered) == n_calls and duplicates == 0
    assert faulty.stats.model_calls == n_calls + faulty.stats.retries

    records = read_jsonl(faulty.out_dir / "records.jsonl")
    keys = [(r["item_id"], tuple(r["candidates"]), r.get("repeat", 0)) for r in records]
    assert len(records) == n_calls and len(set(keys)) == n_calls
    assert all(None not in r["scores"].values() and "error" not in r for r in records)
    assert answers_of(records) == answers_of(read_jsonl(clean.out_dir / "records.jsonl"))
    clean_metrics = json.loads((clean.out_dir / "metrics.json").read_text())
    assert json.loads((faulty.out_dir / "metrics.json").read_text()) == clean_metrics
    assert clean_metrics["coverage"] == 1.0
