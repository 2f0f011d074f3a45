"""What construction learns from the clips' audio with the musicnn taggers (real weights,
offline): whether a clip has vocals (stage 1's audio vocals filter) and a caption made of
its tags for a clip that has none (stage 3)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Literal

import soundfile
from pydantic import BaseModel, ConfigDict, Field

from providers.scorers.musicnn import Tagger, describe, vocal_evidence
from providers.scorers.musicnn.vocals import DEFAULT_THRESHOLD, VocalEvidence

AUDIO_EXTENSIONS = ("wav", "flac", "ogg", "mp3")
# Caption from tags: the MagnaTagATune model's instruments and moods, then the Million Song
# model's genres and styles.
CAPTION_TAGS = (("MTT_musicnn", 5), ("MSD_musicnn", 3))


class AudioVocalsConfig(BaseModel):
    """Stage 1's audio vocals filter (`audio_vocals:` in the build file)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    audio_dir: Path = Field(description="folder of <clip id>.wav (or flac/ogg/mp3)")
    threshold: float = Field(
        default=DEFAULT_THRESHOLD, gt=0.0, le=1.0, description="least vocal-tag probability"
    )
    model: Literal["MTT_musicnn", "MTT_vgg"] = "MTT_musicnn"
    audio_extensions: list[str] = Field(default_factory=lambda: list(AUDIO_EXTENSIONS))


def find_audio(audio_dir: Path, clip_id: str, extensions: Sequence[str]) -> tuple[Path | None, str]:
    """The clip's readable audio file, or None and why not (missing, unreadable, empty)."""
    for ext in extensions:
        path = audio_dir / f"{clip_id}.{ext.lstrip('.')}"
        if not path.is_file():
            continue
        try:
            info = soundfile.info(str(path))
        except (RuntimeError, soundfile.LibsndfileError):
            return None, "unreadable"
        return (path, "ok") if info.frames > 0 else (None, "empty")
    return None, "missing"


def vocals_by_audio(paths: dict[str, Path], config: AudioVocalsConfig) -> dict[str, VocalEvidence]:
    """The vocal evidence of each clip (by id) from its audio."""
    if not paths:
        return {}
    tagger = Tagger.load(config.model)
    ids = sorted(paths)
    scores = tagger.tag([paths[i] for i in ids])
    return {clip_id: vocal_evidence(s) for clip_id, s in zip(ids, scores, strict=True)}


def captions_from_tags(paths: dict[str, Path]) -> dict[str, str]:
    """A caption for each clip (by id) from its tags: "slow, piano, classical, quiet, no
    vocals; chillout, instrumental, ambient"."""
    if not paths:
        return {}
    ids = sorted(paths)
    parts: dict[str, list[str]] = {clip_id: [] for clip_id in ids}
    for model, k in CAPTION_TAGS:
        tagger = Tagger.load(model)  # type: ignore[arg-type]
        for clip_id, scores in zip(ids, tagger.tag([paths[i] for i in ids]), strict=True):
            parts[clip_id].append(describe(scores, k))
    return {clip_id: "; ".join(p) for clip_id, p in parts.items()}
