"""(5) Memory: peak RSS of `harness run` (a child process; its own ru_maxrss from wait4) for
4,800 calls over 1,000 distinct 10-second clips, against the fake server. The same run over
a quarter of the clips is the reference: if audio were held rather than read and encoded per
request (with bounded LRUs), the peak would grow with the number of clips."""

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
    ratio,
    server_stats,
    synth_dataset,
    write_experiment,
)

GOAL_BYTES = 2**30
WORKLOADS = {
    "full": Workload(DatasetSpec(1200, 1000, 10.0, sample_rate=44100), 0.2, 64),
    "tiny": Workload(DatasetSpec(6, 12, 1.0, sample_rate=44100), 0.01, 8),
}


def peak_rss(workload: Workload, name: str, work: Path) -> tuple[int, float, int]:
    """(peak RSS in bytes, process wall, bytes of audio on disk) of one run."""
    dataset = synth_dataset(workload.spec)
    audio_bytes = sum(p.stat().st_size for p in (dataset / "audio").iterdir())
    with fake_server(latency=workload.latency_s) as base:
        experiment = write_experiment(
            work / f"{name}.yaml",
            name=name,
            dataset=dataset,
            provider=openai_provider(base, concurrency=workload.concurrency),
        )
        timed, stats = harness_run(experiment, work / name)
        seen = server_stats(base)
    if stats["errors"] or seen["answered"] != workload.calls:
        raise RuntimeError(f"harness run: {stats}, server: {seen}")
    return timed.max_rss_bytes, timed.wall_s, audio_bytes


def run(size: Size, work: Path) -> BenchResult:
    workload = WORKLOADS[size]
    spec = workload.spec
    quarter = Workload(
        DatasetSpec(
            spec.n_items, max(spec.n_candidates, spec.n_clips // 4), spec.seconds, spec.sample_rate
        ),
        workload.latency_s,
        workload.concurrency,
    )
    peak, wall, audio_bytes = peak_rss(workload, "memory", work)
    reference, _, reference_audio = peak_rss(quarter, "memory_quarter", work)
    mib = 2**20
    return BenchResult(
        name="memory",
        summary=(
            f"{workload.calls} calls over {spec.n_clips} clips of {spec.seconds:g} s "
            f"({audio_bytes / mib:.0f} MiB of WAV): peak RSS {peak / mib:.0f} MiB; over "
            f"{quarter.spec.n_clips} clips {reference / mib:.0f} MiB"
        ),
        figures={
            "calls": workload.calls,
            "clip": f"{spec.seconds:g} s mono 16-bit WAV at {spec.sample_rate} Hz, sent as stored",
            "clips": spec.n_clips,
            "audio on disk (MiB)": round(audio_bytes / mib, 1),
            "peak RSS (MiB)": round(peak / mib, 1),
            "reference: clips": quarter.spec.n_clips,
            "reference: audio on disk (MiB)": round(reference_audio / mib, 1),
            "reference: peak RSS (MiB)": round(reference / mib, 1),
            "peak RSS ratio, 4x the clips": ratio(peak, reference),
            "harness_process_wall_s": round(wall, 2),
        },
        goal="peak RSS < 1 GiB",
        met=peak < GOAL_BYTES,
    )
