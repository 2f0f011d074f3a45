"""Audio for the HTML report: each clip once, as a URL relative to the report, a URL the
`harness view` server answers, or embedded as a compressed preview (Ogg Opus, mono, at
most 24 kHz; about 50 kbit/s instead of WAV's 700 to 1,400). Opus rather than Vorbis: browsers
read an Ogg Vorbis file's length to its last whole block (a 0.5 s clip showed as 0.516 s in
Chromium 156), an Opus file's to its 20 ms frame."""

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

from harness.core.audio import MAX_CLIP_BYTES, read_mono
from harness.core.dataset import Clip
from harness.core.files import read_bytes

AudioMode = Literal["link", "embed"] | Callable[[Clip], str]
# The sample rates Opus encodes, highest first: a preview takes the highest at or below the clip's.
OPUS_RATES = (24000, 16000, 12000, 8000)
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
    """The clip as a small Ogg Opus preview; the file's own bytes if it cannot be
    transcoded (the browser may still play them)."""
    try:
        source_rate = soundfile.info(str(path)).samplerate
        rate = next((r for r in OPUS_RATES if r <= source_rate), OPUS_RATES[-1])
        buffer = io.BytesIO()
        soundfile.write(buffer, read_mono(path, rate), rate, format="OGG", subtype="OPUS")
        return buffer.getvalue(), "audio/ogg"
    except (RuntimeError, ValueError, soundfile.LibsndfileError):
        return read_bytes(path, limit=MAX_CLIP_BYTES), audio_type(path)


def audio_sources(clips: Iterable[Clip], out_dir: Path, mode: AudioMode) -> dict[str, str]:
    """Clip id -> the `src` of its player, once per clip that has audio."""
    out_dir = out_dir.resolve()
    sources: dict[str, str] = {}
    folders: dict[Path, str] = {}  # a clip folder -> its path relative to the report
    for clip in clips:
        if clip.id in sources or not clip.has_audio:
            continue
        if mode == "embed":
            if clip.path.is_file():
                sources[clip.id] = data_uri(*preview(clip.path))
        elif mode == "link":
            path = clip.path  # checked inside the dataset folder on each access
            if path.parent not in folders:
                folders[path.parent] = Path(
                    os.path.relpath(path.parent.resolve(), out_dir)
                ).as_posix()
            sources[clip.id] = quote(f"{folders[path.parent]}/{path.name}")
        else:
            sources[clip.id] = mode(clip)
    return sources
