"""SIGKILL the runner at several points of a run; each restart resumes from the cache.

Counted at the server: the only answers paid twice are those in flight at a kill (answered
but not yet in the cache), at most max_concurrency per kill. The final metrics.json equals an
uninterrupted run's, and records.jsonl is never left half-written.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from harness.calls.cache import ResponseCache
from harness.config.loading import load_experiments
from harness.fake_api import FakeServer
from tests.conftest import run_experiment
from tests.reliability.conftest import (
    MakeDataset,
    answers_of,
    fast_settings,
    harness_command,
    paid_twice,
    read_jsonl,
    wait_until,
    write_experiment,
)

N_ITEMS = 60  # 240 calls
CONCURRENCY = 8
# Slow enough that the ~100 calls left after the 20th answer take seconds: on a loaded
# machine the signal is sent late, and a run that had already finished would prove nothing.
SLOW_S = 0.25
KILL_AFTER = (30, 90, 150)  # answers paid so far when each kill is sent


def _answered(server: FakeServer) -> int:
    return int(server.stats().get("status", {}).get("200", 0))


def _cached(cache_dir: Path) -> int:
    cache = ResponseCache(cache_dir)
    try:
        return len(cache)
    finally:
        cache.close()


def test_sigkill_at_several_points_then_resume(make_dataset: MakeDataset, tmp_path: Path) -> None:
    dataset = make_dataset(n_items=N_ITEMS, n_clips=16)
    cache_dir, results = tmp_path / "cache", tmp_path / "results"
    env = {**os.environ, "BGM_JUDGE_CACHE": str(cache_dir)}
    # --overwrite: the earlier run below used --limit, another configuration.
    run_args = ["--results-dir", str(results), "--no-progress", "--overwrite"]

    with FakeServer(fast_settings(latency_s=0.03)) as server:
        experiment = write_experiment(
            tmp_path / "exp.yaml", dataset, server, max_concurrency=CONCURRENCY
        )
        # A finished earlier run of the same experiment: its records must survive the kills.
        (config,) = load_experiments(experiment)
        cache = ResponseCache(cache_dir)
        try:
            first = run_experiment(
                config.model_copy(update={"limit": 5}),
                cache=cache,
                results_dir=results,
                show_progress=False,
            )
        finally:
            cache.close()
        assert first.complete
        records_path = results / "soak" / "records.jsonl"
        earlier = records_path.read_bytes()
        assert len(read_jsonl(records_path)) == 20

        lost_per_kill = []
        stderr = []
        for threshold in KILL_AFTER:
            process = subprocess.Popen(
                harness_command("run", str(experiment), *run_args),
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
            )
            wait_until(
                lambda t=threshold, p=process: _answered(server) >= t or p.poll() is not None
            )
            process.send_signal(signal.SIGKILL)
            _, err = process.communicate(timeout=30)
            stderr.append(err)
            assert process.returncode == -signal.SIGKILL, "the run ended before the kill"
            time.sleep(0.1)  # let the server finish with the requests the kill cut off
            # paid (answered) but not in the cache: these will be paid again
            lost = _answered(server) - _cached(cache_dir) - sum(lost_per_kill)
            lost_per_kill.append(lost)
            assert 0 <= lost <= CONCURRENCY
            assert records_path.read_bytes() == earlier  # never half-written
            assert (results / "soak" / "records.partial.jsonl").exists()

        final = subprocess.run(
            harness_command("run", str(experiment), *run_args),
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert final.returncode == 0, final.stderr
        duplicates = paid_twice(server)

    # resumed runs said what the killed ones left behind
    for err in [*stderr[1:], final.stderr]:
        assert "resuming soak: an interrupted run left" in err
    run = json.loads((results / "soak" / "run.json").read_text())
    assert run["resumed_records"] > 0 and run["errors"] == 0
    # model_calls counts attempts: a call retried after a timeout on a loaded machine is two
    assert run["cache_hits"] == 4 * N_ITEMS - (run["model_calls"] - run["retries"])
    assert not (results / "soak" / "records.partial.jsonl").exists()

    # only the answers cut off by a kill were paid twice
    print("answers lost per kill:", lost_per_kill)
    assert duplicates == sum(lost_per_kill) <= len(KILL_AFTER) * CONCURRENCY

    # the same outcome as a run that was never interrupted
    with FakeServer(fast_settings()) as server:
        experiment = write_experiment(tmp_path / "clean.yaml", dataset, server, max_concurrency=16)
        (config,) = load_experiments(experiment)
        cache = ResponseCache(tmp_path / "clean-cache")
        try:
            clean = run_experiment(
                config, cache=cache, results_dir=tmp_path / "clean", show_progress=False
            )
        finally:
            cache.close()
    records = read_jsonl(records_path)
    assert len(records) == 4 * N_ITEMS
    assert answers_of(records) == answers_of(read_jsonl(clean.out_dir / "records.jsonl"))
    assert (results / "soak" / "metrics.json").read_text() == (
        clean.out_dir / "metrics.json"
    ).read_text()


# Ctrl-C in a terminal reaches a process whose SIGINT is neither ignored nor blocked. The test
# process's may be ignored: a suite started as a background job of a non-interactive shell
# (`nohup make test &`, some CI runners) ignores SIGINT in every process it starts, and a child
# inherits that through exec (the run then ignored the signal: it finished with exit 0, or hung
# past the timeout). So the child starts from a terminal's state.
AS_FROM_A_TERMINAL = (
    "import os, signal, sys; signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT}); "
    "signal.signal(signal.SIGINT, signal.SIG_DFL); os.execv(sys.argv[1], sys.argv[1:])"
)


def _sigint_ignored_or_blocked(pid: int) -> bool:
    status = Path(f"/proc/{pid}/status").read_text().splitlines()
    masks = [int(line.split()[1], 16) for line in status if line.startswith(("SigIgn", "SigBlk"))]
    return any(mask & (1 << (signal.SIGINT - 1)) for mask in masks)


def test_ctrl_c_stops_cleanly_and_the_next_run_resumes(
    make_dataset: MakeDataset, tmp_path: Path
) -> None:
    dataset = make_dataset(n_items=30, n_clips=16)
    env = {**os.environ, "BGM_JUDGE_CACHE": str(tmp_path / "cache")}
    results = tmp_path / "results"
    with FakeServer(fast_settings(latency_s=SLOW_S)) as server:
        experiment = write_experiment(tmp_path / "exp.yaml", dataset, server, max_concurrency=4)
        command = harness_command("run", str(experiment), "--results-dir", str(results))
        process = subprocess.Popen(
            [sys.executable, "-c", AS_FROM_A_TERMINAL, *command, "--no-progress"],
            env=env,
            stderr=subprocess.PIPE,
            text=True,
        )
        wait_until(lambda: _answered(server) >= 20 or process.poll() is not None)
        assert not _sigint_ignored_or_blocked(process.pid)
        # The rest of the run cannot end before the signal lands, however loaded the machine
        # (it did once: a starved test sent Ctrl-C after the last answer, and the run had ended).
        server.configure(latency_s=2.0)
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=60)
        server.configure(latency_s=SLOW_S)
        assert process.returncode == 130, err
        assert "interrupted: re-run the same command to resume" in err
        assert "Traceback" not in err
        paid = _answered(server)
        resumed = subprocess.run(
            [*command, "--no-progress"], env=env, capture_output=True, text=True, timeout=120
        )
        assert resumed.returncode == 0, resumed.stderr
        assert "resuming soak: an interrupted run left" in resumed.stderr
        # like a kill: only the requests in flight at the interrupt are paid again
        assert paid_twice(server) <= 4 and _answered(server) - paid_twice(server) == 4 * 30
        assert paid >= 20
