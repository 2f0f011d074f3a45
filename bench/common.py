"""What every benchmark shares: synthetic datasets, the fake server as a separate process,
experiment files, timed child processes, and one result type."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import httpx
import numpy as np
import soundfile
import yaml

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "bench" / "out"
Size = Literal["full", "tiny"]

WORDS = [
    "coffee",
    "rain",
    "tomorrow",
    "exam",
    "train",
    "late",
    "sorry",
    "birthday",
    "movie",
    "dinner",
    "weekend",
    "quiet",
    "beach",
    "office",
    "meeting",
    "project",
    "guitar",
    "dance",
    "tired",
    "happy",
    "nervous",
    "garden",
    "morning",
    "window",
    "city",
    "bus",
    "laugh",
    "forget",
    "remember",
    "music",
    "party",
    "walk",
    "coat",
    "cold",
    "warm",
    "sunny",
    "library",
    "phone",
    "call",
]


@dataclass
class BenchResult:
    """One benchmark's outcome: a one-line summary, its figures and whether it met its goal."""

    name: str
    summary: str
    figures: dict[str, Any]
    goal: str = ""
    met: bool | None = None
    notes: list[str] = field(default_factory=list)
    # Figures (ratios against a reference of the same run; lower is better) that
    # bench/RESULTS.md compares with its previous figures (`bench.results`).
    tracked: tuple[str, ...] = ()

    def line(self) -> str:
        verdict = {True: "goal met", False: "GOAL MISSED", None: "no goal"}[self.met]
        return f"[{self.name}] {self.summary} ({verdict})"


# ------------------------------------------------------------------------- datasets
@dataclass(frozen=True)
class DatasetSpec:
    """A synthetic dataset: `n_items` dialogues with 4 candidates each, drawn from
    `n_clips` distinct synthesised clips (distinct within every item)."""

    n_items: int
    n_clips: int
    seconds: float
    sample_rate: int = 16000
    n_candidates: int = 4
    seed: int = 0

    @property
    def folder_name(self) -> str:
        return (
            f"data_{self.n_items}i_{self.n_clips}c_{self.seconds:g}s_{self.sample_rate}hz"
            f"_{self.n_candidates}_{self.seed}"
        )


@dataclass(frozen=True)
class Workload:
    """Pointwise calls (one per item and candidate) against the fake server."""

    spec: DatasetSpec
    latency_s: float
    concurrency: int

    @property
    def calls(self) -> int:
        return self.spec.n_items * self.spec.n_candidates

    @property
    def ideal_s(self) -> float:
        """Wall time if every call took exactly the server's latency and no more."""
        return self.calls * self.latency_s / self.concurrency


# (1), (3) and (6): 1,200 items x 4 candidates, a different clip for every candidate.
CLIP_SECONDS = 1.0
THROUGHPUT = {
    "full": Workload(DatasetSpec(1200, 4800, CLIP_SECONDS), latency_s=0.2, concurrency=64),
    "tiny": Workload(DatasetSpec(6, 24, 0.2), latency_s=0.01, concurrency=8),
}


