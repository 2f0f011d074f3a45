"""Small stage-3 inputs written for the tests: clip captions, synthesised audio, dialogues."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import soundfile

CLIP_CAPTIONS = {
    "piano": "slow calm solo piano, soft and gentle, quiet evening mood",
    "rock": "loud energetic rock with distorted electric guitars and pounding drums",
    "lullaby": "gentle music box lullaby, sleepy and tender",
    "strings": "sad slow string quartet, melancholic and mournful",
    "disco": "upbeat funky disco groove with bass and hi-hats, party mood",
    "jazz": "relaxed jazz trio with brushed drums and upright bass in a cafe",
    "march": "military brass march band, proud and bold",
    "ambient": "ambient synth pads, spacious and dreamy, meditation",
    "banjo": "cheerful bluegrass banjo picking, country fair",
    "techno": "fast driving techno beat for a nightclub",
    "nofile": "calm piano with no audio file at all",
    "broken": "calm piano whose audio file is corrupt",
}
DIALOGUE_SUMMARIES = {
    "dd00001": "Two friends talk quietly in the evening; calm; slow solo piano.",
    "dd00002": "A couple dances at a lively party; excited and happy; upbeat funky groove.",
    "dd00003": "Someone mourns a lost pet; grief and sorrow; slow sad strings.",
}


@pytest.fixture
def stage3_inputs(tmp_path: Path) -> tuple[Path, Path, Path]:
    """(clips.jsonl, dialogues.jsonl, audio folder) with 10 playable clips of 12."""
    audio = tmp_path / "audio"
    audio.mkdir()
    t = np.arange(1600) / 16000
    for i, cid in enumerate(CLIP_CAPTIONS):
        if cid == "nofile":
            continue
        if cid == "broken":
            (audio / f"{cid}.wav").write_bytes(b"RIFF not really a wav")
            continue
        soundfile.write(audio / f"{cid}.wav", 0.1 * np.sin(2 * np.pi * (200 + 40 * i) * t), 16000)
    clips = tmp_path / "kept.jsonl"
    clips.write_text(
        "".join(
            json.dumps({"id": cid, "caption": cap, "aspects": cap.split(", ")}) + "\n"
            for cid, cap in CLIP_CAPTIONS.items()
        )
    )
    dialogues = tmp_path / "dialogues.jsonl"
    dialogues.write_text(
        "".join(
            json.dumps(
                {
                    "id": did,
                    "source_line": int(did[2:]),
                    "dialogue": [
                        {"speaker": "A", "text": f"Line one of {did}."},
                        {"speaker": "B", "text": "Line two."},
                    ],
                    "summary": summary,
                }
            )
            + "\n"
            for did, summary in DIALOGUE_SUMMARIES.items()
        )
    )
    return clips, dialogues, audio
