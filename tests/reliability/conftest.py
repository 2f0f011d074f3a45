"""Fixtures of the reliability tests: datasets of any size on a small pool of synthesised clips."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import soundfile

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
