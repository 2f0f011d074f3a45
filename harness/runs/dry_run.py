"""`harness run --dry-run`: render every request of an experiment, count what the cache
already answers, and estimate tokens and cost of the rest, without calling any model.

Text counts about 4 characters a token, audio the provider's tokens per second. Output per
call is the variant's typical answer plus a thinking model's typical thinking, bounded by
`max_tokens`: output and cost are ranges. Summaries a `dialogue: summary` run lacks are looked
up in the cache; missing ones are counted and rendered with a placeholder. The rendered
requests go to `<results>/<experiment>.dry_run.jsonl`; no run folder is made.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Any

import soundfile
from rich.console import Console

from harness.calls.cache import ResponseCache
from harness.calls.pricing import Price, price_for
from harness.config.experiment import ExperimentConfig
from harness.core.dataset import Dataset
from harness.core.event_loop import run_coroutine
from harness.core.sanitize import terminal_text
from harness.core.sharding import Shard
from harness.core.types import AudioRef, ChatRequest, ProviderConfig
from harness.protocols.plans import Call
from harness.protocols.summaries import cached_summary, summarizer_for, summary_request
from harness.runs.estimates import (
    CHARS_PER_TOKEN,
    Estimate,
    call_seconds,
    estimate_table,
    missing_key_lines,
)
from harness.runs.runner import Runner
from providers import REGISTRY

SUMMARY_PLACEHOLDER = "(a summary the run will generate)"
SUMMARY_OUTPUT_TOKENS = 60  # one JSON sentence of 20-35 words
# Typical thinking tokens per call (billed as output): Gemini 2.5's dynamic budget, OpenAI's by effort.
GEMINI_THINKING = 1000
REASONING_BY_EFFORT = {"minimal": 50, "low": 300, "medium": 1000, "high": 3000}
_REASONING_MODELS = re.compile(r"^(gpt-5|o1|o3|o4)")


@cache
def clip_seconds(path: Path) -> float:
    info = soundfile.info(str(path))
    return float(info.frames / info.samplerate)


def text_tokens(text: str) -> int:
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def thinking_tokens(config: ProviderConfig, model: str) -> int:
    """Typical thinking tokens per call: a Gemini 2.5 `thinking_budget` when set (else the
    dynamic default; none for flash-lite), an OpenAI reasoning model's by `reasoning_effort`."""
    name = model.removeprefix("models/")
    budget = getattr(config, "thinking_budget", None)
    if name.startswith("gemini-2.5"):
        if budget is not None and budget >= 0:
            return int(budget)
        return 0 if "flash-lite" in name and budget is None else GEMINI_THINKING
    if _REASONING_MODELS.match(name):
        effort = getattr(config, "reasoning_effort", None) or "medium"
        return REASONING_BY_EFFORT[effort]
    return 0


def output_cap(runner: Runner) -> int | None:
    """`max_tokens`, or a local judge's `max_new_tokens`; None when nothing caps the output."""
    settings = getattr(runner.provider, "settings", None)
    local = getattr(settings, "max_new_tokens", None)
    cap = runner.config.provider.max_tokens or local
    return int(cap) if cap else None


def _with_summaries(runner: Runner, dataset: Dataset) -> tuple[Dataset, list[ChatRequest]]:
    """The dataset with the summaries a `dialogue: summary` run needs (its own, cached, or a
    placeholder), and the summary requests still to make."""
    if runner.config.inputs.dialogue != "summary":
        return dataset, []
    missing = [item for item in dataset.items if not item.summary]
    if not missing:
        return dataset, []
    summarizer, owned = summarizer_for(
        runner.config, runner.answerer, missing[0], Path(runner.config.dataset)
    )
    items, to_make = [], []
    try:
        for item in dataset.items:
            if not item.summary:
                found = cached_summary(summarizer, item)
                if found is None:
                    to_make.append(summary_request(item))
                item = item.model_copy(update={"summary": found or SUMMARY_PLACEHOLDER})
            items.append(item)
    finally:
        if owned:
            summarizer.close()
    return dataset.model_copy(update={"items": tuple(items)}), to_make


