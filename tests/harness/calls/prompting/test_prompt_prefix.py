"""Providers' automatic prompt caching serves the longest prefix a request shares with earlier
ones: every per-candidate template puts the system text and the dialogue (or its summary)
before anything that depends on the candidate, so an item's requests share that prefix."""

from __future__ import annotations

from dataclasses import replace

import pytest

from harness.calls.prompting.fewshot import load_examples
from harness.calls.prompting.variants import VARIANTS, PromptContext
from harness.core.dataset import Dataset
from harness.core.types import AudioRef, ChatRequest
from tests.harness.calls.prompting.test_prompts import write_prompt_dataset

POINTWISE = [
    (name, music)
    for name, variant in VARIANTS.items()
    if variant.mode == "pointwise" and name != "describe"
    for music in (("audio", "caption") if variant.sends_audio else ("caption",))
]


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Dataset:
    return write_prompt_dataset(tmp_path_factory.mktemp("prefix_dataset"))


def flat(request: ChatRequest) -> str:
    """What a provider sees in order: system text, then the user turn (audio by its bytes)."""
    parts = "".join(p if isinstance(p, str) else f"<audio {p.sha256}>" for p in request.parts)
    return request.system + "\0" + parts


def shared_prefix(a: str, b: str) -> int:
    pairs = enumerate(zip(a, b, strict=False))
    return next((i for i, (x, y) in pairs if x != y), min(len(a), len(b)))


@pytest.mark.parametrize(("name", "music"), POINTWISE)
@pytest.mark.parametrize("dialogue", ["full", "summary"])
def test_the_dialogue_is_in_the_prefix_an_items_requests_share(
    dataset: Dataset, name: str, music: str, dialogue: str
) -> None:
    item = dataset.item("t1")
    variant = VARIANTS[name]
    options = {"example_ids": ["e1"]} if variant.uses_examples else {}
    examples = load_examples(options, dataset.root) if variant.uses_examples else ()
    ctx = PromptContext(
        item=item,
        clips=dataset.clips,
        dialogue_mode=dialogue,  # type: ignore[arg-type]
        music_mode=music,  # type: ignore[arg-type]
        summary=item.summary if dialogue == "summary" else None,
        options=options,
        examples=tuple(
            replace(e, summary=e.item.summary if dialogue == "summary" else None) for e in examples
        ),
    )
    calls = variant.prepare(ctx)
    assert len(calls) == 2
    texts = [flat(ChatRequest(c.prompt.system, c.prompt.parts, c.schema)) for c in calls]
    shown = item.dialogue[-1].text if dialogue == "full" else str(item.summary)
    end_of_dialogue = texts[0].rindex(shown) + len(shown)
    assert shared_prefix(*texts) >= end_of_dialogue
    assert any(isinstance(p, AudioRef) for c in calls for p in c.prompt.parts) == (
        music == "audio" and VARIANTS[name].sends_audio
    )


def test_every_pointwise_variant_is_checked() -> None:
    checked = {name for name, _ in POINTWISE}
    assert {"zero_shot", "cot", "text_only", "rubric", "few_shot"} <= checked
