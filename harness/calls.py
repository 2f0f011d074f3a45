"""The calls of a run and how their answers become records.

A judge is asked rendered prompts (one per candidate, or one per item for joint variants)
and its text is parsed, with re-asks while it is unusable; a scorer is asked one similarity
request per item. `call_plan` is the one place where the two kinds part ways.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any

from harness.answering import Answerer, ask_until_parsed
from harness.audio import audio_ref
from harness.cache import request_key
from harness.config import ExperimentConfig
from harness.dataset import Dataset, Item
from harness.fewshot import Example, check_no_leak, few_shot_options, load_examples
from harness.prompts import template_hash
from harness.records import Record
from harness.types import ChatRequest, ProviderError, Request, ScoreCandidate, ScoreRequest
from harness.variants import PromptContext, PromptVariant, get_variant
from providers import Provider

SummaryOf = Callable[[Item], str | None]


@dataclass(frozen=True)
class Call:
    """One model call to answer: from the cache if its key is there."""

    item_id: str
    repeat: int
    candidates: tuple[str, ...]
    request: Request
    key: str


class CallPlan(ABC):
    """What a run asks its provider, item by item, and how it records the answers."""

    variant: PromptVariant | None = None

    def __init__(self, config: ExperimentConfig, provider: Provider) -> None:
        self.config = config
        self.provider = provider

    def examples(self, dataset: Dataset) -> tuple[Example, ...]:
        """Worked examples the prompts show (few-shot variants); none by default."""
        return ()

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
    def __init__(self, config: ExperimentConfig, provider: Provider) -> None:
        super().__init__(config, provider)
        self.variant = get_variant(config.prompt)

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
        variant = self.variant
        assert variant is not None
        identity = self.provider.identity()
        vary_by_repeat = not self.provider.deterministic
        hashed = template_hash(variant.template)
        examples = tuple(replace(e, summary=summary_of(e.item)) for e in self.examples(dataset))
        for repeat in range(self.config.repeats):
            for item in dataset.items:
                ctx = PromptContext(
                    item=item,
                    clips=dataset.clips,
                    dialogue_mode=self.config.inputs.dialogue,
                    music_mode=self.config.inputs.music,
                    summary=summary_of(item),
                    repeat=repeat,
                    options=self.config.prompt_options,
                    examples=examples,
                    seed=self.config.seed,
                )
                for prepared in variant.prepare(ctx):
                    request = ChatRequest(
                        prepared.prompt.system, prepared.prompt.parts, prepared.schema
                    )
                    key = request_key(
                        identity,
                        request,
                        template=hashed,
                        repeat=repeat if vary_by_repeat else None,
                    )
                    yield Call(item.id, repeat, prepared.candidates, request, key)

    async def record(self, call: Call, answerer: Answerer) -> Record:
        variant = self.variant
        assert variant is not None and isinstance(call.request, ChatRequest)
        candidates = list(call.candidates)
        asked = await ask_until_parsed(
            answerer,
            call.key,
            call.request,
            lambda text: variant.parse(text, candidates),
            reask=self.config.provider.reask,
        )
        record = self._empty_record(call)
        record.cache_hit = asked.cache_hit
        record.input_tokens, record.output_tokens = asked.input_tokens, asked.output_tokens
        record.latency_s = asked.latency_s
        record.extra.update(asked.extra)
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
    def calls(self, dataset: Dataset, summary_of: SummaryOf) -> Iterator[Call]:
        identity = self.provider.identity()
        sampled = not self.provider.deterministic
        music = self.config.inputs.music
        for repeat in range(self.config.repeats):
            for item in dataset.items:
                candidates = tuple(
                    ScoreCandidate(
                        cid,
                        dataset.clips[cid].caption,
                        audio_ref(cid, dataset.clips[cid].path) if music == "audio" else None,
                    )
                    for cid in item.candidates
                )
                summary = summary_of(item)
                query = summary if summary is not None else item.dialogue_text()
                request = ScoreRequest(query, candidates, music, item.id, repeat)
                key = request_key(
                    identity,
                    request,
                    item=item.id if sampled else None,
                    repeat=repeat if sampled else None,
                )
                yield Call(item.id, repeat, item.candidates, request, key)

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


def call_plan(config: ExperimentConfig, provider: Provider) -> CallPlan:
    plans: dict[str, type[CallPlan]] = {"judge": JudgeCalls, "scorer": ScorerCalls}
    return plans[provider.kind](config, provider)
