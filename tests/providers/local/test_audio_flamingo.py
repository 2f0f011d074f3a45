"""Audio Flamingo 3 and Music Flamingo on tiny random checkpoints. Their transformers
processors need no torchvision, so the judges' own encoding is checked against them."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from harness.config.experiment import provider_config
from harness.core.audio import read_mono
from harness.core.types import AudioRef, ProviderError
from providers import create_provider
from providers.local._judge import LocalJudge
from providers.local.audio_flamingo import AudioFlamingo3Judge, MusicFlamingoJudge
from tests.support.tiny_models import (
    judge_request,
    tiny_audio_flamingo3,
    tiny_music_flamingo,
    write_tone,
)

SYSTEM = "You rate background music for conversations."
FAMILIES = {
    "audio-flamingo-3": (tiny_audio_flamingo3, AudioFlamingo3Judge),
    "music-flamingo": (tiny_music_flamingo, MusicFlamingoJudge),
}


@pytest.fixture(scope="module", params=sorted(FAMILIES))
def family(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> tuple[str, Path]:
    name = request.param
    return name, FAMILIES[name][0](tmp_path_factory.mktemp(name))


@pytest.fixture(scope="module")
def clips(tmp_path_factory: pytest.TempPathFactory) -> dict[str, AudioRef]:
    root = tmp_path_factory.mktemp("clips")
    return {
        "short": write_tone(root / "short.wav", 0.5, 330.0),
        "long": write_tone(root / "long.wav", 3.3, 440.0),  # two 2 s windows of the tiny model
        "other": write_tone(root / "other.wav", 0.5, 1500.0),
    }


def judge(family: tuple[str, Path]) -> LocalJudge:
    name, checkpoint = family
    provider = create_provider(provider_config(name=name, model=str(checkpoint), max_tokens=5))
    assert isinstance(provider, FAMILIES[name][1])
    return provider


def test_inputs_equal_the_transformers_processor(
    family: tuple[str, Path], clips: dict[str, AudioRef]
) -> None:
    """The judge's inputs equal what the checkpoint's full processor (AutoProcessor, chat
    template included) makes of the same conversation end to end."""
    from transformers import AutoProcessor

    provider = judge(family)
    loaded = provider.load()
    processor = AutoProcessor.from_pretrained(family[1])
    for clip in (clips["short"], clips["long"]):
        request = judge_request(SYSTEM, "A calm chat.", [clip])
        ours = provider.encode(loaded, [request])
        audio = read_mono(clip.path, 16000)
        content = [
            {"type": "text", "text": p} if isinstance(p, str) else {"type": "audio", "audio": audio}
            for p in request.parts
        ]
        conversation = [
            {"role": "system", "content": [{"type": "text", "text": SYSTEM}]},
            {"role": "user", "content": content},
        ]
        theirs = processor.apply_chat_template(
            conversation, tokenize=True, add_generation_prompt=True, return_dict=True
        )
        assert torch.equal(ours["input_ids"], theirs["input_ids"])
        assert torch.equal(ours["input_features_mask"], theirs["input_features_mask"])
        torch.testing.assert_close(ours["input_features"], theirs["input_features"])


def test_audio_reaches_the_model(family: tuple[str, Path], clips: dict[str, AudioRef]) -> None:
    provider = judge(family)
    loaded = provider.load()

    def logits(clip: AudioRef) -> torch.Tensor:
        inputs = provider.encode(loaded, [judge_request(SYSTEM, "Chat.", [clip])])
        with torch.inference_mode():
            return loaded.model(**inputs).logits[0, -1]

    inputs = provider.encode(loaded, [judge_request(SYSTEM, "Chat.", [clips["long"]])])
    placeholders = int((inputs["input_ids"] == loaded.model.config.audio_token_id).sum())
    # 3.3 s -> windows of 200 + 130 mel frames -> 330 frames -> 165 after the conv -> 82 after
    # pooling; the forward pass below would raise if that differed from the encoder output.
    assert placeholders == 82
    assert logits(clips["long"]).isfinite().all()
    assert torch.equal(logits(clips["short"]), logits(clips["short"]))
    assert not torch.allclose(logits(clips["short"]), logits(clips["other"]), atol=1e-4)


def test_batched_and_unbatched_agree(family: tuple[str, Path], clips: dict[str, AudioRef]) -> None:
    provider = judge(family)
    requests = [
        judge_request(SYSTEM, "Short.", [clips["short"]]),
        judge_request(SYSTEM, "A longer conversation about a rainy walk home.", [clips["long"]]),
    ]
    batched = provider.generate_batch(requests)
    alone = [provider.generate_batch([r])[0] for r in requests]
    assert [r.text for r in batched] == [r.text for r in alone]


def test_more_than_one_clip_per_prompt_is_refused(
    family: tuple[str, Path], clips: dict[str, AudioRef]
) -> None:
    provider = judge(family)
    request = judge_request(SYSTEM, "Rank these.", [clips["short"], clips["other"]])
    with pytest.raises(ProviderError, match="at most 1 clip") as caught:
        provider.generate_batch([request])
    assert not caught.value.transient
