"""musicnn's input: a log-compressed mel spectrogram cut into 3-second windows."""

from __future__ import annotations

import os
from typing import Final

import numpy as np
from numpy.typing import NDArray

SAMPLE_RATE: Final = 16000
N_FFT: Final = 512
HOP_LENGTH: Final = 256
N_MELS: Final = 96
# librosa.time_to_frames(3, sr=16000, n_fft=512, hop_length=256) + 1, as musicnn computes it.
WINDOW_FRAMES: Final = 187

Float32Array = NDArray[np.float32]


def load_audio(path: str | os.PathLike[str]) -> Float32Array:
    """A file's samples at 16 kHz mono, decoded and resampled as musicnn does; a ValueError
    for a file no decoder reads."""
    import warnings

    import librosa

    with warnings.catch_warnings():  # librosa's fallback decoder warns before it fails
        warnings.simplefilter("ignore")
        try:
            audio, _ = librosa.load(path, sr=SAMPLE_RATE, mono=True)
        except FileNotFoundError:
            raise
        except Exception as exc:
            if type(exc).__name__ != "NoBackendError":
                raise
            raise ValueError("not an audio file any installed decoder reads") from None
    return np.asarray(audio, dtype=np.float32)


def resample(audio: NDArray[np.floating], sample_rate: int) -> Float32Array:
    """Mono samples at `sample_rate` -> 16 kHz, with librosa.load's resampler."""
    samples = np.asarray(audio, dtype=np.float32)
    if samples.ndim != 1:
        raise ValueError(f"expected mono samples (one dimension), got shape {samples.shape}")
    if sample_rate == SAMPLE_RATE:
        return samples
    import librosa

    out = librosa.resample(samples, orig_sr=sample_rate, target_sr=SAMPLE_RATE)
    return np.asarray(out, dtype=np.float32)


def log_mel(audio: Float32Array) -> Float32Array:
    """(frames, 96) log-compressed mel spectrogram of 16 kHz mono samples."""
    import librosa

    if audio.size == 0:
        raise ValueError("the clip has no samples")
    mel = librosa.feature.melspectrogram(
        y=audio,
        sr=SAMPLE_RATE,
        n_fft=N_FFT,
        hop_length=HOP_LENGTH,
        n_mels=N_MELS,
        power=2.0,
        center=True,
        pad_mode="constant",
    )
    half = np.minimum(mel.T, np.finfo(np.float16).max).astype(np.float16)
    compressed: Float32Array = np.log10(10000 * half.astype(np.float32) + 1)
    return compressed


def windows(spectrogram: Float32Array) -> Float32Array:
    """(n, 187, 96) non-overlapping windows of a (frames, 96) spectrogram; a spectrogram
    shorter than one window is repeated to fill one."""
    frames = spectrogram.shape[0]
    if frames == 0:
        raise ValueError("the spectrogram has no frames")
    if frames < WINDOW_FRAMES:
        reps = -(-WINDOW_FRAMES // frames)
        spectrogram = np.tile(spectrogram, (reps, 1))[:WINDOW_FRAMES]
        frames = WINDOW_FRAMES
    count = frames // WINDOW_FRAMES
    return spectrogram[: count * WINDOW_FRAMES].reshape(count, WINDOW_FRAMES, -1)