def estimate_run(runner: Runner, output_tokens: int | None = None) -> Estimate:
    """Estimate one run; `output_tokens` fixes the output tokens per call (else the prompt
    variant's typical answer plus the model's typical thinking)."""
    config = runner.config
    provider = runner.provider
    dataset, summaries = _with_summaries(runner, runner.dataset())
    run_coroutine(runner.prepare_plan(dataset))  # a rerank's retriever is a local scorer
    try:  # a refine run's second turns too, rendered from the cache where it can be
        calls = list(runner.plan.dry_run_calls(dataset, runner.summary_of, runner.cache))
    finally:
        run_coroutine(runner.plan.aclose())
    per_second = float(getattr(provider, "audio_tokens_per_second", 0.0))
    variant = runner.plan.variant
    thinking = thinking_tokens(config.provider, provider.model)
    cap = output_cap(runner)
    estimate = Estimate(
        config.name,
        config.provider.name,
        provider.model,
        requests=len(calls),
        summaries_to_generate=len(summaries),
        missing_key=provider.missing_key(),
    )
    lines, capped = [], 0
    for call in calls:
        cached = all(key in runner.cache for key in call.keys)
        estimate.cached += cached
        line = _describe(call, cached, per_second)
        lines.append(line)
        if not cached and isinstance(call.request, ChatRequest):
            estimate.input_tokens += line["input_tokens"]
            estimate.audio_tokens += line["audio_tokens"]
            typical = output_tokens
            if typical is None:
                answer = variant.output_tokens(len(call.candidates)) if variant else 0
                typical = answer + thinking
            estimate.output_tokens += min(typical, cap) if cap else typical
            capped += cap or 0
    for request in summaries:
        estimate.input_tokens += text_tokens(request.system) + text_tokens(request.user_text)
        estimate.output_tokens += SUMMARY_OUTPUT_TOKENS + thinking
        capped += cap or 0
    estimate.output_tokens_max = capped if cap else None
    _price(estimate, config, provider.kind, provider.model)
    if per_second == 0 and any(line.get("audio") for line in lines):
        estimate.audio_tokens = None  # sent as audio, but billed as no token count we know
    _timing(estimate, config, len(summaries))
    estimate.rendered = [{"run": config.name, **line} for line in lines]
    return estimate


def _timing(estimate: Estimate, config: ExperimentConfig, summaries: int) -> None:
    """The typical wall time of the run's uncached calls: API judges only."""
    entry = REGISTRY[config.provider.name]
    if getattr(config.provider, "batch", False):
        estimate.timing = "batch: <= 24 h"
    elif entry.kind == "judge" and entry.extra == "api":
        estimate.seconds = call_seconds(
            estimate.to_call + summaries,
            estimate.output_tokens,
            concurrency=config.provider.max_concurrency,
            rpm=config.provider.rpm,
        )
    else:
        estimate.timing = "local"


def _price(estimate: Estimate, config: ExperimentConfig, kind: str, model: str) -> None:
    if kind != "judge":
        estimate.note = "scorer: runs locally, no tokens"
        return
    price: Price | None = price_for(config.provider, model)
    if price is None:
        estimate.note = f"no price for {model!r} (add provider.prices)"
        return
    e = estimate
    e.batch_share = price.batch
    e.batch = bool(getattr(config.provider, "batch", False))
    e.usd = price.cost(e.input_tokens, e.output_tokens, e.audio_tokens or 0)
    if e.output_tokens_max is not None:
        e.usd_max = price.cost(e.input_tokens, e.output_tokens_max, e.audio_tokens or 0)


def _describe(call: Call, cached: bool, per_second: float) -> dict[str, Any]:
    line: dict[str, Any] = {
        "item_id": call.item_id,
        "candidates": list(call.candidates),
        "repeat": call.repeat,
        "cached": cached,
        "key": call.key,
    }
    request = call.request
    if not isinstance(request, ChatRequest):
        line["query"] = request.query
        return line
    audio: list[AudioRef] = list(request.audio)
    seconds = [clip_seconds(ref.path) for ref in audio]
    audio_tokens = sum(math.ceil(s * per_second) for s in seconds)
    line.update(
        system=request.system,
        user=request.user_text,
        audio=[
            {"clip_id": ref.clip_id, "sha256": ref.sha256, "seconds": round(s, 3)}
            for ref, s in zip(audio, seconds, strict=True)
        ],
        response_schema=request.response_schema,
        audio_tokens=audio_tokens,
        input_tokens=text_tokens(request.system) + text_tokens(request.user_text) + audio_tokens,
    )
    return line


def dry_run(
    configs: Sequence[ExperimentConfig],
    *,
    cache: ResponseCache,
    results_dir: Path,
    console: Console,
    output_tokens: int | None = None,
    shard: Shard | None = None,
) -> list[Estimate]:
    """Estimate every run of an experiment file (or its shard) and print one table; calls
    nothing. API keys the runs would need and that are not set are printed first."""
    estimates = []
    for config in configs:
        runner = Runner(
            config, cache=cache, results_dir=results_dir, show_progress=False, shard=shard
        )
        estimates.append(estimate_run(runner, output_tokens))
    path = results_dir / f"{configs[0].sweep or configs[0].name}.dry_run.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as handle:
        for estimate in estimates:
            for request in estimate.rendered:
                handle.write(json.dumps(request, ensure_ascii=False) + "\n")
    for line in missing_key_lines(estimates):
        console.print(line, highlight=False)
    console.print(estimate_table(estimates, output_tokens))
    console.print(f"Rendered requests: {terminal_text(path)}", highlight=False, soft_wrap=True)
    return estimates


def unset_keys(
    configs: Sequence[ExperimentConfig], *, cache: ResponseCache, results_dir: Path
) -> list[str]:
    """Why the runs cannot start: each API key that is not set while uncached calls need it
    (checked before the first call of the first run, not halfway through a sweep)."""
    estimates = []
    for config in configs:
        if REGISTRY[config.provider.name].extra != "api":
            continue  # local judges and scorers need no key
        runner = Runner(config, cache=cache, results_dir=results_dir, show_progress=False)
        if runner.provider.missing_key() is not None:
            estimates.append(estimate_run(runner))
    return [re.sub(r"\[/?[a-z ]*\]", "", line) for line in missing_key_lines(estimates)]
