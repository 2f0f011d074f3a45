"""Audio access for providers: content hashes, decoding, resampling and WAV encoding (memoised
in a small LRU: each clip encoded once per run, memory bounded)."""

from __future__ import annotations

import io
import wave
from functools import cache, lru_cache
from math import gcd
from pathlib import Path

import numpy as np
import soundfile
from numpy.typing import NDArray

from harness.core.files import read_bytes, sha256_of
from harness.core.types import AudioRef

ENCODED_CACHE_SIZE = 64
MAX_CLIP_BYTES = 2**31  # a WAV sent as it is (two hours of CD audio is 1.3 GB)


def file_sha256(path: Path) -> str:
    """Content hash of a clip, once per path, size and modification time per process."""
    info = path.stat()
    return _file_sha256(path, info.st_size, info.st_mtime_ns)


@cache
def _file_sha256(path: Path, size: int, modified_ns: int) -> str:
    return sha256_of(path)


@cache
def audio_ref(clip_id: str, path: Path) -> AudioRef:
    """A clip's reference, made once per clip per process."""
    return AudioRef(clip_id=clip_id, path=path, sha256=file_sha256(path))


def read_mono(path: Path, sample_rate: int | None = None) -> NDArray[np.float32]:
    """Decode any format libsndfile reads, downmix to mono, resample to `sample_rate`."""
    data, native_rate = soundfile.read(str(path), dtype="float32", always_2d=True)
    mono: NDArray[np.float32] = data.mean(axis=1, dtype=np.float32)
    if sample_rate is None or sample_rate == native_rate:
        return mono
    return resample(mono, native_rate, sample_rate)


def resample(
    signal: NDArray[np.float32], source_rate: int, target_rate: int
) -> NDArray[np.float32]:
    from scipy.signal import resample_poly  # imported here: slow to import

    divisor = gcd(source_rate, target_rate)
    out = resample_poly(signal, target_rate // divisor, source_rate // divisor)
    return np.asarray(out, dtype=np.float32)


def _is_pcm16_mono(data: bytes, sample_rate: int | None) -> bool:
    """Whether WAV bytes are 16-bit PCM mono at `sample_rate` (any when None), from the header."""
    try:
        with wave.open(io.BytesIO(data)) as header:
            rate_ok = sample_rate is None or header.getframerate() == sample_rate
            return header.getnchannels() == 1 and header.getsampwidth() == 2 and rate_ok
    except (wave.Error, EOFError):
        return False


@lru_cache(maxsize=ENCODED_CACHE_SIZE)
def encode_wav(path: Path, sample_rate: int | None = None) -> bytes:
    """16-bit PCM WAV bytes of the clip, mono, at `sample_rate` (native rate when None)."""
    if path.suffix.lower() == ".wav":
        data = read_bytes(path, limit=MAX_CLIP_BYTES)
        if _is_pcm16_mono(data, sample_rate):
            return data  # already what is asked for: no decode and re-encode
    rate = sample_rate or soundfile.info(str(path)).samplerate
    buffer = io.BytesIO()
    soundfile.write(buffer, read_mono(path, sample_rate), rate, format="WAV", subtype="PCM_16")
    return buffer.getvalue()
