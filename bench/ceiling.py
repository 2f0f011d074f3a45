"""(1c) The coordinator's ceiling: the 4,800 pointwise calls of (1) against the fake server
at latency 0, so that wall time is what the client spends. The bare `openai` SDK
(bench/floor_openai.py) and `harness run` alternate, three rounds, each as a whole process;
CPU time per call is compared in process (the floor's around its `gather`, the harness's
from a driver that times `Runner.run`, imports and start-up left out) and as whole
processes (user + system time from wait4). Min and median of the rounds are reported."""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

from bench.common import (
    THROUGHPUT,
    BenchResult,
    Size,
    Workload,
    checked,
    export_requests,
    fake_server,
    openai_provider,
    ratio,
    reset_server,
    run_timed,
    server_stats,
    synth_dataset,
    write_experiment,
)
from bench.throughput import floor_command

GOAL = 1.3  # harness CPU per call / the floor's, in process
WORKLOADS = {
    "full": Workload(THROUGHPUT["full"].spec, latency_s=0.0, concurrency=64),
    "tiny": Workload(THROUGHPUT["tiny"].spec, latency_s=0.0, concurrency=8),
}


def harness_command(experiment: Path, work: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "bench.run_inproc",
        str(experiment),
        "--results-dir",
        str(work / "results"),
        "--cache-dir",
        str(work / "cache"),
    ]


def run(size: Size, work: Path) -> BenchResult:
    workload = WORKLOADS[size]
    rounds = 3 if size == "full" else 1
    dataset = synth_dataset(workload.spec)
    requests = work / "requests.jsonl"
    export_requests(dataset, requests)
    calls = workload.calls
    floor_wall, floor_cpu, floor_proc_cpu = [], [], []
    harness_wall, harness_cpu, harness_proc_cpu = [], [], []
    with fake_server(latency=0.0) as base:
        for index in range(rounds):
            reset_server(base)
            floor = checked(run_timed(floor_command(requests, base, workload.concurrency)), "floor")
            summary = json.loads(floor.output.strip().splitlines()[-1])
            if summary["answered"] != calls:
                raise RuntimeError(f"the floor script got {summary['answered']} answers")
            floor_wall.append(summary["wall_s"])
            floor_cpu.append(summary["cpu_s"])
            floor_proc_cpu.append(round(floor.cpu_s, 2))

            reset_server(base)
            experiment = write_experiment(
                work / f"ceiling_{index}.yaml",
                name=f"ceiling_{index}",
                dataset=dataset,
                provider=openai_provider(base, concurrency=workload.concurrency),
            )
            timed = checked(
                run_timed(
                    harness_command(experiment, work / f"harness_{index}"),
                    env={"OPENAI_API_KEY": "bench-key"},
                ),
                "harness run",
            )
            inner = json.loads(timed.output.strip().splitlines()[-1])
            seen = server_stats(base)
            if inner["errors"] or seen["requests"] != calls:
                raise RuntimeError(f"harness run: {inner}, server saw {seen['requests']}")
            harness_wall.append(inner["wall_s"])
            harness_cpu.append(inner["cpu_s"])
            harness_proc_cpu.append(round(timed.cpu_s, 2))

    def per_call(values: list[float]) -> list[float]:
        return [round(1000 * v / calls, 3) for v in values]

    cpu_ratio = ratio(min(harness_cpu), min(floor_cpu))
    wall_ratio = ratio(min(harness_wall), min(floor_wall))
    return BenchResult(
        name="ceiling",
        summary=(
            f"{calls} calls at latency 0, concurrency {workload.concurrency}: CPU per call "
            f"harness {1000 * min(harness_cpu) / calls:.2f} ms, floor "
            f"{1000 * min(floor_cpu) / calls:.2f} ms, harness/floor {cpu_ratio:.2f}; "
            f"wall harness/floor {wall_ratio:.2f}"
        ),
        figures={
            "calls": calls,
            "rounds (floor then harness, alternating)": rounds,
            "floor_in_process_wall_s": floor_wall,
            "harness_in_process_wall_s": harness_wall,
            "floor_cpu_ms_per_call (in process)": per_call(floor_cpu),
            "harness_cpu_ms_per_call (in process)": per_call(harness_cpu),
            "floor_process_cpu_s": floor_proc_cpu,
            "harness_process_cpu_s": harness_proc_cpu,
            "harness/floor CPU per call (in process, min)": cpu_ratio,
            "harness/floor CPU per call (in process, median)": ratio(
                statistics.median(harness_cpu), statistics.median(floor_cpu)
            ),
            "harness/floor wall (in process, min)": wall_ratio,
            "harness/floor CPU (whole process, min)": ratio(
                min(harness_proc_cpu), min(floor_proc_cpu)
            ),
        },
        goal=f"harness/floor CPU per call <= {GOAL}",
        tracked=(
            "harness/floor CPU per call (in process, min)",
            "harness/floor wall (in process, min)",
        ),
        met=cpu_ratio <= GOAL,
    )
