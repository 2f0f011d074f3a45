"""The torch networks (shapes, weight mapping) and `Tagger` on synthesized audio; the
checks on the real weights skip when they are not installed."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest
import soundfile
import torch

from providers.scorers.musicnn import INSTALL_HINT, Tagger
from providers.scorers.musicnn.features import SAMPLE_RATE
from providers.scorers.musicnn.nets import VGG, MusiCNN, build
from providers.scorers.musicnn.tagger import top_tags


@pytest.mark.parametrize("model", ["MTT_musicnn", "MSD_vgg"])
def test_networks_map_windows_to_logits(model: str) -> None:
    net = build(model, 50).eval()
    with torch.inference_mode():
        out = net(torch.zeros(3, 187, 96))
    assert out.shape == (3, 50)


def test_musicnn_accepts_other_window_lengths_vgg_does_not() -> None:
    with torch.inference_mode():
        assert MusiCNN().eval()(torch.zeros(1, 300, 96)).shape == (1, 50)
        with pytest.raises(RuntimeError):
            VGG().eval()(torch.zeros(1, 300, 96))


def test_weight_of_the_wrong_shape_is_refused() -> None:
    net = VGG()
    tensors = {"1CNN/kernel": np.zeros((3, 3, 1, 64), np.float32), "1CNN/bias": np.zeros(64)}
    with pytest.raises(ValueError, match="1CNN/kernel: shape"):
        net.load_tf(tensors)


def test_unknown_architecture() -> None:
    with pytest.raises(ValueError, match="unknown musicnn architecture"):
        build("MSD_musicnn_big_transformer_xl", 50)


# ------------------------------------------------------------------ real weights
@pytest.fixture(scope="module")
def mtt() -> Tagger:
    if importlib.util.find_spec("musicnn") is None:
        pytest.skip(f"musicnn weights not installed ({INSTALL_HINT})")
    return Tagger.load("MTT_musicnn")


def chord(seconds: float, rate: int = SAMPLE_RATE) -> np.ndarray:
    t = np.arange(int(seconds * rate)) / rate
    notes = (261.63, 329.63, 392.0)
    return (0.2 * sum(np.sin(2 * np.pi * f * t) for f in notes)).astype(np.float32)


def test_tags_are_probabilities_in_tag_order(mtt: Tagger) -> None:
    (scores,) = mtt.tag([chord(4.0)])
    assert list(scores) == list(mtt.tags) and len(scores) == 50
    assert all(0.0 < p < 1.0 for p in scores.values())


def test_file_and_samples_agree(mtt: Tagger, tmp_path: Path) -> None:
    audio = chord(6.5, rate=22050)
    soundfile.write(tmp_path / "c.wav", audio, 22050, subtype="FLOAT")
    from_file, from_samples = mtt.tag([tmp_path / "c.wav", audio], sample_rate=22050)
    assert from_file == pytest.approx(from_samples, abs=1e-6)


def test_batching_does_not_change_the_answer(mtt: Tagger) -> None:
    clips = [
        chord(9.5),
        chord(1.0),
        np.random.default_rng(0).normal(0, 0.1, 50000).astype(np.float32),
    ]
    grams = mtt.taggrams(clips)
    assert [len(g) for g in grams] == [3, 1, 1]
    one_by_one = Tagger(mtt.model, mtt.tags, mtt.net, batch_windows=1).taggrams(clips)
    for a, b in zip(grams, one_by_one, strict=True):
        np.testing.assert_allclose(a, b, atol=1e-5)
    assert mtt.tag(clips)[1] == pytest.approx(
        dict(zip(mtt.tags, grams[1][0].tolist(), strict=True))
    )


def test_noise_and_chord_get_different_tags(mtt: Tagger) -> None:
    noise = np.random.default_rng(0).normal(0, 0.3, SAMPLE_RATE * 4).astype(np.float32)
    chord_tags, noise_tags = mtt.tag([chord(4.0), noise])
    assert top_tags(chord_tags, k=3) != top_tags(noise_tags, k=3)


def test_top_tags() -> None:
    scores = {"a": 0.1, "b": 0.7, "c": 0.4}
    assert top_tags(scores, k=2) == ["b", "c"]
    assert top_tags(scores, k=5, threshold=0.3) == ["b", "c"]
    assert top_tags(scores, k=5, threshold=0.9) == []


def test_no_clips(mtt: Tagger) -> None:
    assert mtt.tag([]) == []
