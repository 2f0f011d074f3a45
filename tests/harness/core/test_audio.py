from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import soundfile

from harness.core.audio import audio_ref, encode_wav, file_sha256, read_mono


def test_read_mono_downmixes_and_resamples(tmp_path: Path) -> None:
    t = np.arange(44100) / 44100
    left = 0.5 * np.sin(2 * np.pi * 440 * t)
    soundfile.write(tmp_path / "a.wav", np.stack([left, np.zeros_like(left)], axis=1), 44100)
    mono = read_mono(tmp_path / "a.wav", 16000)
    assert mono.dtype == np.float32
    assert len(mono) == 16000
    peak_bin = np.argmax(np.abs(np.fft.rfft(mono)))
    assert abs(peak_bin - 440) <= 1  # 1 s of audio: bin k is k Hz
    assert 0.2 < float(np.max(np.abs(mono))) < 0.3  # the silent channel halves the level


def test_encode_wav_gives_pcm16_mono_at_the_requested_rate(tmp_path: Path) -> None:
    soundfile.write(tmp_path / "b.flac", np.zeros((48000, 2), dtype=np.float32), 48000)
    data, rate = soundfile.read(io.BytesIO(encode_wav(tmp_path / "b.flac", 24000)))
    assert rate == 24000
    assert data.ndim == 1
    assert len(data) == 24000


def test_hash_is_of_content_not_path(tmp_path: Path) -> None:
    soundfile.write(tmp_path / "x.wav", np.ones(100, dtype=np.float32) * 0.1, 8000)
    (tmp_path / "y.wav").write_bytes((tmp_path / "x.wav").read_bytes())
    assert file_sha256(tmp_path / "x.wav") == file_sha256(tmp_path / "y.wav")
    assert (
        audio_ref("x", tmp_path / "x.wav").sha256 == audio_ref("other", tmp_path / "y.wav").sha256
    )


def test_encode_wav_sends_a_clip_already_in_the_wire_format_as_it_is(tmp_path: Path) -> None:
    samples = (0.1 * np.sin(np.arange(16000) / 5)).astype(np.float32)
    soundfile.write(tmp_path / "m.wav", samples, 16000, subtype="PCM_16")
    soundfile.write(tmp_path / "s.wav", np.stack([samples, samples], axis=1), 16000)
    assert encode_wav(tmp_path / "m.wav", 16000) == (tmp_path / "m.wav").read_bytes()
    assert encode_wav(tmp_path / "m.wav", None) == (tmp_path / "m.wav").read_bytes()
    assert soundfile.info(io.BytesIO(encode_wav(tmp_path / "m.wav", 8000))).samplerate == 8000
    stereo = encode_wav(tmp_path / "s.wav", 16000)  # right rate, wrong channel count
    assert soundfile.info(io.BytesIO(stereo)).channels == 1
    soundfile.write(tmp_path / "f.wav", samples, 16000, subtype="FLOAT")
    assert soundfile.info(io.BytesIO(encode_wav(tmp_path / "f.wav", 16000))).subtype == "PCM_16"
