"""The calls of a run and how their answers become records.

A judge is asked rendered prompts (one per candidate, or one per item for joint variants)
and its text is parsed, with re-asks while it is unusable; a scorer is asked one similarity
request per item. `call_plan` is the one place where the kinds part ways; with `rerank:` a
scorer ranks every candidate first and the judge orders only its top K.
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from harness.answering import Answerer, RunStats, ask_until_parsed
from harness.audio import audio_ref
from harness.cache import ResponseCache, request_key
from harness.config import ExperimentConfig
from harness.context_audio import context_excerpt
from harness.dataset import Dataset, Item
from harness.errors import HarnessError
from harness.fewshot import Example, check_no_leak, few_shot_options, load_examples
from harness.prompts import template_hash
from harness.records import Record
from harness.types import (
    AudioRef,
    ChatRequest,
    ProviderError,
    Request,
    ScoreCandidate,
    ScoreRequest,
)
from harness.variants import PromptContext, PromptVariant, get_variant
from providers import Provider, Scorer, create_provider

SummaryOf = Callable[[Item], str | None]


@dataclass(frozen=True)
class Call:
    """One model call to answer: from the cache if its key is there."""

    item_id: str
    repeat: int
    candidates: tuple[str, ...]
    request: Request
    key: str


def check_inputs(config: ExperimentConfig, dataset: Dataset, kind: str) -> None:
    """Refuse, before any call, a run whose items lack what its inputs send: a candidate's
    audio (naming the clip), a query, a dialogue or context audio (naming the item)."""
    inputs = config.inputs
    if inputs.music == "audio":
        for item in dataset.items:
            for cid in item.candidates:
                if not dataset.clips[cid].has_audio:
                    raise HarnessError(
                        f"clip {cid} (item {item.id}) has no audio (a text-only candidate): "
                        "use inputs music: caption"
                    )
    needs = {"query": "a query", "full": "a dialogue"}.get(inputs.dialogue)
    if needs:
        lacking = [
            item.id
            for item in dataset.items
            if not (item.query if inputs.dialogue == "query" else item.dialogue)
        ]
        if lacking:
            raise HarnessError(
                f"inputs.dialogue: {inputs.dialogue} needs {needs} in every item; "
                f"{len(lacking)} lack one (first: {lacking[0]})"
            )
    if inputs.context_audio:
        if kind != "judge":
            raise HarnessError("inputs.context_audio: the item's own audio goes to judges only")
        lacking = [item.id for item in dataset.items if not item.context_audio]
        if lacking:
            raise HarnessError(
                f"inputs.context_audio: true needs context_audio in every item; "
                f"{len(lacking)} lack it (first: {lacking[0]}); import with --only-with-audio"
            )


class CallPlan(ABC):
    """What a run asks its provider, item by item, and how it records the answers."""

    variant: PromptVariant | None = None

    def __init__(
        self, config: ExperimentConfig, provider: Provider, workdir: Path | None = None
    ) -> None:
        self.config = config
        self.provider = provider
        self.workdir = workdir or Path(".")

    def examples(self, dataset: Dataset) -> tuple[Example, ...]:
        """Worked examples the prompts show (few-shot variants); none by default."""
        return ()

    async def prepare(
        self, dataset: Dataset, cache: ResponseCache, summary_of: SummaryOf = lambda _: None
    ) -> None:
        """Work a run needs done before its calls can be rendered (none by default)."""
        return None

    def extra_stats(self) -> dict[str, Any]:
        """What the plan counted besides the run's own calls (for run.json)."""
        return {}

    @abstractmethod
    def calls(self, dataset: Dataset, summary_of: SummaryOf) -> Iterator[Call]:
        """The run's calls one at a time, so that the first can be sent while the rest are
        still being prepared."""

    @abstractmethod
    async def record(self, call: Call, answerer: Answerer) -> Record:
        """Answer `call` through the call path and turn the answer into a record."""

    @staticmethod
    def _empty_record(call: Call) -> Record:
        return Record(
            item_id=call.item_id,
            candidates=list(call.candidates),
            repeat=call.repeat,
            scores=dict.fromkeys(call.candidates),
        )


