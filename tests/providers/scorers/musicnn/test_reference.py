"""The PyTorch port against the original musicnn under TensorFlow: on the 16 real clips,
every tag probability of every model agrees with reference_tags.json (written by
make_reference.py) within 0.002.

The clips are not part of the project: they are looked for in $BGM_JUDGE_REALDATA/audio,
else in `../shared/realdata/audio` beside the repository, and the test skips when they are
absent, differ from the ones the reference was made from, or the weights are missing.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from providers.scorers.musicnn import INSTALL_HINT, ModelName, Tagger, features

TOLERANCE = 0.002
HERE = Path(__file__).resolve().parent
REPO = HERE.parents[3]
REALDATA = Path(os.environ.get("BGM_JUDGE_REALDATA", REPO.parent / "shared" / "realdata"))
AUDIO = REALDATA / "audio"
REFERENCE: dict[str, Any] = json.loads((HERE / "reference_tags.json").read_text())
CLIPS: dict[str, dict[str, Any]] = REFERENCE["provenance"]["clips"]

needs_clips = pytest.mark.skipif(
    not AUDIO.is_dir(), reason=f"real clips not found at {AUDIO} (set BGM_JUDGE_REALDATA)"
)
needs_weights = pytest.mark.skipif(
    importlib.util.find_spec("musicnn") is None and not os.environ.get("BGM_JUDGE_MUSICNN_WHEEL"),
    reason=f"musicnn weights not installed ({INSTALL_HINT})",
)


@pytest.fixture(scope="module")
def windows() -> dict[str, np.ndarray]:
    """Each clip's spectrogram windows, computed once for all models."""
    missing = [name for name in CLIPS if not (AUDIO / name).is_file()]
    changed = [
        name
        for name in CLIPS
        if name not in missing
        and hashlib.sha256((AUDIO / name).read_bytes()).hexdigest() != CLIPS[name]["sha256"]
    ]
    if missing or changed:
        pytest.skip(
            f"clips in {AUDIO} are not the reference's: missing {missing}, changed {changed}"
        )
    return {
        name: features.windows(features.log_mel(features.load_audio(AUDIO / name)))
        for name in CLIPS
    }


def test_the_reference_covers_both_musicnn_models() -> None:
    assert {"MTT_musicnn", "MSD_musicnn"} <= set(REFERENCE["tags"])
    assert len(CLIPS) == 16
    assert REFERENCE["provenance"]["musicnn"] == "0.1.0"


@pytest.mark.slow
@needs_clips
@needs_weights
@pytest.mark.parametrize("model", sorted(REFERENCE["tags"]))
def test_port_matches_original(model: ModelName, windows: dict[str, np.ndarray]) -> None:
    tagger = Tagger.load(model)
    assert list(tagger.tags) == REFERENCE["labels"][model]
    worst = (0.0, "", "")
    for name, clip_windows in windows.items():
        assert len(clip_windows) == CLIPS[name]["windows"], name
        mean = tagger.predict(clip_windows).mean(axis=0)
        expected = REFERENCE["tags"][model][name]
        for tag, value in zip(tagger.tags, mean, strict=True):
            difference = abs(float(value) - expected[tag])
            worst = max(worst, (difference, name, tag))
    assert worst[0] <= TOLERANCE, (
        f"{model}: |port - original| = {worst[0]:.2g} on {worst[1]} / {worst[2]}"
    )
