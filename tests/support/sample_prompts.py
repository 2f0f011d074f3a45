"""The sample set's rendered requests, as a run sends them with captions for the music (the
real-judge tests and `python -m bench real_judge` ask the real model these)."""

from __future__ import annotations

from harness.calls.prompting.variants import PromptContext, get_variant
from harness.core.dataset import load_dataset
from harness.core.types import ChatRequest


def sample_requests(item_index: int, variant: str = "text_only") -> list[ChatRequest]:
    """The requests of the sample's item `item_index` (full dialogue, captions)."""
    dataset = load_dataset("data/sample", check_audio=False)
    item = dataset.items[item_index]
    ctx = PromptContext(
        item=item,
        clips=dataset.clips,
        dialogue_mode="full",
        music_mode="caption",
        summary=item.summary,
        options={"order": "permuted"},
    )
    return [
        ChatRequest(p.prompt.system, p.prompt.parts, p.schema)
        for p in get_variant(variant).prepare(ctx)
    ]