class JudgeCalls(CallPlan):
    def __init__(
        self, config: ExperimentConfig, provider: Provider, workdir: Path | None = None
    ) -> None:
        super().__init__(config, provider, workdir)
        self.variant = get_variant(config.prompt)
        self.parse = self.variant.parser(config.prompt_options)

    def examples(self, dataset: Dataset) -> tuple[Example, ...]:
        """Few-shot examples; refused if one of them is evaluated in this run."""
        assert self.variant is not None
        if not self.variant.uses_examples:
            return ()
        options = few_shot_options(self.config.prompt_options)
        examples = load_examples(self.config.prompt_options, self.config.dataset)
        check_no_leak(
            examples,
            dataset.items,
            self.config.dataset,
            dataset.clips,
            allow_clip_overlap=options.allow_clip_overlap,
        )
        return examples

    def calls(self, dataset: Dataset, summary_of: SummaryOf) -> Iterator[Call]:
        examples = tuple(replace(e, summary=summary_of(e.item)) for e in self.examples(dataset))
        for repeat in range(self.config.repeats):
            for item in dataset.items:
                yield from self.item_calls(item, repeat, dataset, summary_of, examples)

    def item_calls(
        self,
        item: Item,
        repeat: int,
        dataset: Dataset,
        summary_of: SummaryOf,
        examples: tuple[Example, ...] = (),
    ) -> Iterator[Call]:
        variant = self.variant
        assert variant is not None
        config = self.config
        context_audio: tuple[AudioRef, ...] = ()
        if config.inputs.context_audio:
            folder = self.workdir / "context_audio"
            budget = config.context_audio_budget
            excerpt = context_excerpt(item, dataset.root, budget, seed=config.seed, folder=folder)
            context_audio = (excerpt,)
        ctx = PromptContext(
            item=item,
            clips=dataset.clips,
            dialogue_mode=config.inputs.dialogue,
            music_mode=config.inputs.music,
            summary=summary_of(item),
            repeat=repeat,
            options=config.prompt_options,
            examples=examples,
            seed=config.seed,
            context_audio=context_audio,
        )
        identity = self.provider.identity()
        hashed = template_hash(variant.template)
        for prepared in variant.prepare(ctx):
            request = ChatRequest(prepared.prompt.system, prepared.prompt.parts, prepared.schema)
            key = request_key(
                identity,
                request,
                template=hashed,
                repeat=repeat if not self.provider.deterministic else None,
            )
            yield Call(item.id, repeat, prepared.candidates, request, key)

    async def record(self, call: Call, answerer: Answerer) -> Record:
        assert isinstance(call.request, ChatRequest)
        candidates = list(call.candidates)
        asked = await ask_until_parsed(
            answerer,
            call.key,
            call.request,
            lambda text: self.parse(text, candidates),
            reask=self.config.provider.reask,
        )
        record = self._empty_record(call)
        record.cache_hit = asked.cache_hit
        record.input_tokens, record.output_tokens = asked.input_tokens, asked.output_tokens
        record.latency_s = asked.latency_s
        record.extra.update(asked.extra)
        if len(candidates) > 1 and self.config.prompt_options.get("order") == "permuted":
            record.extra["order_seed"] = self.config.seed  # with item id and repeat
        record.attempts = asked.attempts
        if asked.error is not None:
            record.error = answerer.stats.failed(asked.error)
        if asked.parsed is not None:
            record.raw = asked.text
            record.scores = asked.parsed.scores
            record.parse_error = asked.parsed.error
            record.extra.update(asked.parsed.extra)
        return record


class ScorerCalls(CallPlan):
    def __init__(
        self, config: ExperimentConfig, provider: Provider, workdir: Path | None = None
    ) -> None:
        super().__init__(config, provider, workdir)
        self._fitted: str | None = None

    def query(self, item: Item, summary_of: SummaryOf) -> str:
        """The text on the query side: the dialogue, its summary, or the item's query."""
        mode = self.config.inputs.dialogue
        if mode == "query":
            return item.query or ""
        if mode == "summary":
            summary = summary_of(item)
            if summary is not None:
                return summary
        if mode == "none":
            raise HarnessError("a scorer needs text on the query side (inputs.dialogue)")
        return item.dialogue_text()

    def calls(self, dataset: Dataset, summary_of: SummaryOf) -> Iterator[Call]:
        provider = self.provider
        self._fitted = provider.fit(dataset.items) if isinstance(provider, Scorer) else None
        for repeat in range(self.config.repeats):
            for item in dataset.items:
                yield self.item_call(item, repeat, dataset, summary_of)

    def item_call(self, item: Item, repeat: int, dataset: Dataset, summary_of: SummaryOf) -> Call:
        sampled = not self.provider.deterministic
        music = self.config.inputs.music
        candidates = tuple(
            ScoreCandidate(
                cid,
                dataset.clips[cid].text,
                audio_ref(cid, dataset.clips[cid].path) if music == "audio" else None,
            )
            for cid in item.candidates
        )
        request = ScoreRequest(self.query(item, summary_of), candidates, music, item.id, repeat)
        fitted: dict[str, Any] = {"fitted": self._fitted} if self._fitted else {}
        key = request_key(
            self.provider.identity(),
            request,
            item=item.id if sampled or self._fitted else None,
            repeat=repeat if sampled else None,
            **fitted,
        )
        return Call(item.id, repeat, item.candidates, request, key)

    async def record(self, call: Call, answerer: Answerer) -> Record:
        record = self._empty_record(call)
        try:
            answer, hit = await answerer.answer(call.key, call.request)
        except ProviderError as exc:
            record.error = answerer.stats.failed(exc)
            return record
        record.cache_hit = hit
        record.latency_s = answer.get("latency_s")
        extra: dict[str, Any] = answer.get("extra") or {}
        record.extra.update(extra)
        record.scores = dict(zip(call.candidates, answer["scores"], strict=True))
        return record


