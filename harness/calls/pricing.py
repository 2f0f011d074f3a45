"""Estimated cost of API judges (docs/reports.md): a dated price table (USD per million tokens)
that `provider.prices` overrides; a run's cost is its answers online without any cache
(`usd_online`), less the prompt-cache and batch discounts. For budgeting, not a bill."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

from harness.core.records import Record
from harness.core.types import ProviderConfig

PRICES_AS_OF = "2025-09"  # standard (non-batch) paid-tier prices, prompts under 200k tokens
BATCH_SHARE = 0.5  # OpenAI's Batch API and Gemini's batch mode: half the online price
_MAX_TOKENS = 10**300  # a count no call reports; past it, float arithmetic overflows


@dataclass(frozen=True)
class Price:
    input: float
    output: float
    input_audio: float | None = None
    input_cached: float | None = None
    batch: float = BATCH_SHARE

    def cost(self, input_tokens: int, output_tokens: int, audio_tokens: int = 0) -> float:
        """USD for a call online (`input_tokens` includes `audio_tokens`); inf past floats."""
        if max(input_tokens, output_tokens, audio_tokens) > _MAX_TOKENS:
            return math.inf
        audio = min(audio_tokens, input_tokens)
        audio_rate = self.input if self.input_audio is None else self.input_audio
        usd = (input_tokens - audio) * self.input + audio * audio_rate
        return (usd + output_tokens * self.output) / 1e6

    def cache_saving(self, cached_tokens: int) -> float:
        """USD saved by input tokens read from the provider's prompt cache."""
        rate = self.input if self.input_cached is None else self.input_cached
        return min(max(cached_tokens, 0), _MAX_TOKENS) * (self.input - rate) / 1e6


PRICES: dict[str, Price] = {
    "gemini-2.5-pro": Price(input=1.25, input_audio=1.25, output=10.0, input_cached=0.3125),
    "gemini-2.5-flash": Price(input=0.30, input_audio=1.00, output=2.50, input_cached=0.075),
    "gemini-2.5-flash-lite": Price(input=0.10, input_audio=0.30, output=0.40, input_cached=0.025),
    "gemini-2.0-flash": Price(input=0.10, input_audio=0.70, output=0.40, input_cached=0.025),
    "gpt-4o-audio-preview": Price(input=2.50, input_audio=40.0, output=10.0),
    "gpt-4o-mini-audio-preview": Price(input=0.15, input_audio=10.0, output=0.60),
    "gpt-audio": Price(input=2.50, input_audio=32.0, output=10.0),
    "gpt-5-mini": Price(input=0.25, output=2.00, input_cached=0.025),
}


def price_for(config: ProviderConfig, model: str) -> Price | None:
    """The experiment file's `prices`, else the model's (or a dated id's family's) entry."""
    if config.prices is not None:  # checked when the provider block was read
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
    cached_input_tokens: int = 0
    output_tokens: int = 0
    batch_calls: int = 0  # answers that came from a batch job

    def add(self, record: Record) -> None:
        self.calls += 1
        self.input_tokens += record.input_tokens or 0
        self.output_tokens += record.output_tokens or 0
        self.input_audio_tokens += int(record.extra.get("input_audio_tokens") or 0)
        self.cached_input_tokens += int(record.extra.get("cached_input_tokens") or 0)
        self.batch_calls += bool(record.extra.get("batch"))


@dataclass
class Cost:
    """USD online without any cache, and the prompt-cache and batch discounts on it."""

    online: float = 0.0
    cache_discount: float = 0.0
    batch_discount: float = 0.0

    def add(self, record: Record, price: Price) -> None:
        audio = int(record.extra.get("input_audio_tokens") or 0)
        online = price.cost(record.input_tokens or 0, record.output_tokens or 0, audio)
        saved = min(price.cache_saving(int(record.extra.get("cached_input_tokens") or 0)), online)
        self.online += online
        self.cache_discount += saved
        if record.extra.get("batch"):
            self.batch_discount += (online - saved) * (1.0 - price.batch)

    @property
    def usd(self) -> float:
        return self.online - self.cache_discount - self.batch_discount

    def to_json(self) -> dict[str, float]:
        return {
            "usd": round(self.usd, 6),
            "usd_online": round(self.online, 6),
            "cache_discount": round(self.cache_discount, 6),
            "batch_discount": round(self.batch_discount, 6),
        }


