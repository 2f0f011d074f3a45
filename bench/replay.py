"""(3) Warm-cache replay: the 4,800-call experiment of (1) run cold (empty cache, against
the fake server), then the same `harness run` command again as a whole process, answered
from the cache with metrics, records and report rewritten."""

from __future__ import annotations

from pathlib import Path

from bench.common import (
    THROUGHPUT,
    BenchResult,
    Size,
    fake_server,
    harness_run,
    openai_provider,
    ratio,
    reset_server,
    server_stats,
    synth_dataset,
    write_experiment,
)


def run(size: Size, work: Path) -> BenchResult:
    workload = THROUGHPUT[size]
    dataset = synth_dataset(workload.spec)
    with fake_server(latency=workload.latency_s) as base:
        experiment = write_experiment(
            work / "replay.yaml",
            name="replay",
            dataset=dataset,
            provider=openai_provider(base, concurrency=workload.concurrency),
        )
        cold, cold_stats = harness_run(experiment, work)
        reset_server(base)
        warm, warm_stats = harness_run(experiment, work)
        seen = server_stats(base)
    if cold_stats["errors"] or warm_stats["cache_hits"] != workload.calls or seen["requests"]:
        raise RuntimeError(f"the replay was not all from the cache: {warm_stats}, {seen}")
    share = ratio(warm.wall_s, cold.wall_s)
    return BenchResult(
        name="replay",
        summary=(
            f"{workload.calls}-call run: cold {cold.wall_s:.1f} s, warm replay {warm.wall_s:.2f} s "
            f"(whole process, metrics and report included), warm/cold {share:.3f}"
        ),
        figures={
            "calls": workload.calls,
            "cold_process_wall_s": round(cold.wall_s, 2),
            "warm_process_wall_s": round(warm.wall_s, 2),
            "cold_run_wall_s (run.json)": cold_stats["wall_s"],
            "warm_run_wall_s (run.json)": warm_stats["wall_s"],
            "warm/cold": share,
            "model calls in the warm run": warm_stats["model_calls"],
            "requests at the server in the warm run": seen["requests"],
        },
    )
