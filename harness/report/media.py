"""Audio for the HTML report: each clip once, as a URL relative to the report, a URL the
`harness view` server answers, or embedded as a compressed preview (Ogg Vorbis, mono, at
most 22.05 kHz; about 50 kbit/s instead of WAV's 700 to 1,400)."""

from __future__ import annotations

import base64
import io
import mimetypes
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Literal
from urllib.parse import quote

import soundfile

from harness.audio import read_mono
from harness.dataset import Clip

AudioMode = Literal["link", "embed"] | Callable[[Clip], str]
PREVIEW_RATE = 22050
AUDIO_TYPES = {
    ".wav": "audio/wav",
    ".mp3": "audio/mpeg",
    ".flac": "audio/flac",
    ".ogg": "audio/ogg",
}


def data_uri(payload: bytes, mime: str) -> str:
    return f"data:{mime};base64,{base64.b64encode(payload).decode('ascii')}"


def audio_type(path: Path) -> str:
    suffix = path.suffix.lower()
    return AUDIO_TYPES.get(suffix) or mimetypes.guess_type(path.name)[0] or "audio/wav"


def preview(path: Path) -> tuple[bytes, str]:
    """The clip as a small Ogg Vorbis preview; the file's own bytes if it cannot be
    transcoded (the browser may still play them)."""
    try:
        rate = min(soundfile.info(str(path)).samplerate, PREVIEW_RATE)
        buffer = io.BytesIO()
        soundfile.write(buffer, read_mono(path, rate), rate, format="OGG", subtype="VORBIS")
        return buffer.getvalue(), "audio/ogg"
    except (RuntimeError, ValueError, soundfile.LibsndfileError):
        return path.read_bytes(), audio_type(path)


def audio_sources(clips: Iterable[Clip], out_dir: Path, mode: AudioMode) -> dict[str, str]:
    """Clip id -> the `src` of its player, once per clip that has audio."""
    out_dir = out_dir.resolve()
    sources: dict[str, str] = {}
    for clip in clips:
        if clip.id in sources or not clip.has_audio:
            continue
        if mode == "embed":
            if clip.path.is_file():
                sources[clip.id] = data_uri(*preview(clip.path))
        elif mode == "link":
            relative = os.path.relpath(clip.path.resolve(), out_dir)
            sources[clip.id] = quote(Path(relative).as_posix())
        else:
            sources[clip.id] = mode(clip)
    return sources
