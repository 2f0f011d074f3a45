"""(3) Warm-cache replay: 50,000 pointwise calls (12,500 items x 4 candidates over 2,000
one-second clips) run cold against the fake server at latency 0, then the same `harness run`
command three times more as whole processes, answered from the cache with records, metrics
and the report rewritten. The cold run is the reference (warm/cold); the goal is absolute."""

from __future__ import annotations

import statistics
from pathlib import Path

from bench.common import (
    BenchResult,
    DatasetSpec,
    Size,
    Workload,
    fake_server,
    harness_run,
    openai_provider,
    ratio,
    reset_server,
    server_stats,
    synth_dataset,
    write_experiment,
)

GOAL_S = 10.0  # the full size's warm re-run, whole process
WORKLOADS = {
    "full": Workload(DatasetSpec(12_500, 2_000, 1.0), latency_s=0.0, concurrency=64),
    "tiny": Workload(DatasetSpec(6, 24, 0.2), latency_s=0.0, concurrency=8),
}


def run(size: Size, work: Path) -> BenchResult:
    workload = WORKLOADS[size]
    rounds = 3 if size == "full" else 1
    dataset = synth_dataset(workload.spec)
    warm_walls, warm_rss, warm_hits = [], [], []
    with fake_server(latency=workload.latency_s) as base:
        experiment = write_experiment(
            work / "replay.yaml",
            name="replay",
            dataset=dataset,
            provider=openai_provider(base, concurrency=workload.concurrency),
        )
        cold, cold_stats = harness_run(experiment, work)
        for _ in range(rounds):
            reset_server(base)
            warm, warm_stats = harness_run(experiment, work, tree=True)
            if server_stats(base)["requests"] or warm_stats["cache_hits"] != workload.calls:
                raise RuntimeError(f"the replay was not all from the cache: {warm_stats}")
            warm_walls.append(round(warm.wall_s, 2))
            warm_rss.append(round(warm.peak_memory_bytes / 2**20))
            warm_hits.append(warm_stats["cache_hits"])
    if cold_stats["errors"]:
        raise RuntimeError(f"the cold run failed calls: {cold_stats}")
    best = min(warm_walls)
    return BenchResult(
        name="replay",
        summary=(
            f"{workload.calls:,}-call run: cold {cold.wall_s:.1f} s, warm re-run "
            f"{best:.2f} s min / {statistics.median(warm_walls):.2f} s median (whole process, "
            f"records, metrics and report included), warm/cold {ratio(best, cold.wall_s):.3f}"
        ),
        figures={
            "calls": workload.calls,
            "clips": workload.spec.n_clips,
            "cold_process_wall_s": round(cold.wall_s, 2),
            "cold_peak_rss_mib": round(cold.max_rss_bytes / 2**20),
            "warm_process_wall_s (each run)": warm_walls,
            "warm_peak_mib (each run; process and worker)": warm_rss,
            "warm_run_wall_s (run.json, last)": warm_stats["wall_s"],
            "warm/cold (min)": ratio(best, cold.wall_s),
            "cache hits per warm run": warm_hits,
        },
        goal=f"warm re-run of {workload.calls:,} calls <= {GOAL_S:g} s" if size == "full" else "",
        met=best <= GOAL_S if size == "full" else None,
        tracked=("warm/cold (min)",),
    )
