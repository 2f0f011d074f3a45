"""Estimated cost of API judges: a small, dated price table the experiment file can override.

Prices are USD per million tokens: `input` (text and other non-audio input), `input_audio`
(audio input; `input` when absent) and `output` (text output, thinking included). Override
or add a model in the experiment file:

    provider: {name: gemini, model: gemini-2.5-flash, prices: {input: 0.3, input_audio: 1.0, output: 2.5}}

The table is a convenience for budgeting, not a bill: check the providers' pricing pages.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

from harness.errors import ConfigError
from harness.records import Record
from harness.types import ProviderConfig

PRICES_AS_OF = "2025-09"  # standard (non-batch) paid-tier prices, prompts under 200k tokens


@dataclass(frozen=True)
class Price:
    input: float
    output: float
    input_audio: float | None = None

    def cost(self, input_tokens: int, output_tokens: int, audio_tokens: int = 0) -> float:
        """USD for a call; `input_tokens` includes the `audio_tokens`."""
        audio = min(audio_tokens, input_tokens)
        audio_rate = self.input if self.input_audio is None else self.input_audio
        usd = (input_tokens - audio) * self.input + audio * audio_rate
        return (usd + output_tokens * self.output) / 1e6


PRICES: dict[str, Price] = {
    "gemini-2.5-pro": Price(input=1.25, input_audio=1.25, output=10.0),
    "gemini-2.5-flash": Price(input=0.30, input_audio=1.00, output=2.50),
    "gemini-2.5-flash-lite": Price(input=0.10, input_audio=0.30, output=0.40),
    "gemini-2.0-flash": Price(input=0.10, input_audio=0.70, output=0.40),
    "gpt-4o-audio-preview": Price(input=2.50, input_audio=40.0, output=10.0),
    "gpt-4o-mini-audio-preview": Price(input=0.15, input_audio=10.0, output=0.60),
    "gpt-audio": Price(input=2.50, input_audio=32.0, output=10.0),
    "gpt-5-mini": Price(input=0.25, output=2.00),
}
_PRICE_KEYS = frozenset({"input", "input_audio", "output"})


def price_for(config: ProviderConfig, model: str) -> Price | None:
    """The experiment file's `prices`, else the table's entry for the model (a dated model
    id such as `gpt-4o-audio-preview-2025-06-03` takes its family's price), else None."""
    if config.prices is not None:
        unknown = set(config.prices) - _PRICE_KEYS
        if unknown or "input" not in config.prices or "output" not in config.prices:
            raise ConfigError(
                "experiment file",
                "provider.prices",
                "give USD per million tokens as {input: ..., output: ...} and optionally "
                f"input_audio (unknown keys: {sorted(unknown) or 'none'})",
            )
        return Price(**config.prices)
    name = model.removeprefix("models/")
    if name in PRICES:
        return PRICES[name]
    family = max((m for m in PRICES if name.startswith(m + "-")), key=len, default=None)
    return PRICES[family] if family else None


@dataclass
class Usage:
    calls: int = 0
    input_tokens: int = 0
    input_audio_tokens: int = 0
    output_tokens: int = 0

    def add(self, record: Record) -> None:
        self.calls += 1
        self.input_tokens += record.input_tokens or 0
        self.output_tokens += record.output_tokens or 0
        self.input_audio_tokens += int(record.extra.get("input_audio_tokens") or 0)

    def cost(self, price: Price) -> float:
        return price.cost(self.input_tokens, self.output_tokens, self.input_audio_tokens)


def run_cost(config: ProviderConfig, model: str, records: Iterable[Record]) -> dict[str, Any]:
    """Cost of a run from the tokens its records report: `usd` for all its answers (what the
    experiment costs), `usd_spent` for those not taken from the cache this time."""
    fresh, every = Usage(), Usage()
    for record in records:
        every.add(record)
        if not record.cache_hit:
            fresh.add(record)
    summary: dict[str, Any] = {
        "model": model,
        "usage": asdict(every),
        "usage_spent": asdict(fresh),
        "usd": None,
        "usd_spent": None,
    }
    try:
        price = price_for(config, model)
    except ConfigError as exc:
        summary["note"] = str(exc)
        return summary
    if price is None:
        summary["note"] = f"no price for model {model!r}: add provider.prices to estimate one"
        return summary
    summary.update(
        usd=round(every.cost(price), 6),
        usd_spent=round(fresh.cost(price), 6),
        prices=asdict(price),
        prices_source="experiment file" if config.prices is not None else PRICES_AS_OF,
    )
    return summary


def cost_line(cost: dict[str, Any] | None) -> str | None:
    """One sentence for a report, or None when there is nothing to say."""
    if not cost or cost.get("usd") is None:
        return None
    return (
        f"Estimated cost: ${cost['usd']:.4f} for all {cost['usage']['calls']} answers, "
        f"${cost['usd_spent']:.4f} of it spent by this run ({cost['usage_spent']['calls']} "
        f"answers not from the cache); prices: {cost['prices_source']}."
    )
