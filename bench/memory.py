"""(5) Memory: peak RSS of `harness run` (a child process; its own ru_maxrss from wait4) for
4,800 calls over 1,000 distinct 10-second clips, against the fake server. The clips'
audio is larger than the goal, so it must be read and encoded per request, not held."""

from __future__ import annotations

from pathlib import Path

from bench.common import (
    BenchResult,
    DatasetSpec,
    Size,
    Workload,
    fake_server,
    harness_run,
    openai_provider,
    server_stats,
    synth_dataset,
    write_experiment,
)

GOAL_BYTES = 2**30
WORKLOADS = {
    "full": Workload(DatasetSpec(1200, 1000, 10.0, sample_rate=44100), 0.2, 64),
    "tiny": Workload(DatasetSpec(6, 10, 1.0, sample_rate=44100), 0.01, 8),
}


def run(size: Size, work: Path) -> BenchResult:
    workload = WORKLOADS[size]
    dataset = synth_dataset(workload.spec)
    audio_bytes = sum(p.stat().st_size for p in (dataset / "audio").iterdir())
    with fake_server(latency=workload.latency_s) as base:
        experiment = write_experiment(
            work / "memory.yaml",
            name="memory",
            dataset=dataset,
            provider=openai_provider(base, concurrency=workload.concurrency),
        )
        timed, stats = harness_run(experiment, work)
        seen = server_stats(base)
    if stats["errors"] or seen["answered"] != workload.calls:
        raise RuntimeError(f"harness run: {stats}, server: {seen}")
    peak = timed.max_rss_bytes
    return BenchResult(
        name="memory",
        summary=(
            f"{workload.calls} calls over {workload.spec.n_clips} clips of "
            f"{workload.spec.seconds:g} s ({audio_bytes / 2**20:.0f} MiB of WAV): "
            f"peak RSS {peak / 2**20:.0f} MiB"
        ),
        figures={
            "calls": workload.calls,
            "clips": workload.spec.n_clips,
            "clip": f"{workload.spec.seconds:g} s mono 16-bit at {workload.spec.sample_rate} Hz",
            "audio on disk (MiB)": round(audio_bytes / 2**20, 1),
            "peak RSS (MiB)": round(peak / 2**20, 1),
            "harness_process_wall_s": round(timed.wall_s, 2),
        },
        goal="peak RSS < 1 GiB",
        met=peak < GOAL_BYTES,
    )
