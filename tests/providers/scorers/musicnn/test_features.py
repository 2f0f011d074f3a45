"""Spectrogram and windowing: against librosa computed directly, and the window edge cases
(a clip shorter than one window, exact multiples, the dropped tail)."""

from __future__ import annotations

import librosa
import numpy as np
import pytest

from providers.scorers.musicnn import features
from providers.scorers.musicnn.features import HOP_LENGTH, N_MELS, SAMPLE_RATE, WINDOW_FRAMES


def tone(seconds: float, amplitude: float = 0.5, freq: float = 440.0) -> np.ndarray:
    t = np.arange(int(seconds * SAMPLE_RATE)) / SAMPLE_RATE
    return (amplitude * np.sin(2 * np.pi * freq * t)).astype(np.float32)


def test_window_length_is_musicnn_three_seconds() -> None:
    frames = librosa.time_to_frames(3, sr=SAMPLE_RATE, n_fft=features.N_FFT, hop_length=HOP_LENGTH)
    assert WINDOW_FRAMES == frames + 1 == 187


def test_log_mel_matches_librosa_directly() -> None:
    audio = np.random.default_rng(1).normal(scale=0.1, size=SAMPLE_RATE * 2).astype(np.float32)
    spec = features.log_mel(audio)
    assert spec.shape == (1 + len(audio) // HOP_LENGTH, N_MELS) and spec.dtype == np.float32
    mel = librosa.feature.melspectrogram(
        y=audio, sr=SAMPLE_RATE, n_fft=512, hop_length=256, n_mels=96
    )
    expected = np.log10(10000 * mel.T.astype(np.float16).astype(np.float32) + 1)
    np.testing.assert_array_equal(spec, expected)
    # float16 rounding is part of the model's input: the unrounded values differ.
    assert not np.array_equal(spec, np.log10(10000 * mel.T + 1).astype(np.float32))


def test_loud_music_does_not_overflow() -> None:
    """Mel values above 6.55 are common in music; float16 arithmetic (NumPy 2's rule for
    `10000 * float16_array`) would turn them into inf."""
    spec = features.log_mel(tone(1.0, amplitude=1.0, freq=200.0))
    assert np.isfinite(spec).all()
    assert spec.max() > np.log10(10000 * 6.56 + 1)


def test_out_of_range_samples_saturate_instead_of_inf() -> None:
    spec = features.log_mel(tone(1.0, amplitude=100.0, freq=200.0))
    assert np.isfinite(spec).all()
    assert spec.max() == pytest.approx(np.log10(10000 * 65504.0 + 1), rel=1e-6)


def test_silence_is_zero() -> None:
    spec = features.log_mel(np.zeros(SAMPLE_RATE, dtype=np.float32))
    assert not spec.any()


def test_empty_clip_is_an_error() -> None:
    with pytest.raises(ValueError, match="no samples"):
        features.log_mel(np.zeros(0, dtype=np.float32))
    with pytest.raises(ValueError, match="no frames"):
        features.windows(np.zeros((0, N_MELS), dtype=np.float32))


def ramp(frames: int) -> np.ndarray:
    """A spectrogram whose every row says which frame it is."""
    return np.repeat(np.arange(frames, dtype=np.float32)[:, None], N_MELS, axis=1)


@pytest.mark.parametrize(
    ("frames", "count"), [(187, 1), (188, 1), (373, 1), (374, 2), (561, 3), (626, 3)]
)
def test_windows_do_not_overlap_and_drop_the_tail(frames: int, count: int) -> None:
    out = features.windows(ramp(frames))
    assert out.shape == (count, WINDOW_FRAMES, N_MELS)
    starts = out[:, 0, 0]
    np.testing.assert_array_equal(starts, np.arange(count) * WINDOW_FRAMES)
    np.testing.assert_array_equal(
        out[-1, :, 0], np.arange(WINDOW_FRAMES) + (count - 1) * WINDOW_FRAMES
    )


@pytest.mark.parametrize("frames", [1, 2, 100, 186])
def test_a_clip_shorter_than_one_window_is_repeated(frames: int) -> None:
    out = features.windows(ramp(frames))
    assert out.shape == (1, WINDOW_FRAMES, N_MELS)
    np.testing.assert_array_equal(out[0, :, 0], np.arange(WINDOW_FRAMES) % frames)


def test_ten_second_clip_gives_three_windows() -> None:
    spec = features.log_mel(tone(10.0))
    assert spec.shape[0] == 626
    assert features.windows(spec).shape[0] == 3


def test_resample_keeps_16k_and_rejects_stereo() -> None:
    audio = tone(0.5)
    assert features.resample(audio, SAMPLE_RATE) is audio
    assert len(features.resample(tone(0.5), 8000)) == 2 * len(audio)
    with pytest.raises(ValueError, match="mono"):
        features.resample(np.zeros((2, 100), np.float32), SAMPLE_RATE)
