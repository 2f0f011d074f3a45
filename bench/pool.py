"""(10) A pool of model servers behind one run (a list of `base_url`s, as for several vLLM
servers): 1, 2, 4 and 8 fake servers, each handling at most C requests at once with a fixed
latency L (a vLLM server's `max_num_seqs`), the run's concurrency set to servers x C; the
throughput of each against the ideal servers x C / L, and the coordinator's own ceiling (one
server, no latency, no cap). Then a server killed mid-run (connection refused) and started
again on its port: every call answered, none answered twice; and a server 4x slower than the
others: its share of the requests. Every server is its own process; each run is
`harness run` as a whole process, its throughput the calls over the run's own wall time
(run.json)."""

from __future__ import annotations

import collections
import dataclasses
import math
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import yaml

from bench import common
from bench.common import (
    REPO,
    BenchResult,
    DatasetSpec,
    Size,
    free_port,
    harness_run,
    server_stats,
    synth_dataset,
)

GOAL = 0.9  # throughput / ideal for every pool size
# The largest pool asks at most this share of the coordinator's measured ceiling: on a slow or
# loaded machine the servers' latency grows until it does (the figures say which was used).
HEADROOM = 0.25


@dataclass(frozen=True)
class PoolSize:
    latency_s: float
    per_server: int  # C: requests one server handles at once
    waves: int  # calls per run = servers x C x waves, so ideal time = waves x latency
    counts: tuple[int, ...]
    ceiling_calls: int
    chaos_calls: int
    chaos_latency_s: float


SIZES: dict[Size, PoolSize] = {
    "full": PoolSize(1.0, 4, 6, (1, 2, 4, 8), 600, 320, 0.25),
    "tiny": PoolSize(0.2, 2, 4, (1, 2), 80, 48, 0.05),  # calls: multiples of 4
}


class ServerProcess:
    """One fake server process on a fixed port, which can be killed and started again."""

    def __init__(self, latency_s: float, per_server: int | None, name: str) -> None:
        self.port = free_port()
        self.latency_s, self.per_server, self.name = latency_s, per_server, name
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        command = [
            sys.executable,
            "-m",
            "harness.fake_api",
            "--port",
            str(self.port),
            "--latency",
            str(self.latency_s),
            *(["--max-concurrency", str(self.per_server)] if self.per_server else []),
        ]
        common.OUT.mkdir(parents=True, exist_ok=True)
        with (common.OUT / f"pool_{self.name}.log").open("a") as log:
            self.process = subprocess.Popen(command, cwd=REPO, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"fake server {self.name} exited; see its log in {common.OUT}")
            try:
                httpx.get(f"{self.base}/_stats", timeout=1.0).raise_for_status()
                return
            except httpx.HTTPError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"fake server {self.name} did not start") from None
                time.sleep(0.05)

    def kill(self) -> None:
        """SIGKILL: its connections are reset, new ones refused until it starts again."""
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            self.process = None

    def requests(self) -> list[dict[str, Any]]:
        reply = httpx.get(f"{self.base}/_requests", params={"limit": 100_000}, timeout=30.0)
        entries: list[dict[str, Any]] = reply.json()
        return entries


@contextmanager
def servers(latencies: Sequence[float], per_server: int | None) -> Iterator[list[ServerProcess]]:
    pool = [ServerProcess(lat, per_server, f"s{i}") for i, lat in enumerate(latencies)]
    try:
        for server in pool:
            server.start()
        yield pool
    finally:
        for server in pool:
            server.kill()


