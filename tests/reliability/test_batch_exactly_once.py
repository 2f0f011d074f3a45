"""Batch mode pays each request once, counted at the fake server: across a SIGKILL while the
run polls (the re-run attaches to the job instead of sending it again), across a kill before
the job's id was written down (found again by its label), and when a job expires, answers
some requests with error lines or gives output lines that cannot be read."""

from __future__ import annotations

import json
import os
import signal
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
    MakeDataset,
    fast_settings,
    harness_command,
    read_jsonl,
    wait_until,
)

N_ITEMS = 10  # 40 requests
BATCH = {"batch": True, "batch_poll_s": 0.02, "batch_collect_s": 0.05}


def write(path: Path, dataset: Path, server: FakeServer, provider: str, **extra: Any) -> Path:
    if provider == "gemini":
        block = {"name": "gemini", "model": "gemini-2.5-flash", "base_url": server.gemini_base_url}
    else:
        block = {"name": provider, "model": "fake-judge", "base_url": server.openai_base_url}
    block.update({"retry_wait_s": 0.01, "retry_max_wait_s": 0.05, "timeout_s": 5.0})
    block.update({**BATCH, **extra})
    config = {"name": "batch", "dataset": str(dataset), "provider": block, "n_bootstrap": 50}
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def run(path: Path, tmp_path: Path) -> RunResult:
    (config,) = load_experiments(path)
    cache = ResponseCache(tmp_path / "cache")
    try:
        return run_experiment(
            config, cache=cache, results_dir=tmp_path / "results", show_progress=False
        )
    finally:
        cache.close()


def ledger(tmp_path: Path) -> list[dict[str, Any]]:
    path = tmp_path / "results" / "batch" / "batches.jsonl"
    return read_jsonl(path) if path.exists() else []


@pytest.mark.parametrize("drop_id", [False, True], ids=["polling", "before-id-written"])
@pytest.mark.parametrize("provider", ["openai-compatible", "gemini"])
def test_kill_while_polling_then_resume_pays_nothing_twice(
    provider: str, drop_id: bool, make_dataset: MakeDataset, tmp_path: Path
) -> None:
    dataset = make_dataset(n_items=N_ITEMS)
    env = {**os.environ, "BGM_JUDGE_CACHE": str(tmp_path / "cache")}
    with FakeServer(fast_settings(batch_latency_s=600)) as server:
        experiment = write(tmp_path / "exp.yaml", dataset, server, provider)
        command = harness_command(
            "run", str(experiment), "--results-dir", str(tmp_path / "results"), "--no-progress"
        )
        process = subprocess.Popen(command, env=env, stderr=subprocess.PIPE, text=True)
        wait_until(
            lambda: (
                any(e["event"] == "submitted" for e in ledger(tmp_path))
                or process.poll() is not None
            )
        )
        process.send_signal(signal.SIGKILL)
        process.communicate(timeout=30)
        assert process.returncode == -signal.SIGKILL, "the run ended before the kill"
        assert server.stats()["batch_jobs"] == 1
        if drop_id:  # as if the kill came between the job's creation and writing its id
            path = tmp_path / "results" / "batch" / "batches.jsonl"
            kept = [e for e in ledger(tmp_path) if e["event"] != "submitted"]
            path.write_text("".join(json.dumps(e) + "\n" for e in kept))
        server.configure(batch_latency_s=0.0)  # the job finishes while nobody follows it
        resumed = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
        assert resumed.returncode == 0, resumed.stderr
        assert "attaching to" in resumed.stderr
        stats = server.stats()
    assert stats["batch_jobs"] == 1  # attached, never submitted again
    assert stats["paid_requests"] == 4 * N_ITEMS and stats["paid_duplicates"] == 0
    assert stats["requests"] == 0  # nothing went online
    run_json = json.loads((tmp_path / "results" / "batch" / "run.json").read_text())
    assert run_json["batch"]["attached"] == 1 and run_json["errors"] == 0
    assert run_json["batch"]["batches"] == 0  # this run submitted none
    assert run_json["batch"]["answered_attached"] == 4 * N_ITEMS
    # the run's line says where its answers came from: not the model, not the cache
    assert f"cached, {4 * N_ITEMS} from batch jobs sent earlier)" in resumed.stdout + resumed.stderr


