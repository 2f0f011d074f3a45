"""(1) Throughput against the practical floor: 4,800 pointwise calls (1,200 items x 4, a
different clip per candidate) to the fake server at a fixed 200 ms latency and concurrency
64, sent once by the bare `openai` SDK (bench/floor_openai.py) and once by `harness run`,
alternately, each as a whole process; the best of the rounds of each is compared."""

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

GOAL = 1.05  # issue 26: wall within 5% of the bare SDK's


def floor_command(requests: Path, base: str, concurrency: int) -> list[str]:
    return [
        sys.executable,
        "-m",
        "bench.floor_openai",
        str(requests),
        "--base-url",
        f"{base}/v1",
        "--concurrency",
        str(concurrency),
    ]


def run(size: Size, work: Path) -> BenchResult:
    workload = THROUGHPUT[size]
    rounds = 3 if size == "full" else 1
    dataset = synth_dataset(workload.spec)
    requests = work / "requests.jsonl"
    export_requests(dataset, requests)
    floors, floors_inner, harnesses, harnesses_inner = [], [], [], []
    floor_cpu, harness_cpu = [], []
    with fake_server(latency=workload.latency_s) as base:
        for index in range(rounds):
            reset_server(base)
            floor = checked(run_timed(floor_command(requests, base, workload.concurrency)), "floor")
            summary = json.loads(floor.output.strip().splitlines()[-1])
            if summary["answered"] != workload.calls:
                raise RuntimeError(f"the floor script got {summary['answered']} answers")
            floors.append(floor.wall_s)
            floor_cpu.append(round(floor.cpu_s, 2))
            floors_inner.append(summary["wall_s"])

            reset_server(base)
            experiment = write_experiment(
                work / f"throughput_{index}.yaml",
                name=f"throughput_{index}",
                dataset=dataset,
                provider=openai_provider(base, concurrency=workload.concurrency),
            )
            timed, stats = harness_run(experiment, work / f"harness_{index}")
            seen = server_stats(base)
            if stats["errors"] or seen["requests"] != workload.calls:
                raise RuntimeError(f"harness run: {stats}, server saw {seen['requests']}")
            harnesses.append(timed.wall_s)
            harness_cpu.append(round(timed.cpu_s, 2))
            harnesses_inner.append(stats["wall_s"])
    floor_s, harness_s = min(floors), min(harnesses)
    overhead = ratio(harness_s, floor_s)
    return BenchResult(
        name="throughput",
        summary=(
            f"{workload.calls} calls at {workload.latency_s * 1000:.0f} ms, concurrency "
            f"{workload.concurrency}: harness {harness_s:.1f} s, bare SDK floor {floor_s:.1f} s, "
            f"harness/floor {overhead:.2f}, harness/ideal {ratio(harness_s, workload.ideal_s):.2f}"
        ),
        figures={
            "calls": workload.calls,
            "clip_seconds": workload.spec.seconds,
            "ideal_s": workload.ideal_s,
            "rounds (floor then harness, alternating; best of each compared)": rounds,
            "floor_process_wall_s": [round(x, 2) for x in floors],
            "floor_in_process_wall_s": floors_inner,
            "harness_process_wall_s": [round(x, 2) for x in harnesses],
            "harness_run_wall_s (run.json)": harnesses_inner,
            "floor_cpu_s (user+system)": floor_cpu,
            "harness_cpu_s (user+system)": harness_cpu,
            "harness/floor (process)": overhead,
            "harness/floor (in-process)": ratio(min(harnesses_inner), min(floors_inner)),
            "floor/ideal (process)": ratio(floor_s, workload.ideal_s),
            "harness/ideal (process)": ratio(harness_s, workload.ideal_s),
            "harness/floor CPU time": ratio(min(harness_cpu), min(floor_cpu)),
        },
        goal=f"harness/floor <= {GOAL}",
        met=overhead <= GOAL,
        tracked=("harness/floor (process)", "harness/floor CPU time"),
    )
