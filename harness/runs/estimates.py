"""What `harness run --dry-run` prints: each run's estimate (requests, tokens, cost and a rough
time: the calls at `max_concurrency` and `rpm`, each TYPICAL_LATENCY_S plus its output at
OUTPUT_TOKENS_PER_S; runs one after another), the API keys it lacks, and the table.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from rich.table import Table

from harness.calls.pricing import PRICES_AS_OF
from harness.core.sanitize import terminal_text

CHARS_PER_TOKEN = 4
TYPICAL_LATENCY_S = 1.5  # an API call's time to the first token, audio upload included
OUTPUT_TOKENS_PER_S = 100.0  # typical generation speed of the API models


@dataclass
class Estimate:
    name: str
    provider: str
    model: str
    requests: int = 0
    cached: int = 0
    summaries_to_generate: int = 0
    input_tokens: int = 0  # of the requests still to make (and summaries), audio included
    audio_tokens: int | None = 0  # None: the provider bills no audio tokens (local)
    output_tokens: int = 0  # typical
    output_tokens_max: int | None = None  # bound by max_tokens; None: nothing caps it
    usd: float | None = None  # typical
    usd_max: float | None = None
    batch_share: float | None = None  # share of the online price a batch job pays
    batch: bool = False  # the run sends its requests in batch jobs (`batch: true`)
    missing_key: str | None = None
    note: str = ""
    seconds: float | None = None  # the calls' typical wall time; None: not estimated
    timing: str = "n/a"  # why there is no time: "local", "batch"
    rendered: list[dict[str, Any]] = field(default_factory=list, repr=False)

    @property
    def to_call(self) -> int:
        return self.requests - self.cached


def call_seconds(calls: int, output_tokens: int, *, concurrency: int, rpm: float | None) -> float:
    """Wall time of `calls` API calls producing `output_tokens` in all, `concurrency` at a
    time, no faster than `rpm` allows."""
    if calls <= 0:
        return 0.0
    per_call = TYPICAL_LATENCY_S + output_tokens / calls / OUTPUT_TOKENS_PER_S
    seconds = math.ceil(calls / concurrency) * per_call
    if rpm:
        seconds = max(seconds, calls / rpm * 60.0)
    return seconds


def duration(seconds: float) -> str:
    """`~40 s`, `~12 min`, `~3.5 h`."""
    if seconds < 90:
        return f"~{max(1, round(seconds))} s"
    if seconds < 90 * 60:
        return f"~{round(seconds / 60)} min"
    return f"~{seconds / 3600:.1f} h"


def missing_key_lines(estimates: Sequence[Estimate]) -> list[str]:
    """One line per API key that is not set and that uncached calls need, naming the runs."""
    needing: dict[str, list[Estimate]] = {}
    for e in estimates:
        if e.missing_key and (e.to_call or e.summaries_to_generate):
            needing.setdefault(e.missing_key, []).append(e)
    lines = []
    for key, runs in needing.items():
        calls = sum(e.to_call + e.summaries_to_generate for e in runs)
        names = ", ".join(terminal_text(e.name) for e in runs)
        lines.append(
            f"[bold yellow]missing API key:[/] {key} is not set; {calls} uncached call(s) of "
            f"{len(runs)} run(s) need it: {names}"
        )
    return lines


def _range(low: float | int, high: float | int | None, money: bool = False) -> str:
    def show(value: float | int) -> str:
        return f"{value:.4f}" if money else f"{value:,}"

    if high is None:
        return f">= {show(low)}"
    return show(low) if high == low else f"{show(low)} - {show(high)}"


def _caption(output_tokens: int | None) -> str:
    per_call = (
        f"{output_tokens} output tokens per call (--output-tokens)"
        if output_tokens is not None
        else "output tokens per call: the prompt variant's typical answer plus a thinking "
        "model's typical thinking, up to max_tokens (--output-tokens fixes them)"
    )
    return (
        f"Tokens are estimates: text ~{CHARS_PER_TOKEN} chars/token, audio at the provider's "
        f"rate, {per_call}. Ranges run from typical to the max_tokens bound ('>=': nothing "
        "caps the output). Re-asks of unparsable answers come on top. Batch: the same "
        "requests in batch jobs (half price at OpenAI and Gemini; * the run has batch: "
        "true), before any prompt-cache discount. Time: the uncached calls at the run's "
        f"max_concurrency and rpm, ~{TYPICAL_LATENCY_S:g} s each plus the output at "
        f"~{OUTPUT_TOKENS_PER_S:g} tokens/s (local: depends on the machine)."
    )


def estimate_table(estimates: Sequence[Estimate], output_tokens: int | None) -> Table:
    table = Table(
        title=f"dry run: nothing was called (prices as of {PRICES_AS_OF} unless overridden)",
        title_justify="left",
        caption=_caption(output_tokens),
        caption_justify="left",
    )
    # The run's whole name (`..._full_audio` and `..._summary_audio` differ); others wrap.
    widest = max((len(e.name) for e in estimates), default=3)
    table.add_column("run", no_wrap=True, min_width=min(widest, 80))
    named = all(e.model in e.name for e in estimates)  # a sweep's names hold the model
    if not named:
        table.add_column("provider · model", overflow="fold")
    for column in ("requests", "cached", "to call", "input tokens", "audio tokens"):
        table.add_column(column, justify="right")
    for column in ("output tokens", "online (USD)", "batch (USD)", "time"):
        table.add_column(column, justify="right")
    low = high = batch_low = batch_high = 0.0
    seconds = 0.0
    bounded = timed = True
    for e in estimates:
        cost = "n/a" if e.usd is None else _range(e.usd, e.usd_max, money=True)
        batch = "n/a"
        if e.usd is not None and e.batch_share is not None:
            share = e.batch_share
            batch_max = None if e.usd_max is None else e.usd_max * share
            batch = _range(e.usd * share, batch_max, money=True) + (" *" if e.batch else "")
            batch_low += e.usd * share
            batch_high += batch_max or 0.0
        if e.usd is not None:
            low += e.usd
            high += e.usd_max if e.usd_max is not None else 0.0
            bounded = bounded and e.usd_max is not None
        if e.seconds is not None:
            seconds += e.seconds
        timed = timed and e.seconds is not None
        to_call = str(e.to_call)
        if e.summaries_to_generate:
            to_call += f" (+{e.summaries_to_generate} summaries)"
        table.add_row(
            terminal_text(e.name),
            *([] if named else [terminal_text(f"{e.provider} · {e.model}")]),
            str(e.requests),
            str(e.cached),
            to_call,
            f"{e.input_tokens:,}",
            "n/a" if e.audio_tokens is None else f"{e.audio_tokens:,}",
            _range(e.output_tokens, e.output_tokens_max),
            cost,
            batch,
            e.timing if e.seconds is None else duration(e.seconds),
        )
    if len(estimates) > 1:
        time = duration(seconds) + ("" if timed else " + local runs")
        table.add_row(
            "total",
            *([""] * (6 if named else 7)),
            _range(low, high if bounded else None, True),
            _range(batch_low, batch_high if bounded else None, True),
            time,
        )
    notes = [f"{e.name}: {e.note}." for e in estimates if e.note]
    if notes:  # missing keys are the lines above the table, not repeated here
        table.caption = "\n".join([str(table.caption), *map(terminal_text, notes)])
    return table
