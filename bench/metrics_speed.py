"""(4) Metrics speed, in-process, median of several repetitions, from a predictions mapping
(as `harness evaluate` does: `build_matrix` + `aggregate`, 1,000 bootstrap resamples):

- DialBGM: 1,200 items x 4 candidates (scores on a 0.5 grid, so ties; 1% missing), the four
  metrics, and the agreement matrix of 10 runs (`harness.scoring.stats.agreement_matrix`).
- MusiCRS-like: 477 items x 100 candidates, 0 to 10 relevant each, hit/recall/precision/nDCG
  at 1, 5, 10, 20 besides the four.
- Large: 10,000 items x 500 candidates, single gold, 1% missing, cut-offs 1, 10, 100, in a
  child process for its peak RSS.
- References: ranx and pytrec_eval (trec_eval) computing recall@K, P@K, nDCG@K and MRR on
  the same tie-free MusiCRS-like run, as ratios to this harness (which also computes hit@K,
  tau-b and the bootstrap). ranx is skipped at the tiny size (its first import compiles).
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from bench.common import REPO, BenchResult, Size
from harness.core.dataset import Item, Turn
from harness.scoring.metrics import aggregate, build_matrix
from harness.scoring.stats import agreement_matrix

Predictions = dict[str, dict[str, float | None]]
GOAL_DIALBGM_S, GOAL_MUSICRS_S, GOAL_LARGE_S, GOAL_LARGE_RSS_MIB = 1.0, 0.5, 3.0, 1024
CUTOFFS = (1, 5, 10, 20)
LARGE_CUTOFFS = (1, 10, 100)
TURN = (Turn(speaker="A", text="hello"),)


def synthetic_items(n_items: int, n_candidates: int = 4, seed: int = 0) -> list[Item]:
    rng = np.random.default_rng(seed)
    items = []
    for i in range(n_items):
        candidates = tuple(f"c{i}_{j}" for j in range(n_candidates))
        ranking = tuple(candidates[j] for j in rng.permutation(n_candidates))
        items.append(
            Item(id=f"d{i:05d}", dialogue=TURN, candidates=candidates, human_ranking=ranking)
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


def retrieval_case(
    n_items: int, n_candidates: int, *, max_gold: int, missing: float, seed: int = 0
) -> tuple[list[Item], Predictions]:
    """Items whose candidates come from a shared catalogue, `relevant` lists of 1..max_gold
    ids (0..max_gold when max_gold > 1), and continuous scores (no ties but missing ones)."""
    rng = np.random.default_rng(seed)
    catalogue = [f"t{k:06d}" for k in range(max(4 * n_candidates, 20000))]
    items, predictions = [], {}
    for i in range(n_items):
        picked = rng.choice(len(catalogue), n_candidates, replace=False)
        candidates = tuple(catalogue[k] for k in picked)
        n_gold = 1 if max_gold == 1 else int(rng.integers(0, max_gold + 1))
        gold = tuple(candidates[j] for j in rng.choice(n_candidates, n_gold, replace=False))
        item_id = f"q{i:05d}"
        items.append(
            Item(id=item_id, query="music for a rainy night", candidates=candidates, relevant=gold)
        )
        scores = rng.normal(size=n_candidates) + np.isin(candidates, gold)
        predictions[item_id] = {
            cid: None if rng.random() < missing else float(s)
            for cid, s in zip(candidates, scores, strict=True)
        }
    return items, predictions


def _median_time(function: Callable[[], object], repetitions: int) -> float:
    times = []
    for _ in range(repetitions):
        started = time.perf_counter()
        function()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


# ------------------------------------------------------------------------ references
def _reference_inputs(
    items: list[Item], predictions: Predictions
) -> tuple[dict[str, dict[str, int]], dict[str, dict[str, float]]]:
    qrels = {item.id: {cid: int(g) for cid, g in item.relevance.items()} for item in items}
    run = {
        q: {c: float(s) for c, s in scores.items() if s is not None}
        for q, scores in predictions.items()
    }
    return qrels, run


def _time_pytrec_eval(items: list[Item], predictions: Predictions, repetitions: int) -> float:
    import pytrec_eval

    measures = {"recip_rank", "P", "recall", "ndcg_cut"}

    def evaluate() -> None:
        qrels, run = _reference_inputs(items, predictions)
        pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(run)

    return _median_time(evaluate, repetitions)


def _time_ranx(items: list[Item], predictions: Predictions, repetitions: int) -> float:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from ranx import Qrels, Run, evaluate  # type: ignore[import-untyped]

        names = ["mrr", *(f"{m}@{k}" for m in ("recall", "precision", "ndcg") for k in CUTOFFS)]

        def once() -> None:
            qrels, run = _reference_inputs(items, predictions)
            evaluate(Qrels(qrels), Run(run), names)

        once()  # compiles ranx's numba kernels (cached on disk after the first run)
        return _median_time(once, repetitions)


# ------------------------------------------------------------------------ the large case
def large_child(
    n_items: int, n_candidates: int, n_bootstrap: int, repetitions: int
) -> dict[str, float]:
    """Runs in a fresh process: the inputs, then the timed metrics (median of `repetitions`
    wall times, and the CPU time of that run), and the peak RSS."""
    import resource

    def rss_mib() -> float:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    items, predictions = retrieval_case(n_items, n_candidates, max_gold=1, missing=0.01)
    inputs_mib = rss_mib()
    runs = []
    for _ in range(repetitions):
        wall, cpu = time.perf_counter(), time.process_time()
        matrix = build_matrix(items, predictions)
        aggregate([matrix], n_bootstrap=n_bootstrap, seed=0, at=LARGE_CUTOFFS)
        runs.append((time.perf_counter() - wall, time.process_time() - cpu))
        del matrix
    wall_s, cpu_s = sorted(runs)[len(runs) // 2]
    return {
        "wall_s": wall_s,
        "cpu_s": cpu_s,
        "rss_after_inputs_mib": inputs_mib,
        "peak_rss_mib": rss_mib(),
    }


def _run_large(
    n_items: int, n_candidates: int, n_bootstrap: int, repetitions: int
) -> dict[str, float]:
    arguments = f"{n_items}, {n_candidates}, {n_bootstrap}, {repetitions}"
    code = (
        "import json; from bench.metrics_speed import large_child; "
        f"print(json.dumps(large_child({arguments})))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True
    )
    result: dict[str, float] = json.loads(done.stdout.splitlines()[-1])
    return result


# ------------------------------------------------------------------------ the benchmark
def run(size: Size, work: Path) -> BenchResult:
    full = size == "full"
    n_items, n_runs, n_bootstrap, repetitions = (1200, 10, 1000, 7) if full else (40, 3, 50, 1)
    items = synthetic_items(n_items)
    runs = synthetic_runs(items, n_runs)

    def dialbgm() -> None:
        aggregate([build_matrix(items, runs[0])], n_bootstrap=n_bootstrap, seed=0)

    def agreement() -> None:
        vectors = []
        for index, run in enumerate(runs):
            matrix = build_matrix(items, run)
            vectors.append((f"run{index}", dict(zip(matrix.item_ids, matrix.scores, strict=True))))
        agreement_matrix(vectors)

    dialbgm_s = _median_time(dialbgm, repetitions)
    agreement_s = _median_time(agreement, repetitions)

    shape = (477, 100) if full else (20, 30)
    musicrs_items, musicrs_run = retrieval_case(*shape, max_gold=10, missing=0.0, seed=2)

    def musicrs() -> None:
        matrix = build_matrix(musicrs_items, musicrs_run)
        aggregate([matrix], n_bootstrap=n_bootstrap, seed=0, at=CUTOFFS)

    musicrs_s = _median_time(musicrs, repetitions)
    pytrec_s = _time_pytrec_eval(musicrs_items, musicrs_run, repetitions)
    ranx_s = _time_ranx(musicrs_items, musicrs_run, repetitions) if full else None

    large_shape = (10_000, 500) if full else (50, 20)
    large = _run_large(*large_shape, n_bootstrap, 3 if full else 1)

    figures: dict[str, Any] = {
        "dialbgm_items": n_items,
        "bootstrap_resamples": n_bootstrap,
        "dialbgm_metrics_s": round(dialbgm_s, 4),
        "runs_in_agreement_matrix": n_runs,
        "agreement_s": round(agreement_s, 4),
        "musicrs_shape": f"{shape[0]} items x {shape[1]} candidates, 0-10 gold",
        "musicrs_cutoffs": list(CUTOFFS),
        "musicrs_s": round(musicrs_s, 4),
        "pytrec_eval_s": round(pytrec_s, 4),
        "pytrec_eval/harness": round(pytrec_s / musicrs_s, 2),
        "large_shape": f"{large_shape[0]} items x {large_shape[1]} candidates, single gold",
        "large_cutoffs": list(LARGE_CUTOFFS),
        "large_s": round(large["wall_s"], 3),
        "large_cpu_s": round(large["cpu_s"], 3),
        "large_rss_after_inputs_mib": round(large["rss_after_inputs_mib"]),
        "large_peak_rss_mib": round(large["peak_rss_mib"]),
        "repetitions (median taken)": repetitions,
    }
    if ranx_s is not None:
        figures["ranx_s"] = round(ranx_s, 4)
        figures["ranx/harness"] = round(ranx_s / musicrs_s, 2)
    met = (
        dialbgm_s + agreement_s < GOAL_DIALBGM_S
        and musicrs_s < GOAL_MUSICRS_S
        and large["wall_s"] < GOAL_LARGE_S
        and large["peak_rss_mib"] < GOAL_LARGE_RSS_MIB
    )
    ranx_text = f", ranx {ranx_s / musicrs_s:.2f}x" if ranx_s is not None else ""
    return BenchResult(
        name="metrics",
        summary=(
            f"DialBGM {n_items} items: {dialbgm_s * 1000:.0f} ms + {n_runs}-run agreement "
            f"{agreement_s * 1000:.0f} ms; {shape[0]}x{shape[1]} several gold: "
            f"{musicrs_s * 1000:.0f} ms (pytrec_eval {pytrec_s / musicrs_s:.2f}x{ranx_text}); "
            f"{large_shape[0]}x{large_shape[1]}: {large['wall_s']:.2f} s, "
            f"peak RSS {large['peak_rss_mib']:.0f} MiB"
        ),
        figures=figures,
        goal=(
            f"DialBGM + agreement < {GOAL_DIALBGM_S:g} s; 477x100 < {GOAL_MUSICRS_S:g} s; "
            f"10000x500 < {GOAL_LARGE_S:g} s and < {GOAL_LARGE_RSS_MIB} MiB"
        ),
        met=met,
    )
