"""(1b) Latency-bound throughput: 960 pointwise calls at a fixed 1 s latency and concurrency
32 (ideal 30 s, well within what the CPU can drive); `harness run` as a whole process."""

from __future__ import annotations

from pathlib import Path

from bench.common import (
    CLIP_SECONDS,
    BenchResult,
    DatasetSpec,
    Size,
    Workload,
    fake_server,
    harness_run,
    openai_provider,
    ratio,
    server_stats,
    synth_dataset,
    write_experiment,
)

GOAL = 1.10
WORKLOADS = {
    "full": Workload(DatasetSpec(240, 960, CLIP_SECONDS), latency_s=1.0, concurrency=32),
    "tiny": Workload(DatasetSpec(4, 16, 0.2), latency_s=0.05, concurrency=4),
}


def run(size: Size, work: Path) -> BenchResult:
    workload = WORKLOADS[size]
    dataset = synth_dataset(workload.spec)
    with fake_server(latency=workload.latency_s) as base:
        experiment = write_experiment(
            work / "latency.yaml",
            name="latency",
            dataset=dataset,
            provider=openai_provider(base, concurrency=workload.concurrency),
        )
        timed, stats = harness_run(experiment, work)
        seen = server_stats(base)
    if stats["errors"] or seen["requests"] != workload.calls:
        raise RuntimeError(f"harness run: {stats}, server saw {seen['requests']}")
    wall_ratio = ratio(timed.wall_s, workload.ideal_s)
    return BenchResult(
        name="latency",
        summary=(
            f"{workload.calls} calls at {workload.latency_s:g} s, concurrency "
            f"{workload.concurrency}: {timed.wall_s:.1f} s, wall/ideal {wall_ratio:.3f}"
        ),
        figures={
            "calls": workload.calls,
            "ideal_s": workload.ideal_s,
            "harness_process_wall_s": round(timed.wall_s, 2),
            "harness_run_wall_s (run.json)": stats["wall_s"],
            "wall/ideal (process)": wall_ratio,
            "wall/ideal (in-process)": ratio(stats["wall_s"], workload.ideal_s),
        },
        goal=f"wall/ideal <= {GOAL}",
        met=wall_ratio <= GOAL,
        tracked=("wall/ideal (process)",),
    )
