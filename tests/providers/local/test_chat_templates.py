"""Local judges' prompts against the official chat templates of the real checkpoints (kept in
tests/support/chat_templates/ with where each was taken from): for every family and every
registered prompt variant in every input mode, the text the judge gives its model equals what
the official template renders, and every audio placeholder is expanded into exactly as many
audio tokens as the family's audio encoder yields for that clip."""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jinja2
import pytest
import torch
from jinja2.sandbox import ImmutableSandboxedEnvironment

from harness.config.experiment import provider_config
from harness.core.dataset import Dataset
from harness.core.types import AudioRef, ChatRequest
from providers import create_provider
from providers.local._judge import LocalJudge
from tests.harness.calls.prompting.test_prompts import (
    ALL_CASES,
    request_for_case,
    write_prompt_dataset,
)
from tests.support.tiny_models import (
    BUILDERS,
    TEMPLATE_FILES,
    judge_request,
    official_chat_template,
    write_tone,
)

FAMILIES = sorted(TEMPLATE_FILES)
# What each template writes for one clip before the processor expands it.
PLACEHOLDER = {
    "qwen-omni": "<|audio_bos|><|AUDIO|><|audio_eos|>",
    "phi4-multimodal": "<|audio|>",
    "audio-flamingo-3": "<sound>",
    "music-flamingo": "<sound>",
}
ONE_CLIP_FAMILIES = {"audio-flamingo-3", "music-flamingo"}


def reference_render(template: str, messages: list[dict[str, Any]], **extra: Any) -> str:
    """The official template rendered by plain Jinja as transformers configures it
    (sandboxed, trim_blocks, lstrip_blocks), with the generation prompt."""
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)

    def raise_exception(message: str) -> None:
        raise jinja2.TemplateError(message)

    env.globals["raise_exception"] = raise_exception
    return env.from_string(template).render(
        messages=messages, add_generation_prompt=True, eos_token="<eos>", **extra
    )


def messages_of(request: ChatRequest) -> list[dict[str, Any]]:
    """The standard multimodal message form: typed text and audio parts, in order."""
    out: list[dict[str, Any]] = []
    if request.system:
        out.append({"role": "system", "content": [{"type": "text", "text": request.system}]})
    out.append(
        {
            "role": "user",
            "content": [
                {"type": "text", "text": p} if isinstance(p, str) else {"type": "audio"}
                for p in request.parts
            ],
        }
    )
    for turn in request.follow_ups:
        out.append({"role": "assistant", "content": [{"type": "text", "text": turn.answer}]})
        out.append({"role": "user", "content": [{"type": "text", "text": turn.reply}]})
    return out


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Dataset:
    return write_prompt_dataset(tmp_path_factory.mktemp("prompt_dataset"))


@pytest.fixture(scope="module")
def judges(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], LocalJudge]:
    made: dict[str, LocalJudge] = {}

    def get(family: str) -> LocalJudge:
        if family not in made:
            checkpoint = BUILDERS[family](tmp_path_factory.mktemp(family))
            judge = create_provider(provider_config(name=family, model=str(checkpoint)))
            assert isinstance(judge, LocalJudge)
            made[family] = judge
        return made[family]

    return get


@pytest.mark.parametrize("family", FAMILIES)
def test_fixtures_name_their_source(family: str) -> None:
    fixture = official_chat_template(family)
    assert fixture["provider"] == family and fixture["chat_template"]
    assert fixture["checkpoint"].count("/") == 1
    source = fixture["source"]
    assert source["repo"] == "huggingface/transformers"
    assert re.fullmatch(r"[0-9a-f]{40}", source["commit"]) and source["path"]
    assert fixture["unverified"]  # says what could not be checked here


@pytest.mark.parametrize("family", FAMILIES)
def test_the_checkpoint_carries_the_official_template(
    family: str, judges: Callable[[str], LocalJudge]
) -> None:
    judge = judges(family)
    processor = judge.load().processor
    assert processor.chat_template == official_chat_template(family)["chat_template"]
    assert type(processor).__name__ == judge.processor_class


@pytest.mark.parametrize("case", ALL_CASES)
@pytest.mark.parametrize("family", FAMILIES)
def test_every_variant_renders_as_the_official_template(
    family: str, case: str, dataset: Dataset, judges: Callable[[str], LocalJudge]
) -> None:
    request = request_for_case(dataset, case)
    for follow_ups in ((), (("not json", "Your answer could not be used: not_json."),)):
        for answer, reply in follow_ups:
            request = request.with_follow_up(answer, reply)
        judge = judges(family)
        loaded = judge.load()
        template = official_chat_template(family)["chat_template"]
        expected = reference_render(template, messages_of(request))
        assert judge.prompt(loaded, request) == expected
        clips = len(request.audio)
        placeholder = PLACEHOLDER[family]
        if family in ONE_CLIP_FAMILIES:  # one <sound> for the turn, before its text
            assert expected.count(placeholder) == min(clips, 1)
        else:
            assert expected.count(placeholder) == clips
        assert request.system in expected


