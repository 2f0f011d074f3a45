"""A fixed CPU workload whose time says how fast this machine runs the harness's kind of work
(JSON text, dicts and strings, a numpy sort): printed with every results file, at the start
and at the end of the run, so that absolute figures measured on different machines, or on one
machine under different load, can be told apart from a change in the code. Lower is faster."""

from __future__ import annotations

import json
import time

import numpy as np

ROUNDS = 5


def _work() -> int:
    rng = np.random.default_rng(0)
    records = [
        {
            "item_id": f"q{i}",
            "candidates": [f"s{(i * 7 + k) % 997}" for k in range(8)],
            "scores": {f"s{k}": k / 10 for k in range(8)},
            "raw": "x" * 40,
        }
        for i in range(2_000)
    ]
    text = "\n".join(json.dumps(r, sort_keys=True) for r in records)
    parsed = [json.loads(line) for line in text.splitlines()]
    index = {r["item_id"]: r for r in parsed}
    joined = sum(len("|".join(index[f"q{i}"]["candidates"])) for i in range(2_000))
    order = np.argsort(rng.random(200_000), kind="stable")
    return joined + int(order[0])


def measure(rounds: int = ROUNDS) -> float:
    """The workload's best wall time in seconds over `rounds` runs."""
    best = float("inf")
    for _ in range(rounds):
        started = time.perf_counter()
        _work()
        best = min(best, time.perf_counter() - started)
    return best