@pytest.mark.parametrize("provider", ["openai-compatible", "gemini"])
def test_an_expired_job_sends_only_what_it_did_not_answer(
    provider: str, make_dataset: MakeDataset, tmp_path: Path
) -> None:
    dataset = make_dataset(n_items=N_ITEMS)
    with FakeServer(fast_settings(batch_expire_first=1)) as server:
        result = run(write(tmp_path / "exp.yaml", dataset, server, provider), tmp_path)
        stats = server.stats()
    assert result.complete
    # OpenAI delivers what an expired job answered (half here); Gemini's expired job nothing
    resent = 4 * N_ITEMS // 2 if provider != "gemini" else 4 * N_ITEMS
    assert result.stats.batch is not None and result.stats.batch["resubmitted"] == resent
    assert stats["batch_jobs"] == 2
    assert stats["paid_requests"] == 4 * N_ITEMS and stats["paid_duplicates"] == 0
    assert next(e.get("status") for e in ledger(tmp_path) if e["event"] == "collected") in (
        "expired",
        "JOB_STATE_EXPIRED",
    )


def test_batch_fallback_online_answers_the_rest_online(
    make_dataset: MakeDataset, tmp_path: Path
) -> None:
    dataset = make_dataset(n_items=N_ITEMS)
    with FakeServer(fast_settings(batch_expire_first=1)) as server:
        experiment = write(
            tmp_path / "exp.yaml", dataset, server, "openai-compatible", batch_fallback="online"
        )
        result = run(experiment, tmp_path)
        stats = server.stats()
    assert result.complete
    assert stats["batch_jobs"] == 1 and stats["requests"] == 2 * N_ITEMS  # online requests
    assert stats["paid_requests"] == 4 * N_ITEMS and stats["paid_duplicates"] == 0
    assert result.stats.batch is not None and result.stats.batch["answered_online"] == 2 * N_ITEMS


@pytest.mark.parametrize("provider", ["openai-compatible", "gemini"])
def test_error_lines_are_sent_again_and_paid_once(
    provider: str, make_dataset: MakeDataset, tmp_path: Path
) -> None:
    dataset = make_dataset(n_items=N_ITEMS)
    with FakeServer(fast_settings(batch_error_rate=0.4)) as server:
        result = run(write(tmp_path / "exp.yaml", dataset, server, provider), tmp_path)
        stats = server.stats()
    assert result.complete
    assert result.stats.batch is not None and result.stats.batch["resubmitted"] > 0
    assert stats["paid_requests"] == 4 * N_ITEMS and stats["paid_duplicates"] == 0


@pytest.mark.parametrize("provider", ["openai-compatible", "gemini"])
def test_unreadable_output_lines_are_kept_counted_and_asked_again(
    provider: str, make_dataset: MakeDataset, tmp_path: Path
) -> None:
    dataset = make_dataset(n_items=N_ITEMS)
    with FakeServer(fast_settings(batch_unreadable_rate=0.3)) as server:
        result = run(write(tmp_path / "exp.yaml", dataset, server, provider), tmp_path)
        stats = server.stats()
    assert result.complete
    assert result.stats.batch is not None
    unreadable = result.stats.batch["unreadable_lines"]
    assert unreadable > 0
    kept = [line for e in ledger(tmp_path) for line in e.get("unreadable", [])]
    assert len(kept) == unreadable
    # an answer that came back unreadable was paid, and is paid again: counted, not hidden
    assert stats["paid_duplicates"] == unreadable
    assert stats["paid_requests"] == 4 * N_ITEMS + unreadable


def test_a_permanent_error_line_fails_its_request_without_resubmitting(
    make_dataset: MakeDataset, tmp_path: Path
) -> None:
    dataset = make_dataset(n_items=2)
    with FakeServer(fast_settings()) as server:
        experiment = write(
            tmp_path / "exp.yaml", dataset, server, "openai-compatible", model="fake-error-400"
        )
        result = run(experiment, tmp_path)
        stats = server.stats()
    assert not result.complete and result.stats.error_kinds["bad_request"] == 8
    assert stats["batch_jobs"] == 1 and stats["paid_requests"] == 0


def test_a_job_the_server_does_not_know_is_abandoned_not_fatal(
    make_dataset: MakeDataset, tmp_path: Path
) -> None:
    dataset = make_dataset(n_items=2)
    folder = tmp_path / "results" / "batch"
    folder.mkdir(parents=True)
    events = [
        {"event": "submitting", "label": "gone", "keys": ["k"], "api": "OpenAI Batch API"},
        {"event": "submitted", "label": "gone", "id": "batch_gone"},
    ]
    (folder / "batches.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    with FakeServer(fast_settings()) as server:
        result = run(write(tmp_path / "exp.yaml", dataset, server, "openai-compatible"), tmp_path)
        stats = server.stats()
    assert result.complete and stats["batch_jobs"] == 1 and stats["paid_requests"] == 8
    assert {"event": "abandoned", "label": "gone"}.items() <= ledger(tmp_path)[2].items()
    assert result.stats.batch is not None and result.stats.batch["attached"] == 0
