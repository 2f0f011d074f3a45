"""(5b) Memory flat in the number of calls: the seeded `random` scorer (no model, no
server: what is left is the harness) over 1k, 10k and 100k items of 4 candidates, one call
per item, each `harness run` a whole process (peak RSS from wait4), then the largest again
on its warm cache (every answer cached). The smallest run is the reference: the growth per
call is (peak(largest) - peak(smallest)) / (calls(largest) - calls(smallest))."""

from __future__ import annotations

from pathlib import Path

import yaml

from bench.common import BenchResult, DatasetSpec, Size, harness_run, ratio, synth_dataset

GOAL_MIB = 300  # the 100k-call run's peak
SERIES = {"full": (1_000, 10_000, 100_000), "tiny": (20, 200)}


def experiment(path: Path, dataset: Path, name: str) -> Path:
    config = {
        "name": name,
        "dataset": str(dataset),
        "provider": {"name": "random", "model": "uniform", "seed": 0},
        "inputs": {"dialogue": "full", "music": "caption"},
        "n_bootstrap": 100,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def run(size: Size, work: Path) -> BenchResult:
    series = SERIES[size]
    peaks, walls = [], []
    for n in series:
        # Captions only: the clips' audio is never read, so 0.05 s clips keep the set small.
        dataset = synth_dataset(DatasetSpec(n, min(n * 4, 400), 0.05))
        exp = experiment(work / f"series_{n}.yaml", dataset, f"series_{n}")
        timed, stats = harness_run(exp, work / f"run_{n}")
        if stats["errors"] or stats["calls"] != n:
            raise RuntimeError(f"harness run of {n} items: {stats}")
        peaks.append(timed.max_rss_bytes)
        walls.append(round(timed.wall_s, 2))
    largest = series[-1]
    warm, warm_stats = harness_run(exp, work / "warm", cache=work / f"run_{largest}" / "cache")
    if warm_stats["cache_hits"] != largest:
        raise RuntimeError(f"the warm re-run asked the model: {warm_stats}")
    mib = [round(p / 2**20) for p in peaks]
    growth_kb = (peaks[-1] - peaks[0]) / (series[-1] - series[0]) / 1024
    return BenchResult(
        name="memory_series",
        summary=(
            f"random scorer, {', '.join(f'{n:,}' for n in series)} calls: peak RSS "
            f"{' / '.join(f'{m} MiB' for m in mib)} ({growth_kb:.2f} KiB per call); "
            f"warm re-run of {largest:,}: {warm.wall_s:.1f} s ({ratio(warm.wall_s, walls[-1])} "
            "of the cold run)"
        ),
        figures={
            "calls": list(series),
            "peak_rss_mib": mib,
            "process_wall_s": walls,
            "peak(largest)/peak(smallest)": ratio(peaks[-1], peaks[0]),
            "growth_kib_per_call": round(growth_kb, 3),
            "warm_rerun_wall_s": round(warm.wall_s, 2),
            "warm_rerun_peak_rss_mib": round(warm.max_rss_bytes / 2**20),
            "warm/cold": ratio(warm.wall_s, walls[-1]),
        },
        goal=f"peak RSS of {largest:,} calls < {GOAL_MIB} MiB" if size == "full" else "",
        met=mib[-1] < GOAL_MIB if size == "full" else None,
        tracked=("peak(largest)/peak(smallest)",),
    )
