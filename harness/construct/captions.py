"""Stage 2's captions: the project's summariser (`harness.protocols.summaries`, prompt
`prompts/summarize.jinja`) run through the call path (harness.calls.answerer): the provider registry, the
shared response cache with the summariser's own key recipe (so a dialogue captioned here
is not paid for again when an experiment summarises it), the concurrency limit, rate limit,
retries of transient errors and re-asks of unusable answers."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.calls.answerer import Answerer
from harness.calls.cache import ResponseCache
from harness.calls.stats import RunStats
from harness.core.dataset import Item, Turn
from harness.core.errors import HarnessError
from harness.core.types import ProviderConfig
from harness.protocols.summaries import summarize
from providers import create_provider


@dataclass
class CaptionOutcome:
    captions: dict[str, str] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    cached: int = 0
    model_calls: int = 0
    retries: int = 0

    def summary(self) -> dict[str, Any]:
        return {
            "requested": len(self.captions) + len(self.errors),
            "captioned": len(self.captions),
            "cached": self.cached,
            "model_calls": self.model_calls,
            "retries": self.retries,
            "failed": len(self.errors),
            "errors": dict(sorted(self.errors.items())[:20]),
        }


def as_item(dialogue: dict[str, Any]) -> Item:
    """A stage-2 dialogue in the shape the summariser takes (it has no candidates yet,
    and the summariser reads only the id and the turns)."""
    turns = tuple(Turn(speaker=t["speaker"], text=t["text"]) for t in dialogue["dialogue"])
    return Item.model_construct(id=dialogue["id"], dialogue=turns, candidates=())


def caption_dialogues(
    dialogues: list[dict[str, Any]],
    provider_config: ProviderConfig,
    *,
    cache_dir: Path | None = None,
) -> CaptionOutcome:
    """A caption for each dialogue (by id); failures are listed, never turned into text."""
    provider = create_provider(provider_config)
    if provider.kind != "judge":
        raise HarnessError(f"provider {provider_config.name!r} is not a chat model (judge)")
    cache = ResponseCache(cache_dir)
    stats = RunStats()
    outcome = CaptionOutcome()

    async def run_all() -> None:
        answerer = Answerer(provider, provider.config, cache, stats)
        try:
            lines = await asyncio.gather(*(summarize(answerer, as_item(d)) for d in dialogues))
        finally:
            answerer.close()
            await provider.aclose()
        for line in lines:
            if line.summary is not None:
                outcome.captions[line.item_id] = line.summary
            else:
                outcome.errors[line.item_id] = line.error or "no summary"
            outcome.cached += bool(line.cache_hit)

    try:
        asyncio.run(run_all())
    finally:
        cache.close()
    outcome.model_calls = stats.model_calls
    outcome.retries = stats.retries
    return outcome
