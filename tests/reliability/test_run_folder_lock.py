"""Two processes running the same experiment into the same results folder: the second one is
refused at once with one line naming the process that writes there (it never crashes on the
first one's files), and the first one finishes undisturbed."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

from harness.fake_api import FakeServer
from tests.reliability.conftest import (
    MakeDataset,
    fast_settings,
    harness_command,
    read_jsonl,
    wait_until,
    write_experiment,
)

N_ITEMS = 6


def test_a_second_process_into_the_same_run_folder_is_refused(
    make_dataset: MakeDataset, tmp_path: Path
) -> None:
    dataset = make_dataset(n_items=N_ITEMS)
    env = {**os.environ, "BGM_JUDGE_CACHE": str(tmp_path / "cache")}
    results = tmp_path / "results"
    with FakeServer(fast_settings(latency_s=0.3)) as server:
        experiment = write_experiment(tmp_path / "exp.yaml", dataset, server, max_concurrency=2)
        command = harness_command("run", str(experiment), "--results-dir", str(results),
                                  "--no-progress")  # fmt: skip
        first = subprocess.Popen(command, env=env, stderr=subprocess.PIPE, text=True)
        wait_until(lambda: (results / "soak" / "records.partial.jsonl").exists())
        started = time.monotonic()
        second = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
        refused_within = time.monotonic() - started
        _, first_err = first.communicate(timeout=120)
    assert first.returncode == 0, first_err
    assert second.returncode == 2, second.stderr
    lines = [line for line in second.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), second.stderr
    assert f"process {first.pid}" in lines[0] and str(results / "soak") in lines[0]
    assert refused_within < 30
    assert len(read_jsonl(results / "soak" / "records.jsonl")) == 4 * N_ITEMS


def test_the_lock_dies_with_its_process(make_dataset: MakeDataset, tmp_path: Path) -> None:
    """A killed run leaves no lock behind: the next run resumes at once."""
    dataset = make_dataset(n_items=N_ITEMS)
    env = {**os.environ, "BGM_JUDGE_CACHE": str(tmp_path / "cache")}
    results = tmp_path / "results"
    with FakeServer(fast_settings(latency_s=0.3)) as server:
        experiment = write_experiment(tmp_path / "exp.yaml", dataset, server, max_concurrency=2)
        command = harness_command("run", str(experiment), "--results-dir", str(results),
                                  "--no-progress")  # fmt: skip
        killed = subprocess.Popen(command, env=env, stderr=subprocess.DEVNULL)
        wait_until(lambda: (results / "soak" / "records.partial.jsonl").exists())
        killed.kill()
        killed.wait(timeout=30)
        again = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr
    assert "resuming" in again.stderr
