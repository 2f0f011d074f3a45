"""The item's own audio on the query side (MusiCRS), cut to a budget: at most `max_clips` files (a
seeded sample), each an equal share of `max_seconds` at a seeded offset, joined as 16-bit mono
WAV at `sample_rate`; the same inputs give the same bytes (the hash is in the cache key)."""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path

import numpy as np
import soundfile
from pydantic import BaseModel, ConfigDict, Field

from harness.core.audio import audio_ref, resample
from harness.core.dataset import Item
from harness.core.paths import contained
from harness.core.types import AudioRef


class ContextAudioBudget(BaseModel):
    """`context_audio_budget:` of an experiment file."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    max_clips: int = Field(default=10, ge=1)
    max_seconds: float = Field(default=300.0, gt=0)
    sample_rate: int = Field(default=16000, ge=8000, le=96000)


def context_excerpt(
    item: Item, root: Path, budget: ContextAudioBudget, *, seed: int, folder: Path
) -> AudioRef:
    """The item's context audio as one excerpt within `budget`, written under `folder`."""
    files = list(item.context_audio or ())
    if not files:
        raise ValueError(f"item {item.id} has no context_audio")
    recipe = json.dumps([item.id, files, budget.model_dump(), seed])
    path = folder / f"{hashlib.sha256(recipe.encode()).hexdigest()[:20]}.wav"
    if not path.is_file():
        folder.mkdir(parents=True, exist_ok=True)
        signal = _excerpt(files, root, budget, random.Random(f"{seed}:{item.id}"))
        partial = path.with_suffix(".tmp.wav")
        soundfile.write(partial, signal, budget.sample_rate, subtype="PCM_16")
        partial.replace(path)
    return audio_ref(f"{item.id}:context", path)


def _excerpt(
    files: list[str], root: Path, budget: ContextAudioBudget, rng: random.Random
) -> np.ndarray:
    if len(files) > budget.max_clips:
        chosen = sorted(rng.sample(range(len(files)), budget.max_clips))
        files = [files[i] for i in chosen]
    share = budget.max_seconds / len(files)
    pieces = []
    for name in files:
        info = soundfile.info(str(contained(root, name)))
        seconds = info.frames / info.samplerate
        start = rng.uniform(0.0, seconds - share) if seconds > share else 0.0
        frames = min(info.frames, round(share * info.samplerate))
        data, rate = soundfile.read(
            str(contained(root, name)),
            start=int(start * info.samplerate),
            frames=frames,
            dtype="float32",
            always_2d=True,
        )
        mono = data.mean(axis=1, dtype=np.float32)
        pieces.append(
            mono if rate == budget.sample_rate else resample(mono, rate, budget.sample_rate)
        )
    joined = np.concatenate(pieces)
    return joined[: int(budget.max_seconds * budget.sample_rate)]