class RerankCalls(CallPlan):
    """`rerank: {retriever, top}`: the retriever (a scorer) scores every candidate of an item
    first; the judge is asked about the retriever's `top` candidates only (highest first,
    earlier candidates first among ties), and the others keep the retriever's order below
    every judged one. Each item gets one record for the others (`extra.stage: retriever`,
    with every retriever score) besides the judge's records."""

    def __init__(
        self, config: ExperimentConfig, provider: Provider, workdir: Path | None = None
    ) -> None:
        super().__init__(config, provider, workdir)
        assert config.rerank is not None
        self.top = config.rerank.top
        self.judge = JudgeCalls(config, provider, workdir)
        self.variant = self.judge.variant
        self.retriever = create_provider(config.rerank.retriever)
        retrieval = config.model_copy(update={"provider": config.rerank.retriever, "rerank": None})
        self.retrieval = ScorerCalls(retrieval, self.retriever, workdir)
        self.retriever_stats = RunStats()
        self._retrieved: dict[tuple[int, str], tuple[Call, Record]] = {}

    def examples(self, dataset: Dataset) -> tuple[Example, ...]:
        return self.judge.examples(dataset)

    async def prepare(
        self, dataset: Dataset, cache: ResponseCache, summary_of: SummaryOf = lambda _: None
    ) -> None:
        """Score every item with the retriever (from the cache where it can)."""
        answerer = Answerer(self.retriever, self.retriever.config, cache, self.retriever_stats)
        calls = list(self.retrieval.calls(dataset, summary_of))
        try:
            records = await asyncio.gather(*(self.retrieval.record(c, answerer) for c in calls))
        finally:
            answerer.close()
            await self.retriever.aclose()
        self.retriever_stats.calls = len(records)
        self.retriever_stats.cache_hits = sum(r.cache_hit for r in records)
        self._retrieved = {
            (c.repeat, c.item_id): (c, r) for c, r in zip(calls, records, strict=True)
        }

    def calls(self, dataset: Dataset, summary_of: SummaryOf) -> Iterator[Call]:
        if not self._retrieved:
            raise HarnessError("rerank: the retriever has not scored the items (prepare first)")
        examples = tuple(replace(e, summary=summary_of(e.item)) for e in self.examples(dataset))
        for repeat in range(self.config.repeats):
            for item in dataset.items:
                retrieval, retrieved = self._retrieved[(repeat, item.id)]
                ranked = [c for c in item.candidates if retrieved.scores.get(c) is not None]
                ranked.sort(key=lambda c: -(retrieved.scores[c] or 0.0))  # stable: ties in order
                top = ranked[: self.top] if retrieved.error is None else []
                rest = tuple(c for c in item.candidates if c not in top)
                if rest:
                    yield replace(retrieval, candidates=rest)
                if top:
                    narrowed = item.model_copy(update={"candidates": tuple(top)})
                    yield from self.judge.item_calls(
                        narrowed, repeat, dataset, summary_of, examples
                    )

    async def record(self, call: Call, answerer: Answerer) -> Record:
        if isinstance(call.request, ChatRequest):
            return await self.judge.record(call, answerer)
        _, retrieved = self._retrieved[(call.repeat, call.item_id)]
        given = [retrieved.scores.get(c) for c in call.candidates]
        levels = {
            v: i for i, v in enumerate(sorted({v for v in given if v is not None}, reverse=True))
        }
        record = self._empty_record(call)
        record.scores = {
            c: None if v is None else -1.0 - levels[v]
            for c, v in zip(call.candidates, given, strict=True)
        }
        record.error, record.cache_hit = retrieved.error, retrieved.cache_hit
        record.extra = {
            "stage": "retriever",
            "retriever": self.retriever.model,
            "retriever_scores": retrieved.scores,
        }
        return record

    def extra_stats(self) -> dict[str, Any]:
        return {"retriever": self.retriever_stats.to_json()}


def call_plan(
    config: ExperimentConfig, provider: Provider, workdir: Path | None = None
) -> CallPlan:
    if config.rerank is not None:
        return RerankCalls(config, provider, workdir)
    plans: dict[str, type[CallPlan]] = {"judge": JudgeCalls, "scorer": ScorerCalls}
    return plans[provider.kind](config, provider, workdir)
