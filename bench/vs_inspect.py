"""(6) Side by side with inspect_ai: the workload of (1) (same rendered prompts, same clips,
same fake server, same concurrency) run through inspect_ai's OpenAI provider
(bench/inspect_task.py) and through `harness run`, each as a whole process, in one run."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from bench.common import (
    THROUGHPUT,
    BenchResult,
    Size,
    checked,
    export_requests,
    fake_server,
    harness_run,
    openai_provider,
    ratio,
    reset_server,
    run_timed,
    server_stats,
    synth_dataset,
    write_experiment,
)


def run(size: Size, work: Path) -> BenchResult:
    workload = THROUGHPUT[size]
    dataset = synth_dataset(workload.spec)
    requests = work / "requests.jsonl"
    export_requests(dataset, requests)
    with fake_server(latency=workload.latency_s) as base:
        command = [
            sys.executable,
            "-m",
            "bench.inspect_task",
            str(requests),
            "--base-url",
            f"{base}/v1",
            "--max-connections",
            str(workload.concurrency),
            "--log-dir",
            str(work / "inspect_logs"),
        ]
        inspect = checked(run_timed(command, env={"OPENAI_API_KEY": "bench-key"}), "inspect_ai")
        summary = json.loads(inspect.output.strip().splitlines()[-1])
        inspect_seen = server_stats(base)
        if summary["samples"] != workload.calls or inspect_seen["answered"] != workload.calls:
            raise RuntimeError(f"inspect_ai run: {summary}, server: {inspect_seen}")

        reset_server(base)
        experiment = write_experiment(
            work / "vs_inspect.yaml",
            name="vs_inspect",
            dataset=dataset,
            provider=openai_provider(base, concurrency=workload.concurrency),
        )
        harness, stats = harness_run(experiment, work)
        harness_seen = server_stats(base)
    if stats["errors"] or harness_seen["answered"] != workload.calls:
        raise RuntimeError(f"harness run: {stats}, server: {harness_seen}")
    speedup = ratio(inspect.wall_s, harness.wall_s)
    return BenchResult(
        name="inspect",
        summary=(
            f"{workload.calls} calls at {workload.latency_s * 1000:.0f} ms, concurrency "
            f"{workload.concurrency}: inspect_ai {inspect.wall_s:.1f} s, bgm-judge "
            f"{harness.wall_s:.1f} s, inspect_ai/bgm-judge {speedup:.2f}"
        ),
        figures={
            "calls": workload.calls,
            "ideal_s": workload.ideal_s,
            "inspect_ai_process_wall_s": round(inspect.wall_s, 2),
            "inspect_ai_eval_wall_s (in-process)": summary["wall_s"],
            "bgm_judge_process_wall_s": round(harness.wall_s, 2),
            "bgm_judge_run_wall_s (run.json)": stats["wall_s"],
            "inspect_ai/bgm-judge": speedup,
            "inspect_ai peak RSS (MiB)": round(inspect.max_rss_bytes / 2**20),
            "bgm-judge peak RSS (MiB)": round(harness.max_rss_bytes / 2**20),
        },
    )
