"""Stage 2's captioning calls, made through the runner's machinery: the provider registry,
the shared response cache (same key recipe as an experiment's calls), and the runner's
concurrency limit, rate limit and retries of transient errors."""

from __future__ import annotations

import asyncio
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.cache import ResponseCache, cache_key
from harness.config import ExperimentConfig
from harness.errors import HarnessError, ProviderError
from harness.parsing import unwrap_fence
from harness.prompts import render, template_hash
from harness.secrets import scrub
from providers import ChatRequest, Judge, ProviderConfig, create_provider


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


def clean_caption(text: str) -> str:
    """The caption from an answer: plain text, or a JSON object with one string field."""
    body = unwrap_fence(text)
    if body.startswith("{"):
        try:
            value = json.loads(body)
        except json.JSONDecodeError:
            value = None
        if isinstance(value, dict):
            strings = [v for v in value.values() if isinstance(v, str)]
            if len(strings) != 1:
                raise ValueError(f"expected one text field in {sorted(value)[:5]}")
            body = strings[0]
    body = " ".join(body.split()).strip().strip("\"'“”").strip()
    body = re.sub(r"^(?:caption|summary)\s*:\s*", "", body, flags=re.IGNORECASE)
    if not body:
        raise ValueError("empty caption")
    return body


def prompt_context(dialogue: list[dict[str, str]]) -> dict[str, Any]:
    """What the summariser template sees: the same names as the judge templates."""
    return {
        "dialogue": dialogue,
        "summary": None,
        "dialogue_mode": "full",
        "music_mode": "caption",
        "options": {},
    }


def caption_dialogues(
    dialogues: list[dict[str, Any]],
    provider_config: ProviderConfig,
    *,
    template: str = "summarize.jinja",
    cache_dir: Path | None = None,
    prompts_dir: Path | None = None,
    show_progress: bool = False,
) -> CaptionOutcome:
    """A caption for each dialogue (by id); failures are listed, never turned into text."""
    from harness.runner import Runner

    provider = create_provider(provider_config)
    if not isinstance(provider, Judge):
        raise HarnessError(f"provider {provider_config.name!r} is not a chat model (judge)")
    cache = ResponseCache(cache_dir)
    # The runner supplies the call path (cache, in-flight dedup, limits, retries); its
    # experiment settings are unused here.
    runner = Runner(
        ExperimentConfig(name="stage2-captions", dataset=Path("."), provider=provider_config),
        cache=cache,
        provider=provider,
        show_progress=show_progress,
    )
    identity = provider.identity()
    hashed = template_hash(template, prompts_dir)
    outcome = CaptionOutcome()

    async def one(dialogue: dict[str, Any]) -> None:
        rendered = render(template, prompt_context(dialogue["dialogue"]), [], prompts_dir)
        request = ChatRequest(rendered.system, rendered.parts, None)
        key = cache_key(
            {
                "provider": identity,
                "system": request.system,
                "user": request.user_text,
                "audio": [],
                "schema": None,
                "template": hashed,
                "repeat": None if provider.deterministic else 0,
            }
        )
        # Like the runner: an unusable answer is asked again under a re-ask key, so a
        # re-run reuses both answers from the cache.
        keys = [key, *(f"{key}:reask{n}" for n in range(1, provider_config.reask + 1))]
        for attempt_key in keys:
            try:
                answer, hit = await runner._answer(attempt_key, request)
            except ProviderError as exc:
                outcome.errors[dialogue["id"]] = scrub(f"{exc.kind}: {exc}")
                return
            outcome.cached += hit
            try:
                outcome.captions[dialogue["id"]] = clean_caption(answer["text"])
            except ValueError as exc:
                outcome.errors[dialogue["id"]] = f"unusable answer: {exc}"
            else:
                outcome.errors.pop(dialogue["id"], None)
                return

    async def run_all() -> None:
        try:
            await asyncio.gather(*(one(d) for d in dialogues))
        finally:
            await provider.aclose()

    try:
        asyncio.run(run_all())
    finally:
        cache.close()
    outcome.model_calls = runner.stats.model_calls
    outcome.retries = runner.stats.retries
    return outcome
