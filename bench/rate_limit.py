"""(2) Rate-limited throughput: the fake server allows `rpm` requests in any 60 s window and
answers 429 with Retry-After beyond it; the harness's own rpm limit is set to the same value.
The achieved rate is read at the server (its answered count, polled), from the first answer
to the last, so start-up and the last call's latency do not dilute it."""

from __future__ import annotations

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
    server_stats,
    synth_dataset,
    write_experiment,
)

GOAL = 0.95
# The server's window is 60 s, so the run must last well over a minute for the limit to bind.
SETTINGS = {
    "full": (DatasetSpec(360, 1440, CLIP_SECONDS), 1200.0, 0.2, 64),
    "tiny": (DatasetSpec(4, 16, 0.2), 600.0, 0.01, 4),
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


def run(size: Size, work: Path) -> BenchResult:
    spec, rpm, latency, concurrency = SETTINGS[size]
    calls = spec.n_items * spec.n_candidates
    dataset = synth_dataset(spec)
    with fake_server(latency=latency, rpm=rpm) as base:
        experiment = write_experiment(
            work / "rate_limit.yaml",
            name="rate_limit",
            dataset=dataset,
            provider=openai_provider(base, concurrency=concurrency, rpm=rpm),
        )
        poller = AnsweredPoller(base, calls)
        poller.start()
        try:
            timed, stats = harness_run(experiment, work)
        finally:
            poller.stop.set()
            poller.join()
        seen = server_stats(base)
    if stats["errors"] or seen["answered"] != calls or poller.first is None or poller.last is None:
        raise RuntimeError(f"harness run: {stats}, server: {seen}")
    achieved = (calls - 1) / (poller.last - poller.first) * 60
    rejected = seen.get("status", {}).get("429", 0)
    share = ratio(achieved, rpm)
    return BenchResult(
        name="rate_limit",
        summary=(
            f"{calls} calls, server limit {rpm:g} rpm, harness rpm {rpm:g}: achieved "
            f"{achieved:.0f} rpm ({share:.3f} of the limit), {rejected} x 429"
        ),
        figures={
            "calls": calls,
            "limit_rpm": rpm,
            "achieved_rpm (server, first to last answer)": round(achieved, 1),
            "achieved/limit": share,
            "429s received": rejected,
            "harness retries (run.json)": stats["retries"],
            "harness_process_wall_s": round(timed.wall_s, 2),
            "harness_run_wall_s (run.json)": stats["wall_s"],
        },
        goal=f"achieved/limit >= {GOAL}",
        met=share >= GOAL,
    )
