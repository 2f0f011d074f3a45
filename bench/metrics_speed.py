"""(4) Metrics speed: 1,200 items x 4 candidates, the four metrics with 1,000 bootstrap
resamples (from a predictions mapping, as `harness evaluate` does), and the agreement
matrix of 10 runs (`harness.stats.agreement_matrix`, as the report uses). In-process,
median of several repetitions."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from bench.common import BenchResult, Size
from harness.dataset import Item, Turn
from harness.metrics import aggregate, build_matrix
from harness.stats import agreement_matrix

GOAL_S = 1.0


def synthetic_items(n_items: int, n_candidates: int = 4, seed: int = 0) -> list[Item]:
    rng = np.random.default_rng(seed)
    items = []
    for i in range(n_items):
        candidates = tuple(f"c{i}_{j}" for j in range(n_candidates))
        ranking = tuple(candidates[j] for j in rng.permutation(n_candidates))
        items.append(
            Item(
                id=f"d{i:05d}",
                dialogue=(Turn(speaker="A", text="hello"),),
                candidates=candidates,
                human_ranking=ranking,
            )
        )
    return items


def synthetic_runs(
    items: list[Item], n_runs: int, seed: int = 1
) -> list[dict[str, dict[str, float | None]]]:
    """Scores on a 0.5 grid (so ties happen) with about 1% missing, per run."""
    rng = np.random.default_rng(seed)
    runs = []
    for _ in range(n_runs):
        run: dict[str, dict[str, float | None]] = {}
        for item in items:
            values = np.round(rng.uniform(0, 10, len(item.candidates)) * 2) / 2
            run[item.id] = {
                cid: None if rng.random() < 0.01 else float(v)
                for cid, v in zip(item.candidates, values, strict=True)
            }
        runs.append(run)
    return runs


def _median_time(function: Callable[[], object], repetitions: int) -> float:
    times = []
    for _ in range(repetitions):
        started = time.perf_counter()
        function()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def run(size: Size, work: Path) -> BenchResult:
    n_items, n_runs, n_bootstrap, repetitions = (
        (1200, 10, 1000, 7) if size == "full" else (40, 3, 50, 1)
    )
    items = synthetic_items(n_items)
    runs = synthetic_runs(items, n_runs)

    def metrics() -> None:
        aggregate([build_matrix(items, runs[0])], n_bootstrap=n_bootstrap, seed=0)

    def agreement() -> None:
        vectors = []
        for index, run in enumerate(runs):
            matrix = build_matrix(items, run)
            vectors.append((f"run{index}", dict(zip(matrix.item_ids, matrix.scores, strict=True))))
        agreement_matrix(vectors)

    metrics_s = _median_time(metrics, repetitions)
    agreement_s = _median_time(agreement, repetitions)
    total = metrics_s + agreement_s
    return BenchResult(
        name="metrics",
        summary=(
            f"{n_items} items, 4 metrics, {n_bootstrap} bootstrap resamples: {metrics_s * 1000:.0f} ms; "
            f"{n_runs}-run agreement matrix: {agreement_s * 1000:.0f} ms"
        ),
        figures={
            "items": n_items,
            "bootstrap_resamples": n_bootstrap,
            "runs_in_agreement_matrix": n_runs,
            "metrics_s": round(metrics_s, 4),
            "agreement_s": round(agreement_s, 4),
            "total_s": round(total, 4),
            "repetitions (median taken)": repetitions,
        },
        goal=f"metrics + agreement < {GOAL_S:g} s",
        met=total < GOAL_S,
    )
