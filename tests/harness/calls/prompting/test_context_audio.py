"""The item's context audio cut to a budget: which files, how long, at what rate, and the
same bytes every time."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import soundfile

from harness.calls.prompting.context_audio import ContextAudioBudget, context_excerpt
from harness.core.dataset import Item


def item_with_audio(root: Path, seconds: list[float], rate: int = 22050) -> Item:
    files = []
    for k, length in enumerate(seconds):
        t = np.arange(int(rate * length)) / rate
        tone = 0.2 * np.sin(2 * np.pi * (300 + 40 * k) * t)
        soundfile.write(root / f"{k}.flac", np.stack([tone, 0.5 * tone], axis=1), rate)
        files.append(f"{k}.flac")
    return Item(
        id="t3_x", query="q", candidates=("a", "b"), relevant=(), context_audio=tuple(files)
    )


def seconds_of(path: Path) -> float:
    info = soundfile.info(str(path))
    return info.frames / info.samplerate


def test_at_most_max_clips_each_an_equal_share(tmp_path: Path) -> None:
    item = item_with_audio(tmp_path, [30.0] * 12)
    budget = ContextAudioBudget(max_clips=10, max_seconds=50.0, sample_rate=16000)
    ref = context_excerpt(item, tmp_path, budget, seed=0, folder=tmp_path / "out")
    info = soundfile.info(str(ref.path))
    assert (info.samplerate, info.channels, info.subtype) == (16000, 1, "PCM_16")
    assert seconds_of(ref.path) == 50.0  # ten 5-second shares


def test_short_files_are_kept_whole_within_the_total(tmp_path: Path) -> None:
    item = item_with_audio(tmp_path, [2.0, 3.0])
    budget = ContextAudioBudget(max_clips=10, max_seconds=300.0)
    ref = context_excerpt(item, tmp_path, budget, seed=0, folder=tmp_path / "out")
    assert seconds_of(ref.path) == 5.0


def test_the_same_recipe_gives_the_same_bytes_and_another_seed_another_cut(tmp_path: Path) -> None:
    item = item_with_audio(tmp_path, [20.0, 20.0, 20.0])
    budget = ContextAudioBudget(max_clips=2, max_seconds=8.0)
    first = context_excerpt(item, tmp_path, budget, seed=0, folder=tmp_path / "a")
    again = context_excerpt(item, tmp_path, budget, seed=0, folder=tmp_path / "b")
    other = context_excerpt(item, tmp_path, budget, seed=1, folder=tmp_path / "a")
    assert first.sha256 == again.sha256 and first.path.name == again.path.name
    assert other.sha256 != first.sha256 and other.path != first.path
