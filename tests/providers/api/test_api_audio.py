"""The encoded clips an API provider sends: encoded once while they fit in a size budget."""

from __future__ import annotations

import base64
from pathlib import Path

import numpy as np
import soundfile

from harness.core.audio import audio_ref
from providers.api import _shared as _api
from providers.api._shared import _EncodedClips, wav_base64


def test_a_pool_of_hundreds_of_clips_is_encoded_once(tmp_path: Path) -> None:
    refs = []
    for k in range(300):  # more clips than the 128 payloads an earlier cache kept
        path = tmp_path / f"c{k}.wav"
        soundfile.write(path, np.full(800, k / 1000, dtype=np.float32), 16000, "PCM_16")
        refs.append(audio_ref(f"c{k}", path))
    first = [wav_base64(ref, None) for ref in refs]
    again = [wav_base64(ref, None) for ref in refs]
    assert all(a is b for a, b in zip(first, again, strict=True))  # no second encoding
    assert base64.b64decode(first[7]) == refs[7].path.read_bytes()
    url = wav_base64(refs[7], None, data_url=True)
    assert url == "data:audio/wav;base64," + first[7]


def test_the_encoded_clips_stay_within_their_size_budget() -> None:
    clips = _EncodedClips(limit=100)
    for k in range(10):
        clips.put(("clip", k), "x" * 30)
        assert clips.size <= 100
    assert clips.size == 90  # the three most recent
    assert clips.get(("clip", 6)) is None and clips.get(("clip", 9)) == "x" * 30
    clips.get(("clip", 7))  # used: now the most recent
    clips.put(("clip", 10), "y" * 30)
    assert clips.get(("clip", 7)) is not None and clips.get(("clip", 8)) is None
    clips.put(("huge",), "z" * 101)  # larger than the budget: never kept
    assert clips.get(("huge",)) is None and clips.size == 90
    assert _api.AUDIO_CACHE_BYTES >= 64 * 2**20