def experiment(path: Path, dataset: Path, pool: Sequence[ServerProcess], concurrency: int) -> Path:
    config = {
        "name": path.stem,
        "dataset": str(dataset),
        "provider": {
            "name": "openai-compatible",
            "model": "bench-model",
            "base_url": [f"{s.base}/v1" for s in pool],
            "max_concurrency": concurrency,
            "max_attempts": 20,
            "retry_wait_s": 0.05,
            "retry_max_wait_s": 0.5,
        },
        "inputs": {"dialogue": "full", "music": "audio"},
        "n_bootstrap": 10,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def dataset_for(calls: int) -> Path:
    items = max(1, calls // 4)
    return synth_dataset(DatasetSpec(items, min(4 * items, 4000), 0.2))


@dataclass(frozen=True)
class Served:
    per_server: list[int]  # answers per server
    twice: int  # request bodies answered more than once over the pool
    span_s: float  # first arrival to last answer, over the pool

    @property
    def rate(self) -> float:
        """Answers per second while the pool was serving (the harness's start-up, dataset
        loading and metrics are outside the span)."""
        return sum(self.per_server) / self.span_s


def served(pool: Sequence[ServerProcess]) -> Served:
    per_server, bodies = [], collections.Counter[str]()
    first, last = float("inf"), 0.0
    for server in pool:
        done = [e for e in server.requests() if e["outcome"].startswith("answered:")]
        per_server.append(len(done))
        bodies.update(e["body_sha256"] for e in done)
        first = min([first, *(e["arrived_s"] for e in done)])
        last = max([last, *(e["done_s"] for e in done)])
    twice = sum(n - 1 for n in bodies.values() if n > 1)
    return Served(per_server, twice, last - first)


def scaling(size: PoolSize, work: Path) -> dict[int, dict[str, Any]]:
    rows = {}
    for count in size.counts:
        slots = count * size.per_server
        calls = slots * size.waves
        ideal = slots / size.latency_s
        with servers([size.latency_s] * count, size.per_server) as pool:
            exp = experiment(work / f"pool_{count}.yaml", dataset_for(calls), pool, slots)
            _, stats = harness_run(exp, work / f"run_{count}")
            seen = served(pool)
            peak = max(server_stats(s.base)["max_in_flight"] for s in pool)
        if stats["errors"] or sum(seen.per_server) != calls or seen.twice:
            raise RuntimeError(f"{count} servers: {stats}, answered {seen}")
        rows[count] = {
            "calls": calls,
            "serving_s": round(seen.span_s, 3),
            "calls_per_s": round(seen.rate, 1),
            "ideal_per_s": round(ideal, 1),
            "of_ideal": round(seen.rate / ideal, 3),
            "run_wall_s (run.json, start-up and metrics included)": stats["wall_s"],
            "per_server": seen.per_server,
            "max_in_flight": peak,
        }
    return rows


def ceiling(size: PoolSize, work: Path) -> dict[str, Any]:
    with servers([0.0], None) as pool:
        exp = experiment(work / "ceiling.yaml", dataset_for(size.ceiling_calls), pool, 64)
        _, stats = harness_run(exp, work / "run_ceiling")
        seen = served(pool)
    return {
        "calls": stats["calls"],
        "serving_s": round(seen.span_s, 3),
        "calls_per_s": round(seen.rate, 1),
        "run_wall_s": stats["wall_s"],
    }


def killed_mid_run(size: PoolSize, work: Path) -> dict[str, Any]:
    """Kill one of 4 servers a sixteenth into the run, start it again on its port later. It
    first stops answering (new requests hang until the kill resets them), so that the log of
    what it answered before dying is complete."""
    calls = size.chaos_calls
    with servers([size.chaos_latency_s] * 4, 4) as pool:
        exp = experiment(work / "chaos.yaml", dataset_for(calls), pool, 16)
        outcome: dict[str, Any] = {}

        def go() -> None:
            outcome["stats"] = harness_run(exp, work / "run_chaos")[1]

        runner = threading.Thread(target=go)
        runner.start()
        victim = pool[1]
        while server_stats(victim.base)["answered"] < calls // 16 and runner.is_alive():
            time.sleep(0.02)
        httpx.post(f"{victim.base}/_settings", json={"latency_s": 3600.0}, timeout=10.0)
        time.sleep(size.chaos_latency_s + 0.2)  # what it was answering is answered
        before = answered_bodies(victim)
        victim.kill()
        down_s = 5 * size.chaos_latency_s
        time.sleep(down_s)
        victim.start()  # a fresh process on the same port: its log starts empty
        runner.join()
        after = answered_bodies(victim)
        others = [answered_bodies(s) for s in pool if s is not victim]
    stats = outcome["stats"]
    bodies = collections.Counter(before + after + [b for o in others for b in o])
    return {
        "calls": calls,
        "errors": stats["errors"],
        "retries": stats["retries"],
        "answered": sum(bodies.values()),
        "answered_twice": sum(n - 1 for n in bodies.values() if n > 1),
        "victim_answered_before_kill": len(before),
        "victim_down_s": down_s,
        "victim_answered_after_restart": len(after),
        "others_answered": [len(o) for o in others],
        "wall_s": stats["wall_s"],
    }


def answered_bodies(server: ServerProcess) -> list[str]:
    return [e["body_sha256"] for e in server.requests() if e["outcome"].startswith("answered:")]


def slow_server(size: PoolSize, work: Path) -> dict[str, Any]:
    calls = size.chaos_calls // 2
    latencies = [size.chaos_latency_s] * 3 + [4 * size.chaos_latency_s]
    with servers(latencies, 4) as pool:
        exp = experiment(work / "slow.yaml", dataset_for(calls), pool, 16)
        _, stats = harness_run(exp, work / "run_slow")
        seen = served(pool)
    if stats["errors"] or seen.twice:
        raise RuntimeError(f"slow server run: {stats}, answered {seen}")
    total = sum(seen.per_server)
    return {
        "calls": calls,
        "per_server (the last 4x slower)": seen.per_server,
        "slow_share": round(seen.per_server[-1] / total, 3),
        "fast_share_each": round(sum(seen.per_server[:-1]) / 3 / total, 3),
    }


def _at_least(value: float, floor: float, step: float) -> float:
    return max(floor, math.ceil(value / step) * step)


def run(size: Size, work: Path) -> BenchResult:
    shape = SIZES[size]
    top = ceiling(shape, work)
    rate = top["calls_per_s"] * HEADROOM  # what the pools may ask of the coordinator
    if size == "tiny":  # a smoke test: the fixed small latencies
        rate = math.inf
    shape = dataclasses.replace(
        shape,
        latency_s=_at_least(max(shape.counts) * shape.per_server / rate, shape.latency_s, 0.25),
        chaos_latency_s=_at_least(16 / rate, shape.chaos_latency_s, 0.05),
    )
    rows = scaling(shape, work)
    chaos = killed_mid_run(shape, work)
    slow = slow_server(shape, work)
    worst = min(row["of_ideal"] for row in rows.values())
    biggest = rows[max(rows)]
    below = biggest["calls_per_s"] < top["calls_per_s"]
    safe = (
        chaos["errors"] == 0 and chaos["answered"] == chaos["calls"] and not chaos["answered_twice"]
    )
    fewer = slow["slow_share"] < slow["fast_share_each"]
    figures: dict[str, Any] = {
        "latency_s (at least 1 s; longer when the ceiling is low)": shape.latency_s,
        "chaos and slow-server latency_s": shape.chaos_latency_s,
        "per_server_concurrency": shape.per_server,
    }
    for count, row in rows.items():
        figures[f"{count} server(s)"] = row
    figures["coordinator ceiling (0 latency, 1 server, concurrency 64)"] = top
    figures["server killed mid-run and restarted"] = chaos
    figures["one server 4x slower"] = slow
    shown = ", ".join(
        f"{count}: {row['calls_per_s']:g}/s ({row['of_ideal']:.2f} of {row['ideal_per_s']:g})"
        for count, row in rows.items()
    )
    summary = (
        f"servers x {shape.per_server} at {shape.latency_s * 1000:g} ms, calls/s (of ideal): "
        f"{shown}; coordinator ceiling {top['calls_per_s']:g}/s; killed+restarted server: "
        f"{chaos['answered']}/{chaos['calls']} answered, {chaos['answered_twice']} twice, "
        f"{chaos['errors']} failed; 4x slower server's share {slow['slow_share']:.2f} "
        f"(others {slow['fast_share_each']:.2f})"
    )
    return BenchResult(
        "pool",
        summary,
        figures,
        goal=f"every pool size >= {GOAL} of ideal, below the ceiling; nothing lost or paid twice",
        met=worst >= GOAL and below and safe and fewer,
    )
