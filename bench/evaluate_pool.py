"""(13) Pool evaluation end to end: `harness evaluate` of 10,000 items x 500 candidates
(single gold, scores on a 0.001 grid so ties happen, 1,000 bootstrap resamples; the
predictions file lists each item's candidates in their order, as `harness run` writes it)
against pytrec_eval (trec_eval's measures recip_rank, ndcg and success, tie-unaware, no CIs)
on the same two files, each a whole process reading the JSONL itself, alternated round by
round: wall time, CPU time (user + system) and peak memory (the larger of the kernel's peak
RSS and the sampled peak PSS of the process tree), min and median over the rounds."""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path
from typing import Any

import numpy as np

from bench.common import BenchResult, Size, Timed, checked, harness_command, ratio, run_timed

SHAPES: dict[Size, tuple[int, int, int, int]] = {  # items, candidates, resamples, rounds
    "full": (10_000, 500, 1000, 3),
    "tiny": (50, 20, 10, 1),
}
N_CLIPS = 20_000

PYTREC = """
import json, sys, pytrec_eval
qrels, run = {}, {}
with open(sys.argv[1] + "/items.jsonl") as f:
    for line in f:
        o = json.loads(line)
        qrels[o["id"]] = {c: 1 for c in o["relevant"]}
with open(sys.argv[2]) as f:
    for line in f:
        o = json.loads(line)
        run[o["item_id"]] = o["scores"]
evaluator = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank", "ndcg", "success"})
result = evaluator.evaluate(run)
print(sum(r["recip_rank"] for r in result.values()) / len(result))
"""


def write_pool(folder: Path, n_items: int, n_candidates: int) -> tuple[Path, Path]:
    """The dataset folder (title-only clips) and its predictions file, written once."""
    predictions = folder / "predictions.jsonl"
    manifest = folder / "manifest.json"
    wanted = json.dumps([n_items, n_candidates, N_CLIPS])
    if manifest.is_file() and manifest.read_text() == wanted:
        return folder, predictions
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    with (folder / "clips.jsonl").open("w") as out:
        for k in range(N_CLIPS):
            out.write(json.dumps({"id": f"s{k}", "title": f"Song {k}"}) + "\n")
    with (folder / "items.jsonl").open("w") as items, predictions.open("w") as preds:
        for i in range(n_items):
            candidates = [f"s{k}" for k in rng.choice(N_CLIPS, n_candidates, replace=False)]
            gold = candidates[int(rng.integers(n_candidates))]
            item = {"id": f"q{i}", "query": "q", "candidates": candidates, "relevant": [gold]}
            items.write(json.dumps(item) + "\n")
            scores = np.round(rng.random(n_candidates), 3).tolist()
            line = {"item_id": f"q{i}", "scores": dict(zip(candidates, scores, strict=True))}
            preds.write(json.dumps(line) + "\n")
    manifest.write_text(wanted)
    return folder, predictions


def _stats(runs: list[Timed]) -> dict[str, float]:
    walls, cpus = [t.wall_s for t in runs], [t.cpu_s for t in runs]
    rss = [t.max_rss_bytes / 2**20 for t in runs]
    memory = [t.peak_memory_bytes / 2**20 for t in runs]
    return {
        "wall_s_min": round(min(walls), 2),
        "wall_s_median": round(statistics.median(walls), 2),
        "cpu_s_min": round(min(cpus), 2),
        "cpu_s_median": round(statistics.median(cpus), 2),
        "peak_rss_mib_median": round(statistics.median(rss)),
        "peak_memory_mib_median": round(statistics.median(memory)),
    }


def run(size: Size, work: Path) -> BenchResult:
    n_items, n_candidates, n_bootstrap, rounds = SHAPES[size]
    dataset, predictions = write_pool(work.parent / f"evaluate_pool_{size}", n_items, n_candidates)
    ours = [
        *harness_command(),
        "evaluate",
        "--dataset",
        str(dataset),
        "--predictions",
        str(predictions),
        "--n-bootstrap",
        str(n_bootstrap),
        "--out",
        str(work / "metrics.json"),
    ]
    theirs = [sys.executable, "-c", PYTREC, str(dataset), str(predictions)]
    harness_runs, pytrec_runs = [], []
    for _ in range(rounds):
        harness_runs.append(checked(run_timed(ours, tree=True), "harness evaluate"))
        pytrec_runs.append(checked(run_timed(theirs, tree=True), "pytrec_eval"))
    h, p = _stats(harness_runs), _stats(pytrec_runs)
    figures: dict[str, Any] = {
        "shape": f"{n_items} items x {n_candidates} candidates, single gold",
        "bootstrap_resamples": n_bootstrap,
        "rounds": rounds,
        **{f"harness_{k}": v for k, v in h.items()},
        **{f"pytrec_eval_{k}": v for k, v in p.items()},
        "wall harness/pytrec_eval (medians)": ratio(h["wall_s_median"], p["wall_s_median"]),
        "cpu harness/pytrec_eval (medians)": ratio(h["cpu_s_median"], p["cpu_s_median"]),
        "rss harness/pytrec_eval": ratio(h["peak_rss_mib_median"], p["peak_rss_mib_median"]),
        "memory harness/pytrec_eval": ratio(
            h["peak_memory_mib_median"], p["peak_memory_mib_median"]
        ),
    }
    return BenchResult(
        name="evaluate_pool",
        summary=(
            f"harness evaluate {n_items:,} x {n_candidates}: {h['wall_s_median']:.2f} s, "
            f"CPU {h['cpu_s_median']:.2f} s, {h['peak_memory_mib_median']:.0f} MiB; pytrec_eval "
            f"{p['wall_s_median']:.2f} s, CPU {p['cpu_s_median']:.2f} s, "
            f"{p['peak_memory_mib_median']:.0f} MiB (wall ratio "
            f"{figures['wall harness/pytrec_eval (medians)']})"
        ),
        figures=figures,
        goal="wall time and peak memory at most pytrec_eval's, whole process (worker included)"
        if size == "full"
        else "",
        met=(
            h["wall_s_median"] <= p["wall_s_median"]
            and h["peak_memory_mib_median"] <= p["peak_memory_mib_median"]
            if size == "full"
            else None
        ),
    )
