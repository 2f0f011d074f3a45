"""Fixtures of the reliability tests: datasets of any size on a small pool of synthesised clips."""

from __future__ import annotations

import json
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import soundfile
import yaml

from harness.fake_api import MALFORMED_KINDS, FakeServer, FakeSettings

SAMPLE_RATE = 16000
MakeDataset = Callable[..., Path]


def write_dataset(root: Path, n_items: int, n_clips: int = 8, seconds: float = 0.1) -> Path:
    """Items d0..d{n-1} with 4 candidates each, drawn from a pool of `n_clips` tones; the
    human ranking is the candidates in pool order. Clip ids c<i>_<j> match the bad-input corpus
    for the first two items when n_clips == 8."""
    audio_dir = root / "audio"
    audio_dir.mkdir(parents=True, exist_ok=True)
    t = np.arange(int(SAMPLE_RATE * seconds)) / SAMPLE_RATE
    clip_ids = [f"c{k // 4}_{k % 4}" for k in range(n_clips)]
    clips = []
    for k, cid in enumerate(clip_ids):
        freq = 220.0 * (1 + k / 4)
        soundfile.write(audio_dir / f"{cid}.wav", 0.2 * np.sin(2 * np.pi * freq * t), SAMPLE_RATE)
        clips.append({"id": cid, "audio": f"audio/{cid}.wav", "caption": f"tone {freq:.0f} Hz"})
    items = []
    for i in range(n_items):
        start = (4 * i) % n_clips
        candidates = [clip_ids[(start + j) % n_clips] for j in range(4)]
        items.append(
            {
                "id": f"d{i}",
                "dialogue": [
                    {"speaker": "A", "text": f"Shall we talk about plan number {i}?"},
                    {"speaker": "B", "text": "Yes, quietly please."},
                ],
                "summary": f"Two friends quietly discuss plan {i}.",
                "candidates": candidates[::-1],
                "human_ranking": candidates,
            }
        )
    (root / "clips.jsonl").write_text("".join(json.dumps(c) + "\n" for c in clips))
    (root / "items.jsonl").write_text("".join(json.dumps(i) + "\n" for i in items))
    return root


@pytest.fixture
def make_dataset(tmp_path: Path) -> MakeDataset:
    def make(n_items: int = 2, n_clips: int = 8, name: str = "data") -> Path:
        return write_dataset(tmp_path / name, n_items, n_clips)

    return make


# ------------------------------------------------------------------ against the fake API server
FAST = {
    # Short waits so that faults cost milliseconds: the fake server asks for Retry-After
    # 0.02 s, backoff starts at 0.01 s, and a stalled request is given up after 2 s
    # (generous enough that a loaded CI machine does not time out fault-free calls).
    "retry_wait_s": 0.01,
    "retry_max_wait_s": 0.05,
    "timeout_s": 2.0,
}
TRANSIENT = ("429", "500", "503", "timeout", "drop")


def fast_settings(**changes: Any) -> FakeSettings:
    # A `timeout` fault stalls far longer than the client's 2 s: a client starved by a loaded
    # machine still gives up before the stall ends (with a 5 s stall, one that gave up late could
    # find the stalled request answered, and its retry pay for it a second time: seen once under `make test`).
    return FakeSettings(**{"latency_s": 0.002, "retry_after_s": 0.02, "slow_s": 30.0, **changes})


@pytest.fixture
def fake_server() -> Iterator[FakeServer]:
    with FakeServer(fast_settings()) as server:
        yield server


def write_experiment(
    path: Path, dataset: Path, server: FakeServer, name: str = "soak", **provider: Any
) -> Path:
    """An openai-compatible judge pointed at the fake server (no key needed)."""
    settings = {
        "name": "openai-compatible",
        "model": "fake-judge",
        "base_url": server.openai_base_url,
        "max_concurrency": 8,
        **FAST,
        **provider,
    }
    config = {"name": name, "dataset": str(dataset), "provider": settings, "n_bootstrap": 200}
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def answered_per_body(server: FakeServer) -> Counter[str]:
    """How many times the server answered (200, not malformed) each distinct request body: a
    body answered twice is an answer paid for twice."""
    malformed = {f"fault:{kind}" for kind in MALFORMED_KINDS}
    return Counter(
        r.body_sha256 for r in server.requests() if r.status == 200 and r.outcome not in malformed
    )


def paid_twice(server: FakeServer) -> int:
    return sum(n - 1 for n in answered_per_body(server).values())


def faulted(server: FakeServer) -> Counter[str]:
    return Counter(
        r.outcome.removeprefix("fault:")
        for r in server.requests()
        if r.outcome.startswith("fault:")
    )


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def answers_of(records: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """What a run concluded, without how it got there (latency, cache hits)."""
    return sorted(
        (r["item_id"], tuple(r["candidates"]), r.get("repeat", 0), r.get("raw"),
         json.dumps(r["scores"], sort_keys=True), r.get("error"))
        for r in records
    )  # fmt: skip


def harness_command(*args: str) -> list[str]:
    return [str(Path(sys.executable).parent / "harness"), *args]


def wait_until(condition: Callable[[], bool], timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError("condition not met in time")
        time.sleep(0.005)
