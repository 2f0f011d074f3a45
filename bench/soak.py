"""Soak: a pointwise run with 20% transient faults (429 + Retry-After, 500, 503, stalls past
the timeout, dropped connections) against a fault-free run of the same experiment; then 10%
malformed HTTP 200 answers (HTML, HTML labelled JSON, bodies that are not UTF-8, JSON of the
wrong shape, numbers and nesting past the parser's limits) through each SDK (openai and
google-genai), each against a fault-free run through the same SDK.

`python -m bench.soak --full` runs 1,200 items (4,800 calls per run); without `--full`, 120.
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
from harness.fake_api import FAULT_KINDS, MALFORMED_KINDS

SPECS: dict[Size, DatasetSpec] = {
    "full": THROUGHPUT["full"].spec,  # 1,200 items x 4 candidates, 4,800 distinct clips
    "tiny": DatasetSpec(120, 480, 0.5),
}
FAULT_RATE = 0.2
MALFORMED_RATE = 0.1
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


def gemini_provider(base: str, *, concurrency: int) -> dict[str, Any]:
    return {
        "name": "gemini",
        "base_url": base,
        "max_concurrency": concurrency,
        "max_attempts": 20,
    }


def _phase(
    base: str,
    work: Path,
    name: str,
    dataset: Path,
    provider: dict[str, Any],
    *,
    rate: float,
    faults: tuple[str, ...],
) -> dict[str, Any]:
    """One `harness run` against the fake server with `rate` of `faults`; what it did."""
    reset_server(base)
    _set(base, fault_rate=rate, faults=list(faults))
    experiment = write_experiment(
        work / f"{name}.yaml", name=name, dataset=dataset, provider={**provider, **RETRY}
    )
    timed, stats = harness_run(experiment, work, cache=work / f"cache-{name}")
    requests = _requests(base)
    faulted = Counter(
        r["outcome"].removeprefix("fault:") for r in requests if "fault:" in r["outcome"]
    )
    # an answer paid for: a 200 that was a proper answer (not a malformed one)
    paid = Counter(
        r["body_sha256"]
        for r in requests
        if r["status"] == 200 and r["outcome"].removeprefix("fault:") not in MALFORMED_KINDS
    )
    records = _records(work / "results", name)
    keys = Counter((r["item_id"], str(r["candidates"]), r.get("repeat", 0)) for r in records)
    return {
        "wall_s": timed.wall_s,
        "stats": stats,
        "requests": len(requests),
        "faults": dict(sorted(faulted.items())),
        "paid": sum(paid.values()),
        "paid_twice": sum(n - 1 for n in paid.values()),
        "records": records,
        "scored": sum(1 for r in records if "error" not in r and None not in r["scores"].values()),
        "duplicate_records": sum(n - 1 for n in keys.values()),
        "metrics": (work / "results" / name / "metrics.json").read_text(),
    }


def _compare(phase: dict[str, Any], clean: dict[str, Any], calls: int) -> dict[str, Any]:
    """The figures of a faulty phase against its fault-free twin."""
    return {
        "requests_at_server": phase["requests"],
        "faults_at_server": phase["faults"],
        "retries": phase["stats"]["retries"],
        "model_calls": phase["stats"]["model_calls"],
        "answers_paid": phase["paid"],
        "duplicate_paid_calls": phase["paid_twice"],
        "records": len(phase["records"]),
        "records_lost": calls - phase["scored"],
        "duplicate_records": phase["duplicate_records"],
        "errors": phase["stats"]["errors"],
        "same_answers_as_fault_free": _answers(phase["records"]) == _answers(clean["records"]),
        "metrics_equal_fault_free": phase["metrics"] == clean["metrics"],
        "wall_s": round(phase["wall_s"], 1),
        "fault_free_wall_s": round(clean["wall_s"], 1),
    }


def _held(figures: dict[str, Any]) -> bool:
    return bool(
        figures["records_lost"] == 0
        and figures["duplicate_records"] == 0
        and figures["duplicate_paid_calls"] == 0
        and figures["metrics_equal_fault_free"]
        and figures["same_answers_as_fault_free"]
    )


def run(size: Size, work: Path) -> BenchResult:
    spec = SPECS[size]
    dataset = synth_dataset(spec)
    calls = spec.n_items * spec.n_candidates
    extra = ["--retry-after", "0.2", "--slow", "10"]
    phases: dict[str, dict[str, Any]] = {}
    with fake_server(latency=LATENCY_S, extra=extra) as base:
        sdks = {
            "openai": openai_provider(base, concurrency=CONCURRENCY),
            "gemini": gemini_provider(base, concurrency=CONCURRENCY),
        }
        plan = [
            ("clean", "openai", 0.0, FAULT_KINDS),
            ("faulty", "openai", FAULT_RATE, FAULT_KINDS),
            ("malformed_openai", "openai", MALFORMED_RATE, MALFORMED_KINDS),
            ("clean_gemini", "gemini", 0.0, MALFORMED_KINDS),
            ("malformed_gemini", "gemini", MALFORMED_RATE, MALFORMED_KINDS),
        ]
        for name, sdk, rate, faults in plan:
            phases[name] = _phase(base, work, name, dataset, sdks[sdk], rate=rate, faults=faults)
    transient = _compare(phases["faulty"], phases["clean"], calls)
    malformed = {
        sdk: _compare(phases[f"malformed_{sdk}"], phases[clean], calls)
        for sdk, clean in (("openai", "clean"), ("gemini", "clean_gemini"))
    }
    figures = {
        "items": spec.n_items,
        "calls": calls,
        "fault_rate": FAULT_RATE,
        "concurrency": CONCURRENCY,
        "server_latency_s": LATENCY_S,
        **transient,
        "malformed_rate": MALFORMED_RATE,
        **{f"malformed_{sdk}": values for sdk, values in malformed.items()},
    }
    met = _held(transient) and all(_held(values) for values in malformed.values())
    malformed_line = "; ".join(
        f"{sdk}: {sum(v['faults_at_server'].values())} malformed 200s, {v['retries']} retries, "
        f"{v['records_lost']} lost, metrics {'equal' if v['metrics_equal_fault_free'] else 'DIFFER'}"
        for sdk, v in malformed.items()
    )
    summary = (
        f"{calls} calls, {sum(transient['faults_at_server'].values())} faults "
        f"({FAULT_RATE:.0%}), {transient['retries']} retries, "
        f"{transient['duplicate_paid_calls']} paid twice, {transient['records_lost']} records "
        f"lost, metrics {'equal' if transient['metrics_equal_fault_free'] else 'DIFFER'}, "
        f"{transient['wall_s']:.1f} s (fault-free {transient['fault_free_wall_s']:.1f} s); "
        f"{MALFORMED_RATE:.0%} malformed answers, {malformed_line}"
    )
    (work / "soak.json").write_text(json.dumps(figures, indent=2) + "\n")
    return BenchResult(
        "soak",
        summary,
        figures,
        goal="every candidate scored once, nothing paid twice, metrics equal the fault-free "
        "run, with transient faults and with malformed answers through both SDKs",
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
