"""Construction from the clips' audio with the real musicnn weights: stage 1's audio vocals
filter, stage 3's captions from tags for clips without one, and (on the 16 real MusicCaps
clips, when present) where the audio and caption filters disagree."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import soundfile

from harness.construct.audio_tags import AudioVocalsConfig, captions_from_tags, vocals_by_audio
from harness.construct.stage1 import Stage1Config, SuitabilityFilter, filter_clips, read_musiccaps
from providers.scorers.musicnn import MusicnnWeightsError, locate
from providers.scorers.musicnn.vocals import VocalEvidence

REPO = Path(__file__).resolve().parents[3]
REALDATA = Path(os.environ.get("BGM_JUDGE_REALDATA", REPO.parent / "shared" / "realdata"))


def weights_installed() -> bool:
    try:
        locate(None)
    except MusicnnWeightsError:
        return False
    return True


needs_weights = pytest.mark.skipif(
    not weights_installed(), reason="musicnn weights not installed (make install)"
)


def tone(path: Path, freq: float, seconds: float = 3.5) -> Path:
    t = np.arange(int(16000 * seconds)) / 16000
    soundfile.write(path, 0.3 * np.sin(2 * np.pi * freq * t), 16000)
    return path


ROWS = [
    {"id": "a", "aspects": ["piano"], "caption": "Piano."},
    {"id": "b", "aspects": ["guitar"], "caption": "Guitar."},
    {"id": "c", "aspects": ["strings"], "caption": "Strings; no audio file."},
]


def test_audio_vocals_removes_what_the_tagger_hears(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    heard = {
        "a": VocalEvidence("female vocal", 0.61, 0.05),
        "b": VocalEvidence("vocal", 0.30, 0.42),  # more evidence for no vocals: kept
    }
    asked: list[list[str]] = []

    def fake(paths: dict[str, Path], config: AudioVocalsConfig) -> dict[str, VocalEvidence]:
        asked.append(sorted(paths))
        return {k: heard[k] for k in paths}

    monkeypatch.setattr("harness.construct.stage1.vocals_by_audio", fake)
    tone(tmp_path / "a.wav", 440)
    tone(tmp_path / "b.wav", 220)
    config = Stage1Config(audio_vocals=AudioVocalsConfig(audio_dir=tmp_path))
    result = filter_clips([dict(r, aspects=list(r["aspects"])) for r in ROWS], config)
    assert asked == [["a", "b"]]  # c has no audio: not checked, kept
    assert [r["id"] for r in result.kept] == ["b", "c"]
    assert result.removed == [
        {"id": "a", "rules": {"vocals_audio": ["female vocal 0.610 vs no vocals 0.050"]}}
    ]
    summary = result.report["audio_vocals"]
    assert summary["checked"] == 2 and summary["not_checked_no_audio"] == 1
    assert result.report["removed_by_rule"]["vocals_audio"] == 1
    assert result.kept[0]["vocals_audio"] == {"tag": "vocal", "p": 0.3, "no_vocals": 0.42}


@needs_weights
def test_real_tagger_on_tones_and_captions_from_tags(tmp_path: Path) -> None:
    paths = {"low": tone(tmp_path / "low.wav", 110), "high": tone(tmp_path / "high.wav", 1760)}
    evidence = vocals_by_audio(paths, AudioVocalsConfig(audio_dir=tmp_path))
    assert set(evidence) == {"low", "high"}
    assert all(0.0 <= e.vocal <= 1.0 and 0.0 <= e.voiceless <= 1.0 for e in evidence.values())
    captions = captions_from_tags(paths)
    for caption in captions.values():
        mtt, msd = caption.split("; ")
        assert len(mtt.split(", ")) == 5 and len(msd.split(", ")) == 3
        assert caption == caption.lower()


@needs_weights
@pytest.mark.skipif(not (REALDATA / "audio").is_dir(), reason=f"no real clips at {REALDATA}")
def test_audio_and_caption_vocals_filters_on_the_real_clips(tmp_path: Path) -> None:
    """The 16 real clips were chosen because their captions describe no vocals; the tagger
    hears a voice in three: two theremin melodies (a voice-like instrument) and a guitar
    cover. Where the two filters disagree is written down in the issue note."""
    rows = {r["id"]: r for r in read_musiccaps(REALDATA / "musiccaps-public.csv")}
    ids = sorted(p.stem for p in (REALDATA / "audio").glob("*.wav"))
    caption_rules = SuitabilityFilter(Stage1Config(check_caption=True))
    by_caption = {
        i
        for i in ids
        if "vocals" in caption_rules.fired([*rows[i]["aspects"], rows[i]["caption"]])[0]
    }
    evidence = vocals_by_audio(
        {i: REALDATA / "audio" / f"{i}.wav" for i in ids}, AudioVocalsConfig(audio_dir=tmp_path)
    )
    by_audio = {i for i, e in evidence.items() if e.has_vocals()}
    assert by_caption == set()
    assert by_audio == {"-OAyRsvFGgc", "02Qntw26enM", "03frQGyrgQ4"}
