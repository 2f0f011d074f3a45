"""`harness run --dry-run`: render every request of an experiment, count what the cache
already answers, and estimate tokens and cost of the rest, without calling any model.

Token counts are estimates: text at about 4 characters a token, audio at the provider's
tokens per second of audio, and a fixed number of output tokens per call (answers of thinking
models are longer). The rendered requests go to `<results>/<run>/dry_run.jsonl`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import soundfile
from rich.console import Console
from rich.table import Table

from harness.cache import ResponseCache
from harness.calls import Call
from harness.config import ExperimentConfig
from harness.dataset import Dataset
from harness.pricing import PRICES_AS_OF, price_for
from harness.runner import Runner
from harness.types import AudioRef, ChatRequest

CHARS_PER_TOKEN = 4
DEFAULT_OUTPUT_TOKENS = 16
SUMMARY_PLACEHOLDER = "(a summary the run will generate)"


@dataclass
class Estimate:
    name: str
    provider: str
    model: str
    requests: int = 0
    cached: int = 0
    summaries_to_generate: int = 0
    input_tokens: int = 0  # of the requests still to make, audio included
    audio_tokens: int = 0
    output_tokens: int = 0
    usd: float | None = None
    note: str = ""

    @property
    def to_call(self) -> int:
        return self.requests - self.cached


@cache
def clip_seconds(path: Path) -> float:
    info = soundfile.info(str(path))
    return float(info.frames / info.samplerate)


def text_tokens(text: str) -> int:
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def _with_placeholder_summaries(runner: Runner, dataset: Dataset) -> tuple[Dataset, int]:
    """Items that lack the summary a `dialogue: summary` run would generate get a placeholder,
    so their requests can be rendered; returns how many summaries the run would generate."""
    if runner.config.inputs.dialogue != "summary":
        return dataset, 0
    missing = [item for item in dataset.items if not item.summary]
    if not missing:
        return dataset, 0
    items = [
        item if item.summary else item.model_copy(update={"summary": SUMMARY_PLACEHOLDER})
        for item in dataset.items
    ]
    return dataset.model_copy(update={"items": items}), len(missing)


def estimate_run(
    runner: Runner, output_tokens: int = DEFAULT_OUTPUT_TOKENS, write: bool = True
) -> Estimate:
    config = runner.config
    provider = runner.provider
    dataset, summaries = _with_placeholder_summaries(runner, runner.dataset())
    calls = runner.prepare(dataset)
    per_second = float(getattr(provider, "audio_tokens_per_second", 0.0))
    estimate = Estimate(
        config.name,
        config.provider.name,
        provider.model,
        requests=len(calls),
        summaries_to_generate=summaries,
    )
    lines = []
    for call in calls:
        cached = call.key in runner.cache
        estimate.cached += cached
        line = _describe(call, cached, per_second)
        lines.append(line)
        if not cached and isinstance(call.request, ChatRequest):
            estimate.input_tokens += line["input_tokens"]
            estimate.audio_tokens += line["audio_tokens"]
            estimate.output_tokens += output_tokens
    price = price_for(config.provider, provider.model)
    if provider.kind == "judge":
        if price is not None:
            estimate.usd = price.cost(
                estimate.input_tokens, estimate.output_tokens, estimate.audio_tokens
            )
        else:
            estimate.note = f"no price for {provider.model!r} (add provider.prices)"
    else:
        estimate.note = "scorer: runs locally, no tokens"
    if write:
        runner.out_dir.mkdir(parents=True, exist_ok=True)
        with (runner.out_dir / "dry_run.jsonl").open("w", encoding="utf-8") as handle:
            for line in lines:
                handle.write(json.dumps(line, ensure_ascii=False) + "\n")
    return estimate


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
    output_tokens: int = DEFAULT_OUTPUT_TOKENS,
) -> list[Estimate]:
    """Estimate every run of an experiment file and print one table; calls nothing."""
    estimates = []
    for config in configs:
        runner = Runner(config, cache=cache, results_dir=results_dir, show_progress=False)
        estimates.append(estimate_run(runner, output_tokens))
    console.print(estimate_table(estimates, output_tokens))
    return estimates


def estimate_table(estimates: Sequence[Estimate], output_tokens: int) -> Table:
    table = Table(
        title=f"dry run: nothing was called (prices as of {PRICES_AS_OF} unless overridden)",
        title_justify="left",
        caption=(
            f"Tokens are estimates: text ~{CHARS_PER_TOKEN} chars/token, audio at the provider's "
            f"rate, {output_tokens} output tokens per call (--output-tokens; thinking models "
            "use many more); re-asks of unparsable answers come on top. "
            "Rendered requests: <results>/<run>/dry_run.jsonl."
        ),
        caption_justify="left",
    )
    for column in ("run", "provider", "model", "requests", "cached", "to call"):
        table.add_column(
            column, justify="left" if column in ("run", "provider", "model") else "right"
        )
    for column in ("input tokens", "of which audio", "output tokens", "est. cost (USD)"):
        table.add_column(column, justify="right")
    total = 0.0
    for e in estimates:
        cost = "n/a" if e.usd is None else f"{e.usd:.4f}"
        if e.usd is not None:
            total += e.usd
        to_call = str(e.to_call)
        if e.summaries_to_generate:
            to_call += f" (+{e.summaries_to_generate} summaries)"
        table.add_row(
            e.name,
            e.provider,
            e.model,
            str(e.requests),
            str(e.cached),
            to_call,
            f"{e.input_tokens:,}",
            f"{e.audio_tokens:,}",
            f"{e.output_tokens:,}",
            cost,
        )
    if len(estimates) > 1:
        table.add_row("total", "", "", *([""] * 7), f"{total:.4f}")
    notes = [f"{e.name}: {e.note}." for e in estimates if e.note]
    if notes:
        table.caption = "\n".join([str(table.caption), *notes])
    return table
