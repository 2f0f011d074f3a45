"""Soak: a pointwise run with 20% transient faults (429 + Retry-After, 500, 503, stalls past
the timeout, dropped connections) against a fault-free run of the same experiment.

`python -m bench.soak --full` runs 1,200 items (4,800 calls); without `--full`, 120 items.
The figures: calls, requests and faults seen at the server, retries, answers paid twice,
records lost or duplicated, whether metrics.json equals the fault-free run's, and time.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path
from typing import Any

import httpx

from bench.common import (
    OUT,
    THROUGHPUT,
    BenchResult,
    DatasetSpec,
    Size,
    fake_server,
    fresh,
    harness_run,
    openai_provider,
    reset_server,
    synth_dataset,
    write_experiment,
)

SPECS: dict[Size, DatasetSpec] = {
    "full": THROUGHPUT["full"].spec,  # 1,200 items x 4 candidates, 4,800 distinct clips
    "tiny": DatasetSpec(120, 480, 0.5),
}
FAULT_RATE = 0.2
LATENCY_S = 0.1
CONCURRENCY = 64
# Fast enough to soak 4,800 calls, slow enough to be a real stall: a "timeout" fault holds
# the answer back 10 s; the harness gives up after 2 s and retries.
RETRY = {"timeout_s": 2.0, "retry_wait_s": 0.2, "retry_max_wait_s": 5.0}


def _requests(base: str) -> list[dict[str, Any]]:
    response = httpx.get(f"{base}/_requests", params={"limit": 1_000_000}, timeout=60.0)
    rows: list[dict[str, Any]] = response.json()
    return rows


def _set(base: str, **settings: Any) -> None:
    httpx.post(f"{base}/_settings", json=settings, timeout=10.0).raise_for_status()


def _records(results: Path, name: str) -> list[dict[str, Any]]:
    lines = (results / name / "records.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def _answers(records: list[dict[str, Any]]) -> list[tuple[str, str, str | None]]:
    return sorted((r["item_id"], str(r["candidates"]), r.get("raw")) for r in records)


def run(size: Size, work: Path) -> BenchResult:
    spec = SPECS[size]
    dataset = synth_dataset(spec)
    calls = spec.n_items * spec.n_candidates
    extra = ["--retry-after", "0.2", "--slow", "10"]
    with fake_server(latency=LATENCY_S, extra=extra) as base:
        provider = {**openai_provider(base, concurrency=CONCURRENCY), **RETRY}
        runs = {}
        for name, rate in (("clean", 0.0), ("faulty", FAULT_RATE)):
            reset_server(base)
            _set(base, fault_rate=rate)
            experiment = write_experiment(
                work / f"{name}.yaml", name=name, dataset=dataset, provider=provider
            )
            timed, stats = harness_run(experiment, work, cache=work / f"cache-{name}")
            runs[name] = (timed, stats)
        requests = _requests(base)

    timed, stats = runs["faulty"]
    faults = Counter(
        r["outcome"].removeprefix("fault:") for r in requests if "fault:" in r["outcome"]
    )
    paid = Counter(r["body_sha256"] for r in requests if r["status"] == 200)
    records = _records(work / "results", "faulty")
    keys = Counter((r["item_id"], str(r["candidates"]), r.get("repeat", 0)) for r in records)
    scored = sum(1 for r in records if "error" not in r and None not in r["scores"].values())
    metrics = {
        name: (work / "results" / name / "metrics.json").read_text() for name in ("clean", "faulty")
    }
    figures = {
        "items": spec.n_items,
        "calls": calls,
        "fault_rate": FAULT_RATE,
        "concurrency": CONCURRENCY,
        "server_latency_s": LATENCY_S,
        "requests_at_server": len(requests),
        "faults_at_server": dict(sorted(faults.items())),
        "retries": stats["retries"],
        "model_calls": stats["model_calls"],
        "answers_paid": sum(paid.values()),
        "duplicate_paid_calls": sum(n - 1 for n in paid.values()),
        "records": len(records),
        "records_lost": calls - scored,
        "duplicate_records": sum(n - 1 for n in keys.values()),
        "errors": stats["errors"],
        "same_answers_as_fault_free": _answers(records)
        == _answers(_records(work / "results", "clean")),
        "metrics_equal_fault_free": metrics["clean"] == metrics["faulty"],
        "wall_s": round(timed.wall_s, 1),
        "fault_free_wall_s": round(runs["clean"][0].wall_s, 1),
    }
    met = (
        figures["records_lost"] == 0
        and figures["duplicate_records"] == 0
        and figures["duplicate_paid_calls"] == 0
        and figures["metrics_equal_fault_free"]
        and figures["same_answers_as_fault_free"]
    )
    summary = (
        f"{calls} calls, {sum(faults.values())} faults ({FAULT_RATE:.0%}), {stats['retries']} "
        f"retries, {figures['duplicate_paid_calls']} paid twice, {figures['records_lost']} "
        f"records lost, metrics {'equal' if figures['metrics_equal_fault_free'] else 'DIFFER'}, "
        f"{timed.wall_s:.1f} s (fault-free {runs['clean'][0].wall_s:.1f} s)"
    )
    (work / "soak.json").write_text(json.dumps(figures, indent=2) + "\n")
    return BenchResult(
        "soak",
        summary,
        figures,
        goal="every candidate scored once, nothing paid twice, metrics equal the fault-free run",
        met=met,
    )


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.soak", description=__doc__)
    parser.add_argument("--full", action="store_true", help="1,200 items (4,800 calls)")
    args = parser.parse_args()
    size: Size = "full" if args.full else "tiny"
    result = run(size, fresh(OUT / f"soak_{size}"))
    print(result.line())
    print(json.dumps(result.figures, indent=2))
    raise SystemExit(0 if result.met else 1)


if __name__ == "__main__":
    main()