def synth_dataset(spec: DatasetSpec, root: Path | None = None) -> Path:
    """Write (once; reused while its manifest matches) a dataset folder for `spec`."""
    if spec.n_clips < spec.n_candidates:
        raise ValueError(
            f"{spec.n_clips} clips cannot give {spec.n_candidates} distinct candidates"
        )
    folder = (root or OUT) / spec.folder_name
    manifest = folder / "manifest.json"
    wanted = json.dumps(spec.__dict__, sort_keys=True)
    if manifest.is_file() and manifest.read_text() == wanted:
        return folder
    if folder.exists():
        shutil.rmtree(folder)
    (folder / "audio").mkdir(parents=True)
    rng = np.random.default_rng(spec.seed)
    t = np.arange(int(spec.seconds * spec.sample_rate), dtype=np.float32) / spec.sample_rate
    clips = []
    for k in range(spec.n_clips):
        # Distinct pitch, vibrato and noise per clip, so every clip's bytes differ.
        base = 110.0 * 2 ** (k % 48 / 12) * (1 + k / (7 * spec.n_clips))
        wobble = np.sin(2 * np.pi * (0.5 + k % 5) * t)
        signal = 0.2 * np.sin(2 * np.pi * base * t + 0.3 * wobble)
        signal += 0.05 * np.sin(2 * np.pi * 1.5 * base * t)
        signal += 0.01 * rng.standard_normal(t.size).astype(np.float32)
        cid = f"c{k:05d}"
        soundfile.write(folder / "audio" / f"{cid}.wav", signal, spec.sample_rate, "PCM_16")
        clips.append(
            {
                "id": cid,
                "audio": f"audio/{cid}.wav",
                "caption": f"synthetic tone around {base:.0f} Hz, {['soft', 'bright', 'warm'][k % 3]}",
                "aspects": ["synthetic"],
            }
        )
    items = []
    for i in range(spec.n_items):
        first = (i * spec.n_candidates) % spec.n_clips
        candidates = [clips[(first + j) % spec.n_clips]["id"] for j in range(spec.n_candidates)]
        turns = [
            {
                "speaker": "AB"[turn % 2],
                "text": " ".join(rng.choice(WORDS, size=int(rng.integers(6, 16)))).capitalize()
                + ".",
            }
            for turn in range(int(rng.integers(4, 9)))
        ]
        ranking = [candidates[j] for j in rng.permutation(spec.n_candidates)]
        items.append(
            {
                "id": f"d{i:05d}",
                "dialogue": turns,
                "summary": f"dialogue {i} about {rng.choice(WORDS)}",
                "candidates": candidates,
                "human_ranking": ranking,
            }
        )
    (folder / "clips.jsonl").write_text("".join(json.dumps(c) + "\n" for c in clips))
    (folder / "items.jsonl").write_text("".join(json.dumps(i) + "\n" for i in items))
    manifest.write_text(wanted)
    return folder


# ------------------------------------------------------------------------- processes
def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def harness_command() -> list[str]:
    script = Path(sys.executable).with_name("harness")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "harness.cli.main"]


@contextmanager
def fake_server(
    *, latency: float, rpm: float | None = None, extra: Sequence[str] = ()
) -> Iterator[str]:
    """The fake model server of `harness.fake_api` in its own process (so that it never
    shares the client's event loop or its CPU time accounting); yields its base URL."""
    port = free_port()
    command = [
        sys.executable,
        "-m",
        "harness.fake_api",
        "--port",
        str(port),
        "--latency",
        str(latency),
        *(["--rpm", str(rpm)] if rpm else []),
        *extra,
    ]
    OUT.mkdir(parents=True, exist_ok=True)
    log = (OUT / "fake_server.log").open("w")
    process = subprocess.Popen(command, cwd=REPO, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"fake server exited with {process.returncode}; see {log.name}")
            try:
                httpx.get(f"{base}/_stats", timeout=1.0).raise_for_status()
                break
            except httpx.HTTPError:
                if time.monotonic() > deadline:
                    raise RuntimeError("fake server did not start within 30 s") from None
                time.sleep(0.1)
        yield base
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


def server_stats(base: str) -> dict[str, Any]:
    stats: dict[str, Any] = httpx.get(f"{base}/_stats", timeout=10.0).json()
    return stats


def reset_server(base: str) -> None:
    httpx.post(f"{base}/_reset", timeout=10.0).raise_for_status()


@dataclass
class Timed:
    wall_s: float
    returncode: int
    output: str
    max_rss_bytes: int
    cpu_s: float  # user + system time of the child: what its work cost, whatever the load
    max_tree_pss_bytes: int | None = None  # with tree=True: the sampled peak of the tree's PSS

    @property
    def peak_memory_bytes(self) -> int:
        """The larger of the kernel's peak RSS of the command's process and the sampled peak
        PSS of its process tree: a forked worker's memory counts too."""
        return max(self.max_rss_bytes, self.max_tree_pss_bytes or 0)