def run_cost(config: ProviderConfig, model: str, records: Iterable[Record]) -> dict[str, Any]:
    """A run's cost from its records' tokens: `usd` for all answers, `usd_spent` for those not
    from the cache, `usd_online` without any discount."""
    cost = RunCost(config, model)
    for record in records:  # one pass: the records may be read from a file
        cost.add(record)
    return cost.summary()


class RunCost:
    """`run_cost`, added up one record at a time."""

    def __init__(self, config: ProviderConfig, model: str) -> None:
        self.config, self.model = config, model
        self.jurors: list[RunCost] = []  # a jury's members, each at its own prices
        self.price, self.note = price_for(config, model), None
        if self.price is None:
            self.note = f"no price for model {model!r}: add provider.prices to estimate one"
        self.fresh, self.every = Usage(), Usage()
        self.total, self.spent = Cost(), Cost()

    def add(self, record: Record) -> None:
        jury: list[ProviderConfig] = getattr(self.config, "members", None) or []
        for i, member in enumerate(record.extra.get("members") or [] if jury else []):
            if i == len(self.jurors):
                self.jurors.append(RunCost(jury[i], member["model"]))
            keys = ("input_tokens", "output_tokens", "cache_hit")
            fields = {key: member[key] for key in keys}
            self.jurors[i].add(Record(item_id=record.item_id, candidates=[], scores={}, **fields))
        price = self.price
        self.every.add(record)
        if price is not None:
            self.total.add(record, price)
        if not record.cache_hit:
            self.fresh.add(record)
            if price is not None:
                self.spent.add(record, price)

    def summary(self) -> dict[str, Any]:
        total, spent, price = self.total, self.spent, self.price
        summary: dict[str, Any] = {
            "model": self.model,
            "usage": asdict(self.every),
            "usage_spent": asdict(self.fresh),
            "usd": None,
            "usd_spent": None,
        }
        if self.jurors:
            return self.jury_summary(summary)
        if price is None:
            summary["note"] = self.note
            return summary
        if not (math.isfinite(total.usd) and math.isfinite(spent.usd)):
            summary["note"] = "token counts too large to price (planted or damaged cache entries?)"
            return summary
        summary.update(
            total.to_json(),
            usd_spent=round(spent.usd, 6),
            prices=asdict(price),
            prices_source="experiment file" if self.config.prices is not None else PRICES_AS_OF,
        )
        return summary

    def jury_summary(self, summary: dict[str, Any]) -> dict[str, Any]:
        """A jury's cost: its members' answers, each member's at its own prices."""
        members = [juror.summary() for juror in self.jurors]
        summary["members"] = members
        if any(member["usd"] is None for member in members):
            return summary | {"note": next(m["note"] for m in members if m["usd"] is None)}
        keys = ("usd", "usd_online", "cache_discount", "batch_discount", "usd_spent")
        summary |= {key: round(sum(m[key] for m in members), 6) for key in keys}
        sources = sorted({m["prices_source"] for m in members})
        return summary | {"prices_source": " and ".join(sources)}


def cost_line(cost: dict[str, Any] | None) -> str | None:
    """One sentence for a report, or None when there is nothing to say."""
    if not cost or cost.get("usd") is None:
        return None
    saved = [
        f"${cost[key]:.4f} {name}"
        for key, name in (("batch_discount", "batch"), ("cache_discount", "prompt cache"))
        if cost.get(key)
    ]
    discounts = ""
    if saved:
        discounts = f" (${cost['usd_online']:.4f} online, less {' and '.join(saved)} discount)"
    return (
        f"Estimated cost: ${cost['usd']:.4f} for all {cost['usage']['calls']} answers"
        f"{discounts}, ${cost['usd_spent']:.4f} of it spent by this run "
        f"({cost['usage_spent']['calls']} answers not from the cache); prices: "
        f"{cost['prices_source']}."
    )
