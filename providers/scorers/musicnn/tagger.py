"""`Tagger`: a pretrained musicnn model on CPU, from audio files or samples to the mean
probability of each of its 50 tags over the clip's 3-second windows (what
`musicnn.tagger.top_tags` ranks)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from providers.scorers.musicnn import features
from providers.scorers.musicnn.weights import ModelName, load_checkpoint, locate, tag_names

if TYPE_CHECKING:
    from torch import nn

# A clip is a file path or 1-D samples (at the `sample_rate` given to `Tagger.tag`).
Clip = str | os.PathLike[str] | NDArray[np.floating]
# Windows per forward pass: each costs ~9 MiB of front-end maps (MusiCNN), and on CPU larger
# batches are no faster.
DEFAULT_BATCH_WINDOWS = 16


@dataclass
class Tagger:
    model: ModelName
    tags: tuple[str, ...]
    net: nn.Module
    batch_windows: int = DEFAULT_BATCH_WINDOWS

    @classmethod
    def load(
        cls,
        model: ModelName = "MTT_musicnn",
        *,
        wheel: str | os.PathLike[str] | None = None,
        batch_windows: int = DEFAULT_BATCH_WINDOWS,
    ) -> Tagger:
        """The model's weights from the installed `musicnn` package, or from a wheel file
        (`wheel`, or the environment variable BGM_JUDGE_MUSICNN_WHEEL)."""
        from providers.scorers.musicnn.nets import build

        source = locate(wheel)
        tags = tag_names(model, source)
        net = build(model, len(tags))
        net.load_tf(load_checkpoint(model, source))
        net.eval()
        return cls(model, tags, net, batch_windows)

    def spectrogram(
        self, clip: Clip, sample_rate: int = features.SAMPLE_RATE
    ) -> NDArray[np.float32]:
        if isinstance(clip, np.ndarray):
            audio = features.resample(clip, sample_rate)
        else:
            audio = features.load_audio(Path(clip))
        return features.log_mel(audio)

    def taggrams(
        self, clips: Sequence[Clip], sample_rate: int = features.SAMPLE_RATE
    ) -> list[NDArray[np.float32]]:
        """For each clip, the (windows, 50) tag probabilities of its 3-second windows;
        windows of all clips go through the network together, `batch_windows` at a time."""
        per_clip = [features.windows(self.spectrogram(c, sample_rate)) for c in clips]
        if not per_clip:
            return []
        probabilities = self.predict(np.concatenate(per_clip))
        bounds = np.cumsum([len(w) for w in per_clip])[:-1]
        return list(np.split(probabilities, bounds))

    def predict(self, windows: NDArray[np.float32]) -> NDArray[np.float32]:
        """(n, 187, 96) log-mel windows -> (n, 50) tag probabilities."""
        import torch

        outputs = []
        with torch.inference_mode():
            for start in range(0, len(windows), self.batch_windows):
                batch = torch.from_numpy(
                    np.ascontiguousarray(windows[start : start + self.batch_windows])
                )
                outputs.append(torch.sigmoid(self.net(batch)).numpy())
        return np.concatenate(outputs).astype(np.float32)

    def tag(
        self, clips: Sequence[Clip], sample_rate: int = features.SAMPLE_RATE
    ) -> list[dict[str, float]]:
        """For each clip, {tag: probability averaged over its windows}, in the model's tag
        order."""
        return [self._named(gram.mean(axis=0)) for gram in self.taggrams(clips, sample_rate)]

    def _named(self, values: NDArray[Any]) -> dict[str, float]:
        return {tag: float(v) for tag, v in zip(self.tags, values, strict=True)}


def top_tags(scores: dict[str, float], k: int = 5, threshold: float = 0.0) -> list[str]:
    """The (at most) `k` most probable tags with a probability of at least `threshold`."""
    ranked = sorted(scores.items(), key=lambda item: -item[1])
    return [tag for tag, p in ranked[:k] if p >= threshold]


def describe(scores: dict[str, float], k: int = 5, threshold: float = 0.0) -> str:
    """A clip's tags as a short description, most probable first, lower case ("slow, piano,
    classical, quiet, no vocals"); never empty: the most probable tag stays."""
    kept = top_tags(scores, k, threshold) or top_tags(scores, 1)
    return ", ".join(tag.lower() for tag in kept)
