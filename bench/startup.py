"""(11) Start-up: `harness --help`, `harness run --help` and a whole 1-item run of the random
scorer on the bundled sample (no model: what is left is start-up, imports included), each
five times as a whole process; the reference is the bare interpreter (`python -c pass`)."""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

import yaml

from bench.common import REPO, BenchResult, Size, checked, harness_command, ratio, run_timed

GOAL_S = 0.5  # `harness --help` and `harness run --help`, whole process


def one_item_run(work: Path) -> list[str]:
    experiment = work / "one.yaml"
    config = {
        "name": "one",
        "dataset": str(REPO / "data" / "sample"),
        "provider": {"name": "random", "model": "uniform", "seed": 0},
        "inputs": {"dialogue": "full", "music": "caption"},
        "n_bootstrap": 100,
        "limit": 1,
    }
    experiment.write_text(yaml.safe_dump(config, sort_keys=False))
    return [
        *harness_command(),
        "run",
        str(experiment),
        "--results-dir",
        str(work / "results"),
        "--cache-dir",
        str(work / "cache"),
        "--no-progress",
        "--overwrite",
    ]


def run(size: Size, work: Path) -> BenchResult:
    rounds = 5 if size == "full" else 1
    commands = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "harness --help": [*harness_command(), "--help"],
        "harness run --help": [*harness_command(), "run", "--help"],
        "harness run (1 item, random scorer)": one_item_run(work),
    }
    walls: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(rounds):  # interleaved, so that a burst of load hits every command alike
        for name, command in commands.items():
            walls[name].append(round(checked(run_timed(command), name).wall_s, 3))
    best = {name: min(values) for name, values in walls.items()}
    slowest_help = max(best["harness --help"], best["harness run --help"])
    figures: dict[str, object] = {
        f"{name}: wall_s (each)": values for name, values in walls.items()
    }
    figures |= {f"{name}: median_s": statistics.median(v) for name, v in walls.items()}
    figures["harness --help / python -c pass (min)"] = ratio(
        best["harness --help"], best["python -c pass"]
    )
    # Tracked by the medians: the bare interpreter's 30-60 ms minimum moves by a third
    # between runs of this benchmark, and with it a ratio of minima.
    figures["harness --help / python -c pass (median)"] = ratio(
        statistics.median(walls["harness --help"]), statistics.median(walls["python -c pass"])
    )
    return BenchResult(
        name="startup",
        summary=(
            f"harness --help {best['harness --help']:.2f} s, harness run --help "
            f"{best['harness run --help']:.2f} s, a 1-item run "
            f"{best['harness run (1 item, random scorer)']:.2f} s (bare interpreter "
            f"{best['python -c pass']:.2f} s; min of {rounds})"
        ),
        figures=figures,
        goal=f"--help < {GOAL_S:g} s" if size == "full" else "",
        met=slowest_help < GOAL_S if size == "full" else None,
        tracked=("harness --help / python -c pass (median)",),
    )