@pytest.mark.parametrize("family", FAMILIES)
def test_placeholders_expand_to_the_audio_encoder_output(
    family: str, judges: Callable[[str], LocalJudge], tmp_path: Path
) -> None:
    judge = judges(family)
    loaded = judge.load()
    clips: list[AudioRef] = [write_tone(tmp_path / "a.wav", 0.7, 330.0)]
    if family not in ONE_CLIP_FAMILIES:
        clips.append(write_tone(tmp_path / "b.wav", 1.3, 550.0))
    request = judge_request("Rate the music.", "A chat.", clips)
    inputs = judge.encode(loaded, [request])
    audio_id = loaded.processor.audio_token_id
    expanded = int((inputs["input_ids"] == audio_id).sum())
    with torch.inference_mode():
        assert loaded.model(**inputs).logits.isfinite().all()  # a count mismatch raises here
        if hasattr(loaded.model, "get_audio_features"):
            accepted = inspect.signature(loaded.model.get_audio_features).parameters
            features = {k: v for k, v in inputs.items() if k in accepted}
            embeddings = loaded.model.get_audio_features(**features).pooler_output
            rows = embeddings.reshape(-1, embeddings.shape[-1]).shape[0]
        else:  # Phi-4: the audio embedding consumes exactly audio_embed_sizes per clip
            rows = int(inputs["audio_embed_sizes"].sum())
    assert expanded == rows > 0
    # Apart from the expansion, the ids are the official rendering, token for token.
    text = loaded.tokenizer.decode(inputs["input_ids"][0])
    collapsed = re.sub(f"(?:{re.escape(loaded.processor.audio_token)})+", "\0", text)
    official = reference_render(
        official_chat_template(family)["chat_template"], messages_of(request)
    ).replace(PLACEHOLDER[family], PLACEHOLDER[family].replace(loaded.processor.audio_token, "\0"))
    assert collapsed.replace("<|sound_bos|>", "").replace("<|sound_eos|>", "") == official


def test_audio_flamingo_renders_as_transformers_own_test_expects() -> None:
    # tests/models/audioflamingo3/test_processing_audioflamingo3.py, test_chat_template
    messages = [
        {
            "role": "user",
            "content": [
                {
                    "type": "text",
                    "text": "What is surprising about the relationship between the barking "
                    "and the music?",
                },
                {"type": "audio", "path": "dogs_barking_in_sync_with_the_music.wav"},
            ],
        }
    ]
    expected = (
        "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
        "<|im_start|>user\n<sound>What is surprising about the relationship between the "
        "barking and the music?<|im_end|>\n"
        "<|im_start|>assistant\n"
    )
    template = official_chat_template("audio-flamingo-3")["chat_template"]
    assert reference_render(template, messages) == expected


def test_phi4_renders_as_transformers_integration_test_writes_it() -> None:
    # tests/models/phi4_multimodal/test_modeling_phi4_multimodal.py, test_audio_text_generation
    messages = [
        {
            "role": "user",
            "content": [
                {"type": "audio"},
                {"type": "text", "text": "What is happening in this audio?"},
            ],
        }
    ]
    template = official_chat_template("phi4-multimodal")["chat_template"]
    assert reference_render(template, messages) == (
        "<|user|><|audio|>What is happening in this audio?<|end|><|assistant|>"
    )


def test_qwen_omni_default_system_and_audio_markers() -> None:
    template = official_chat_template("qwen-omni")["chat_template"]
    messages = [{"role": "user", "content": [{"type": "audio"}, {"type": "text", "text": "Hi"}]}]
    assert reference_render(template, messages) == (
        "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
        "<|im_start|>user\n<|audio_bos|><|AUDIO|><|audio_eos|>Hi<|im_end|>\n"
        "<|im_start|>assistant\n"
    )


def test_phi4_pins_the_native_revision_and_loads_no_remote_code() -> None:
    judge = create_provider(provider_config(name="phi4-multimodal"))
    fixture = official_chat_template("phi4-multimodal")
    assert judge.settings.revision == fixture["revision"] == "refs/pr/70"  # type: ignore[attr-defined]
    assert judge.identity()["revision"] == "refs/pr/70"
    assert "trust_remote_code" not in judge.settings.load_kwargs()  # type: ignore[attr-defined]
    source = (
        Path("providers/local/_processor.py").read_text()
        + Path("providers/local/_settings.py").read_text()
    )
    assert "trust_remote_code" not in source
