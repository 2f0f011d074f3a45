"""Phi-4-multimodal on a tiny random checkpoint (its processor needs torchvision, so inputs
come from the feature extractor and the tokenizer, as in a real run)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import torch

from harness.config.experiment import provider_config
from harness.core.types import AudioRef
from providers import create_provider
from providers.local.phi4_multimodal import Phi4MultimodalJudge
from tests.support.tiny_models import judge_request, tiny_phi4_multimodal, write_tone

SYSTEM = "You rate background music for conversations."


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_phi4_multimodal(tmp_path_factory.mktemp("phi4"))


@pytest.fixture(scope="module")
def clips(tmp_path_factory: pytest.TempPathFactory) -> dict[str, AudioRef]:
    root = tmp_path_factory.mktemp("clips")
    return {
        "short": write_tone(root / "short.wav", 0.5, 330.0),
        "long": write_tone(root / "long.wav", 0.9, 440.0),
        "other": write_tone(root / "other.wav", 0.5, 1500.0),
    }


def judge(checkpoint: Path, **extra: object) -> Phi4MultimodalJudge:
    provider = create_provider(
        provider_config(name="phi4-multimodal", model=str(checkpoint), max_tokens=5, **extra)
    )
    assert isinstance(provider, Phi4MultimodalJudge)
    return provider


def test_placeholders_match_the_audio_embeddings(
    checkpoint: Path, clips: dict[str, AudioRef]
) -> None:
    provider = judge(checkpoint)
    loaded = provider.load()
    inputs = provider.encode(
        loaded, [judge_request(SYSTEM, "Chat.", [clips["short"], clips["long"]])]
    )
    token = loaded.model.config.audio_config.audio_token_id
    sizes = inputs["audio_embed_sizes"].tolist()
    assert int((inputs["input_ids"] == token).sum()) == sum(sizes)
    # 0.5 s and 0.9 s: 48 and 88 fbank frames (25 ms window, 10 ms hop), / 8 rounded up
    assert sizes == [6, 11]
    with torch.inference_mode():  # index_put in the audio embedding fails on a count mismatch
        assert loaded.model(**inputs).logits.isfinite().all()


def test_changing_the_audio_changes_the_logits(
    checkpoint: Path, clips: dict[str, AudioRef]
) -> None:
    provider = judge(checkpoint)
    loaded = provider.load()

    def logits(clip: AudioRef) -> torch.Tensor:
        inputs = provider.encode(loaded, [judge_request(SYSTEM, "Chat.", [clip])])
        with torch.inference_mode():
            return loaded.model(**inputs).logits[0, -1]

    # The tiny random audio path is weak (about 1e-5 on the logits) but its effect is exact:
    # the same clip gives bit-identical logits, another clip does not.
    assert torch.equal(logits(clips["short"]), logits(clips["short"]))
    assert (logits(clips["short"]) - logits(clips["other"])).abs().max() > 1e-6


def test_batched_and_unbatched_agree(checkpoint: Path, clips: dict[str, AudioRef]) -> None:
    provider = judge(checkpoint, batch_size=2)
    requests = [
        judge_request(SYSTEM, "Short.", [clips["short"]]),
        judge_request(SYSTEM, "A longer conversation about a rainy walk home.", [clips["long"]]),
    ]

    async def concurrently() -> list[str]:
        answers = await asyncio.gather(*(provider.generate(r) for r in requests))
        return [a.text for a in answers]

    batched = asyncio.run(concurrently())
    assert provider.batcher.batch_sizes == [2]
    assert batched == [provider.generate_batch([r])[0].text for r in requests]


def test_speech_lora_is_loaded_from_its_subfolder(
    checkpoint: Path, clips: dict[str, AudioRef], tmp_path: Path
) -> None:
    import shutil

    from peft import LoraConfig, get_peft_model

    with_lora = tmp_path / "phi4-lora"
    shutil.copytree(checkpoint, with_lora)
    base = judge(checkpoint, lora=None)
    lora_model = get_peft_model(
        base.load().model, LoraConfig(r=2, target_modules=["qkv_proj"], init_lora_weights=False)
    )
    lora_model.save_pretrained(with_lora / "speech-lora")
    base = judge(checkpoint, lora=None)  # fresh weights: get_peft_model wrapped the old ones
    request = [judge_request(SYSTEM, "Chat.", [clips["short"]])]

    def logits(provider: Phi4MultimodalJudge) -> torch.Tensor:
        loaded = provider.load()
        with torch.inference_mode():
            return loaded.model(**provider.encode(loaded, request)).logits[0, -1]

    adapted = judge(with_lora)
    assert adapted.identity()["lora"] == "speech-lora"
    assert not torch.allclose(logits(base), logits(adapted), atol=1e-5)
    assert torch.equal(logits(base), logits(judge(with_lora, lora=None)))


def _drop_tensor(file: Path, name_part: str) -> str:
    """Rewrite a safetensors file without its first tensor whose name holds `name_part`."""
    from safetensors.torch import load_file, save_file

    tensors = load_file(file)
    dropped = next(name for name in sorted(tensors) if name_part in name)
    del tensors[dropped]
    save_file(tensors, file, metadata={"format": "pt"})
    return dropped


def test_a_checkpoint_missing_weights_is_refused_not_filled_at_random(
    checkpoint: Path, tmp_path: Path
) -> None:
    import shutil

    from harness.core.types import ProviderError

    damaged = tmp_path / "phi4-damaged"
    shutil.copytree(checkpoint, damaged)
    dropped = _drop_tensor(damaged / "model.safetensors", "audio_embed")
    with pytest.raises(ProviderError) as caught:
        judge(damaged, lora=None).load()
    message = str(caught.value)
    assert "1 weights missing from the checkpoint" in message
    assert dropped.split(".")[-2] in message and "\n" not in message


def test_an_adapter_missing_weights_is_refused(checkpoint: Path, tmp_path: Path) -> None:
    import shutil

    from peft import LoraConfig, get_peft_model

    from harness.core.types import ProviderError

    with_lora = tmp_path / "phi4-lora"
    shutil.copytree(checkpoint, with_lora)
    lora_model = get_peft_model(
        judge(checkpoint, lora=None).load().model,
        LoraConfig(r=2, target_modules=["qkv_proj"], init_lora_weights=False),
    )
    lora_model.save_pretrained(with_lora / "speech-lora")
    dropped = _drop_tensor(with_lora / "speech-lora" / "adapter_model.safetensors", "lora_B")
    with pytest.raises(ProviderError, match="adapter weights missing") as caught:
        judge(with_lora).load()
    assert "lora_B" in str(caught.value) and dropped.split(".")[2] in str(caught.value)
