"""Two processes sharing one cache directory: no corruption, and an answer both need is paid
once (a claim per key in the cache: the second process waits for the first one's answer)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.calls.cache import ResponseCache
from harness.config.experiment import ExperimentConfig, provider_config
from harness.fake_api import FakeServer
from harness.runs.runner import Runner
from tests.conftest import run_experiment
from tests.reliability.conftest import (
    MakeDataset,
    answered_per_body,
    fast_settings,
    harness_command,
    paid_twice,
    read_jsonl,
    write_experiment,
)

HOLDER = """
import os, sys, time
from harness.calls.cache import ResponseCache
cache = ResponseCache(sys.argv[1])
key, hold_s, then, go = sys.argv[2], float(sys.argv[3]), sys.argv[4], sys.argv[5]
assert cache.claim(key)
print("claimed", flush=True)
deadline = time.monotonic() + 60
while go and not os.path.exists(go) and time.monotonic() < deadline:
    time.sleep(0.01)  # until the other process is waiting for this claim
time.sleep(hold_s)
if then == "die":
    os._exit(0)
if then == "answer":
    cache.set(key, {"text": '{"score": 9.9}', "input_tokens": 1, "output_tokens": 1})
cache.release(key)
cache.close()
"""


def _hold_claim(
    cache_dir: Path, key: str, hold_s: float, then: str, go: Path | None = None
) -> subprocess.Popen[str]:
    """Another process that claims `key`, holds it (until the file `go` exists, when given,
    then `hold_s` more), then answers, gives up, or dies."""
    process = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(cache_dir), key, str(hold_s), then, str(go or "")],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None and process.stdout.readline().strip() == "claimed"
    return process


def test_claims_are_exclusive_and_released(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path / "cache")
    try:
        assert cache.claim("k")
        assert not cache.claim("k")
        assert cache.claimed_elsewhere("k")  # a live holder (this process)
        cache.release("k")
        assert not cache.claimed_elsewhere("k") and cache.claim("k")
        cache.release("k")
        assert cache.claim("short", lease_s=0.05)
        time.sleep(0.1)
        assert cache.claim("short")  # the lease lapsed
        assert len(cache) == 0  # claims are not answers
    finally:
        cache.close()


def test_claim_of_a_dead_process_is_taken_over(tmp_path: Path) -> None:
    cache_dir = tmp_path / "cache"
    holder = _hold_claim(cache_dir, "k", 0.0, "die")
    holder.wait(timeout=30)
    cache = ResponseCache(cache_dir)
    try:
        assert not cache.claim("k")  # the dead process's claim is still stored
        assert not cache.claimed_elsewhere("k")  # but recognised as dead and dropped
        assert cache.claim("k")
    finally:
        cache.close()


@pytest.mark.parametrize("then", ["answer", "release", "die"])
def test_runner_waits_for_the_process_holding_a_claim(
    then: str, make_dataset: MakeDataset, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = ExperimentConfig(
        name="c", dataset=make_dataset(n_items=1), provider=provider_config(name="mock")
    )
    cache_dir = tmp_path / "cache"
    cache = ResponseCache(cache_dir)
    try:
        runner = Runner(config, cache=cache, results_dir=tmp_path / "results", show_progress=False)
        first = runner.prepare(runner.dataset())[0]
        go = tmp_path / "go"
        holder = _hold_claim(cache_dir, first.key, 0.1, then, go)
        asked = cache.claimed_elsewhere

        def waiting(key: str) -> bool:
            go.touch()  # the run found the claim held: the holder may go on
            return asked(key)

        monkeypatch.setattr(cache, "claimed_elsewhere", waiting)
        result = run_experiment(
            config, cache=cache, results_dir=tmp_path / "results", show_progress=False
        )
        holder.wait(timeout=30)
    finally:
        cache.close()
    records = read_jsonl(result.out_dir / "records.jsonl")
    (waited,) = [r for r in records if r["candidates"] == list(first.candidates)]
    assert result.complete
    if then == "answer":  # the other process paid; this one took its answer
        assert result.stats.shared_answers == 1 and result.stats.model_calls == 3
        assert waited["raw"] == '{"score": 9.9}' and waited["cache_hit"] is True
    else:  # it gave up or died: this process asks the model itself
        assert result.stats.shared_answers == 0 and result.stats.model_calls == 4
        assert waited["raw"] != '{"score": 9.9}'


def _subset(source: Path, target: Path, item_ids: list[str]) -> Path:
    shutil.copytree(source, target)
    items = [json.loads(line) for line in (source / "items.jsonl").read_text().splitlines()]
    kept = [item for item in items if item["id"] in item_ids]
    (target / "items.jsonl").write_text("".join(json.dumps(item) + "\n" for item in kept))
    return target


def test_two_processes_with_overlapping_experiments_pay_once(
    make_dataset: MakeDataset, tmp_path: Path
) -> None:
    full = make_dataset(n_items=60, n_clips=16)
    # both start with the same 20 items, so their requests for them overlap in time
    ids_a = [f"d{i}" for i in range(40)]
    ids_b = [f"d{i}" for i in [*range(20), *range(40, 60)]]
    data_a = _subset(full, tmp_path / "a", ids_a)
    data_b = _subset(full, tmp_path / "b", ids_b)
    env = {**os.environ, "BGM_JUDGE_CACHE": str(tmp_path / "cache")}
    results = tmp_path / "results"

    with FakeServer(fast_settings(latency_s=0.1, fault_rate=0.1)) as server:
        processes = [
            subprocess.Popen(
                harness_command(
                    "run",
                    # A client that gives up on a request the server answers pays for it twice,
                    # whatever the harness does: 2 s was once too short for a fault-free call
                    # on the loaded 2-core machine (28 requests against the 27 faults' 27).
                    # 10 s leaves only the stalls (30 s) to time out.
                    str(
                        write_experiment(
                            tmp_path / f"{name}.yaml", data, server, name=name, timeout_s=10.0
                        )
                    ),
                    "--results-dir",
                    str(results),
                    "--no-progress",
                ),
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
            )
            for name, data in (("a", data_a), ("b", data_b))
        ]
        outcomes = [p.communicate(timeout=300) for p in processes]
        assert [p.returncode for p in processes] == [0, 0], outcomes
        answered = answered_per_body(server)
        duplicates = paid_twice(server)
        twice = [  # what the server saw of each body it answered twice, for the failure message
            (r.body_sha256[:8], r.arrival, r.status, r.outcome, round(r.done_s - r.arrived_s, 2))
            for r in server.requests()
            if answered[r.body_sha256] > 1
        ]

    runs = {name: json.loads((results / name / "run.json").read_text()) for name in "ab"}
    print({name: {k: run[k] for k in ("model_calls", "retries", "cache_hits", "shared_answers")}
           for name, run in runs.items()})  # fmt: skip
    assert duplicates == 0 and len(answered) == 4 * 60, twice  # every answer paid once
    assert sum(run["model_calls"] - run["retries"] for run in runs.values()) == 4 * 60
    assert sum(run["cache_hits"] for run in runs.values()) == 4 * 20  # the overlap, once
    assert all(run["errors"] == 0 for run in runs.values())

    records = {name: read_jsonl(results / name / "records.jsonl") for name in "ab"}
    assert len(records["a"]) == len(records["b"]) == 160
    shared = set(ids_a) & set(ids_b)
    assert len(shared) == 20

    def answers(name: str) -> list[tuple[str, str, str]]:
        rows = [r for r in records[name] if r["item_id"] in shared]
        return sorted((r["item_id"], str(r["candidates"]), r["raw"]) for r in rows)

    assert answers("a") == answers("b")
    cache = ResponseCache(tmp_path / "cache")
    try:
        assert len(cache) == 4 * 60
    finally:
        cache.close()
