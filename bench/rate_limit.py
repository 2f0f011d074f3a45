"""(2) Rate-limited throughput: the fake server keeps a requests and a tokens limit per window
(OpenAI's buckets, with their x-ratelimit-* headers) and answers 429 with Retry-After beyond
them; the tokens limit binds (at TOKEN_SHARE of the requests limit). Side by side, three
rounds (one at the tiny size): the harness with `rpm` set to the binding rate (today's way,
the user must know it) and the harness with no `rpm` (paced by the headers and 429s). The
achieved rate is read at the server (its answered count, polled), from the first answer to
the last, so start-up and the last call's latency do not dilute it."""

from __future__ import annotations

import json
import statistics
import threading
import time
from pathlib import Path

import httpx

from bench.common import (
    CLIP_SECONDS,
    BenchResult,
    DatasetSpec,
    Size,
    fake_server,
    harness_run,
    openai_provider,
    ratio,
    reset_server,
    server_stats,
    synth_dataset,
    write_experiment,
)

GOAL_RATE, GOAL_429 = 0.90, 0.02
TOKEN_SHARE = 0.6  # the tokens limit allows this share of the requests limit
# (dataset, requests per window, window s, latency s, concurrency): a window of 6 s with
# 120 requests is 1,200 rpm, the run long enough (many windows) for the limits to bind.
SETTINGS = {
    "full": (DatasetSpec(180, 720, CLIP_SECONDS), 120.0, 6.0, 0.2, 64),
    "tiny": (DatasetSpec(12, 48, 0.2), 20.0, 1.0, 0.01, 8),
}


class AnsweredPoller(threading.Thread):
    """Samples the server's answered count; the times of the first and the last answer."""

    def __init__(self, base: str, total: int, interval: float = 0.05) -> None:
        super().__init__(daemon=True)
        self.base, self.total, self.interval = base, total, interval
        self.first: float | None = None
        self.last: float | None = None
        self.stop = threading.Event()

    def run(self) -> None:
        with httpx.Client(timeout=5.0) as client:
            while not self.stop.is_set():
                answered = client.get(f"{self.base}/_stats").json()["answered"]
                now = time.perf_counter()
                if answered and self.first is None:
                    self.first = now
                if answered >= self.total:
                    self.last = now
                    return
                time.sleep(self.interval)


def _one_run(
    base: str, work: Path, dataset: Path, calls: int, concurrency: int, rpm: float | None
) -> tuple[float, int, dict[str, object]]:
    """Achieved requests per window-minute, 429s, run.json of one fresh run."""
    reset_server(base)
    name = f"rate_{'fixed' if rpm else 'adaptive'}_{time.monotonic_ns()}"  # a fresh run
    experiment = write_experiment(
        work / f"{name}.yaml",
        name=name,
        dataset=dataset,
        provider=openai_provider(base, concurrency=concurrency, rpm=rpm),
    )
    poller = AnsweredPoller(base, calls)
    poller.start()
    try:
        _, stats = harness_run(experiment, work, cache=work / f"cache-{name}")
    finally:
        poller.stop.set()
        poller.join()
    seen = server_stats(base)
    if stats["errors"] or seen["answered"] != calls or poller.first is None or poller.last is None:
        raise RuntimeError(f"harness run: {stats}, server: {seen}")
    per_s = (calls - 1) / (poller.last - poller.first)
    return per_s, seen.get("status", {}).get("429", 0), stats


def run(size: Size, work: Path) -> BenchResult:
    spec, requests, window, latency, concurrency = SETTINGS[size]
    rounds = 3 if size == "full" else 1
    calls = spec.n_items * spec.n_candidates
    dataset = synth_dataset(spec)
    with fake_server(latency=latency, extra=["--rpm-window", str(window)]) as base:
        # the tokens of a call, as the server counts them: one unlimited run of one item
        probe = _one_run(base, work, dataset, calls, concurrency, None)[2]
        tokens = float(probe["input_tokens"]) / float(probe["model_calls"])  # type: ignore[arg-type]
        tpm = requests * TOKEN_SHARE * tokens
        binding = min(requests, tpm / tokens) / window  # calls per second
        settings = {"rpm": requests, "tpm": tpm, "rpm_window_s": window}
        httpx.post(f"{base}/_settings", json=settings, timeout=10).raise_for_status()
        rows: dict[str, list[tuple[float, int]]] = {"fixed": [], "adaptive": []}
        for _ in range(rounds):  # alternately, so that load on the machine hits both
            fixed_rpm = binding * 60  # the harness's rpm counts real minutes
            rows["fixed"].append(_one_run(base, work, dataset, calls, concurrency, fixed_rpm)[:2])
            rows["adaptive"].append(_one_run(base, work, dataset, calls, concurrency, None)[:2])
    figures: dict[str, object] = {
        "calls": calls,
        "server limits per window": f"{requests:g} requests, {tpm:.0f} tokens, {window:g} s",
        "tokens per call": round(tokens, 1),
        "binding rate (calls/s)": round(binding, 3),
    }
    shares = {}
    for mode, found in rows.items():
        rates = [ratio(per_s, binding) for per_s, _ in found]
        refused = [ratio(n, calls) for _, n in found]
        shares[mode] = (statistics.median(rates), max(refused))
        figures[f"{mode}: achieved/binding ({rounds} runs)"] = json.dumps(rates)
        figures[f"{mode}: 429s/calls ({rounds} runs)"] = json.dumps(refused)
    rate, refused_share = shares["adaptive"]
    return BenchResult(
        name="rate_limit",
        summary=(
            f"{calls} calls, tokens binding at {binding:.2f} calls/s: no rpm set "
            f"{rate:.3f} of it ({refused_share:.3f} of calls 429), rpm set to it "
            f"{shares['fixed'][0]:.3f} ({shares['fixed'][1]:.3f} 429)"
        ),
        figures=figures,
        goal=f"no rpm: achieved/binding >= {GOAL_RATE}, 429s <= {GOAL_429} of calls",
        met=rate >= GOAL_RATE and refused_share <= GOAL_429,
    )