def run_timed(
    command: Sequence[str], *, env: dict[str, str] | None = None, tree: bool = False
) -> Timed:
    """Run a child process to completion; its wall time, CPU time and its own peak RSS,
    measured by `bench.launch` (a child of this process would report this process's peak);
    with `tree`, also the peak PSS of it and its descendants together (sampled)."""
    with tempfile.TemporaryDirectory(prefix="bench-launch-") as folder:
        report = Path(folder) / "rusage.json"
        flags = ["--tree"] if tree else []
        process = subprocess.Popen(
            [sys.executable, "-m", "bench.launch", str(report), *flags, "--", *command],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env={**os.environ, **(env or {})},
        )
        assert process.stdout is not None
        output = process.stdout.read().decode(errors="replace")
        if process.wait() != 0 or not report.is_file():
            raise RuntimeError(f"bench.launch failed to run {list(command)}:\n{output[-3000:]}")
        figures = json.loads(report.read_text())
    return Timed(
        figures["wall_s"],
        figures["returncode"],
        output,
        figures["max_rss_bytes"],
        figures["cpu_s"],
        figures.get("max_tree_pss_bytes"),
    )


def checked(timed: Timed, what: str) -> Timed:
    if timed.returncode != 0:
        raise RuntimeError(f"{what} failed (exit {timed.returncode}):\n{timed.output[-3000:]}")
    return timed


# ------------------------------------------------------------------------- experiments
def write_experiment(
    path: Path,
    *,
    name: str,
    dataset: Path,
    provider: dict[str, Any],
    prompt: str = "zero_shot",
    n_bootstrap: int = 1000,
) -> Path:
    config = {
        "name": name,
        "dataset": str(dataset),
        "provider": provider,
        "prompt": prompt,
        "inputs": {"dialogue": "full", "music": "audio"},
        "n_bootstrap": n_bootstrap,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def openai_provider(
    base_url: str, *, concurrency: int, rpm: float | None = None, model: str = "bench-model"
) -> dict[str, Any]:
    provider: dict[str, Any] = {
        "name": "openai-compatible",
        "model": model,
        "base_url": f"{base_url}/v1",
        "max_concurrency": concurrency,
        "max_attempts": 20,
    }
    if rpm:
        provider["rpm"] = rpm
    return provider


def harness_run(
    experiment: Path,
    work: Path,
    *,
    cache: Path | None = None,
    env: dict[str, str] | None = None,
    tree: bool = False,
) -> tuple[Timed, dict[str, Any]]:
    """`harness run` as a whole process; its wall time and the run's run.json (with `tree`,
    the memory of the process and its worker together: `run_timed`)."""
    results = work / "results"
    command = [
        *harness_command(),
        "run",
        str(experiment),
        "--results-dir",
        str(results),
        "--cache-dir",
        str(cache or work / "cache"),
        "--no-progress",
    ]
    timed = checked(
        run_timed(command, env={"OPENAI_API_KEY": "bench-key", **(env or {})}, tree=tree),
        "harness run",
    )
    name = yaml.safe_load(experiment.read_text())["name"]
    stats: dict[str, Any] = json.loads((results / name / "run.json").read_text())
    return timed, stats


def export_requests(dataset: Path, out: Path, *, prompt: str = "zero_shot") -> int:
    """The chat requests the harness would send for `dataset`, as JSONL of
    {system, parts: [{text} | {audio: path}]} (for the floor and inspect_ai scripts)."""
    from harness.calls.cache import ResponseCache
    from harness.config.experiment import ExperimentConfig
    from harness.core.types import AudioRef, ChatRequest
    from harness.runs.runner import Runner

    config = ExperimentConfig(
        name="export", dataset=dataset, provider={"name": "mock"}, prompt=prompt
    )
    cache = ResponseCache(out.parent / "export-cache")
    try:
        runner = Runner(config, cache=cache, results_dir=out.parent, show_progress=False)
        calls = runner.prepare(runner.dataset())
    finally:
        cache.close()
    with out.open("w") as handle:
        for call in calls:
            assert isinstance(call.request, ChatRequest)
            parts = [
                {"audio": str(p.path)} if isinstance(p, AudioRef) else {"text": p}
                for p in call.request.parts
            ]
            line = {
                "id": f"{call.item_id}/{call.candidates[0]}",
                "system": call.request.system,
                "parts": parts,
                "response_schema": call.request.response_schema,
            }
            handle.write(json.dumps(line) + "\n")
    return len(calls)


def fresh(path: Path) -> Path:
    if path.exists():
        shutil.rmtree(path)
    path.mkdir(parents=True)
    return path


def ratio(numerator: float, denominator: float) -> float:
    return round(numerator / denominator, 3) if denominator else float("nan")
