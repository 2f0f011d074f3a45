"""Shared fixtures: a tiny dataset written on the fly with synthesised audio, and a run of
an experiment config into a work folder."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import numpy as np
import pytest
import soundfile

from harness.cache import ResponseCache
from harness.config import ExperimentConfig
from harness.records import Record, read_records
from harness.runner import Runner, RunResult
from providers import Provider

SAMPLE_RATE = 16000


def write_tiny_dataset(
    root: Path, n_items: int = 3, n_candidates: int = 4, seconds: float = 0.5
) -> Path:
    """Items d0..d{n-1}, each with its own candidates; the human ranking is c<i>_0 best."""
    audio_dir = root / "audio"
    audio_dir.mkdir(parents=True, exist_ok=True)
    clips, items = [], []
    t = np.arange(int(SAMPLE_RATE * seconds)) / SAMPLE_RATE
    for i in range(n_items):
        candidates = []
        for j in range(n_candidates):
            cid = f"c{i}_{j}"
            freq = 220.0 * (1 + i + j / n_candidates)
            soundfile.write(
                audio_dir / f"{cid}.wav", 0.2 * np.sin(2 * np.pi * freq * t), SAMPLE_RATE
            )
            clips.append(
                {
                    "id": cid,
                    "audio": f"audio/{cid}.wav",
                    "caption": f"tone {freq:.0f} Hz",
                    "aspects": ["tone"],
                }
            )
            candidates.append(cid)
        ranking = list(candidates)
        items.append(
            {
                "id": f"d{i}",
                "dialogue": [
                    {"speaker": "A", "text": f"Hello {i}"},
                    {"speaker": "B", "text": "Hi there."},
                ],
                "summary": f"A short greeting number {i}; calm, friendly; soft piano.",
                "candidates": candidates[::-1],
                "human_ranking": ranking,
            }
        )
    (root / "clips.jsonl").write_text("".join(json.dumps(c) + "\n" for c in clips))
    (root / "items.jsonl").write_text("".join(json.dumps(i) + "\n" for i in items))
    return root


@pytest.fixture
def tiny_dataset(tmp_path: Path) -> Path:
    return write_tiny_dataset(tmp_path / "dataset")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-snapshots",
        action="store_true",
        default=False,
        help="Rewrite tests/snapshots/*.txt from the current prompt templates.",
    )


def run_config(
    config: ExperimentConfig, workdir: Path, provider: Provider | None = None
) -> tuple[RunResult, list[Record]]:
    """Run `config` with its cache in `workdir/cache` and results in `workdir/results`; the
    result and the records it wrote."""
    cache = ResponseCache(workdir / "cache")
    try:
        runner = Runner(
            config,
            cache=cache,
            results_dir=workdir / "results",
            provider=provider,
            show_progress=False,
        )
        result = asyncio.run(runner.run())
    finally:
        cache.close()
    return result, list(read_records(result.out_dir / "records.jsonl"))
