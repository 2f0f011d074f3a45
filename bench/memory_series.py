"""(5b) Memory flat in the number of calls: the seeded `random` scorer (no model, no
server: what is left is the harness) over 1k, 10k and 100k items of 4 candidates, one call
per item, each `harness run` a whole process (peak RSS from wait4); the largest three times
(min and median), then once more on its warm cache (every answer cached). The smallest run
is the reference: the growth per call is (peak(largest) - peak(smallest)) / (calls(largest)
- calls(smallest)). `python -m bench memory_million` runs the same at 1,000,000 calls, once."""

from __future__ import annotations

import statistics
from pathlib import Path

import yaml

from bench.common import BenchResult, DatasetSpec, Size, harness_run, ratio, synth_dataset

GOAL_MIB = 300  # the 100k-call run's peak
SERIES = {"full": (1_000, 10_000, 100_000), "tiny": (20, 200), "million": (1_000, 1_000_000)}


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
    return measure(SERIES[size], 3 if size == "full" else 1, work, "memory_series", size == "full")


def measure(
    series: tuple[int, ...], rounds: int, work: Path, name: str, with_goal: bool
) -> BenchResult:
    peaks: list[list[int]] = []
    walls: list[list[float]] = []
    for n in series:
        # Captions only: the clips' audio is never read, so 0.05 s clips keep the set small.
        dataset = synth_dataset(DatasetSpec(n, min(n * 4, 400), 0.05))
        exp = experiment(work / f"series_{n}.yaml", dataset, f"series_{n}")
        peaks.append([])
        walls.append([])
        for index in range(rounds if n == series[-1] else 1):
            timed, stats = harness_run(exp, work / f"run_{n}_{index}")
            if stats["errors"] or stats["calls"] != n:
                raise RuntimeError(f"harness run of {n} items: {stats}")
            peaks[-1].append(timed.max_rss_bytes)
            walls[-1].append(round(timed.wall_s, 2))
    largest = series[-1]
    warm, warm_stats = harness_run(exp, work / "warm", cache=work / f"run_{largest}_0" / "cache")
    if warm_stats["cache_hits"] != largest:
        raise RuntimeError(f"the warm re-run asked the model: {warm_stats}")
    mib = [round(min(p) / 2**20) for p in peaks]
    largest_mib = [round(p / 2**20) for p in peaks[-1]]
    growth_kb = (min(peaks[-1]) - min(peaks[0])) / (series[-1] - series[0]) / 1024
    return BenchResult(
        name=name,
        summary=(
            f"random scorer, {', '.join(f'{n:,}' for n in series)} calls: peak RSS "
            f"{' / '.join(f'{m} MiB' for m in mib)} ({growth_kb:.2f} KiB per call); "
            f"warm re-run of {largest:,}: {warm.wall_s:.1f} s "
            f"({ratio(warm.wall_s, min(walls[-1]))} of the cold run)"
        ),
        figures={
            "calls": list(series),
            "peak_rss_mib (min per size)": mib,
            f"peak_rss_mib of {largest:,} (each run)": largest_mib,
            f"peak_rss_mib of {largest:,} (median)": round(statistics.median(largest_mib)),
            "process_wall_s (each run)": walls,
            "peak(largest)/peak(smallest)": ratio(min(peaks[-1]), min(peaks[0])),
            "growth_kib_per_call": round(growth_kb, 3),
            "warm_rerun_wall_s": round(warm.wall_s, 2),
            "warm_rerun_peak_rss_mib": round(warm.max_rss_bytes / 2**20),
            "warm/cold": ratio(warm.wall_s, min(walls[-1])),
        },
        goal=f"peak RSS of {largest:,} calls < {GOAL_MIB} MiB" if with_goal else "",
        met=mib[-1] < GOAL_MIB if with_goal else None,
        tracked=("peak(largest)/peak(smallest)",),
    )
