"""A run's plan (`CallPlan`): its calls and how answers become records; the judge's
(`JudgeCalls`, with re-asks) and the scorer's (`ScorerCalls`). Other protocols subclass it."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path
from typing import Any

from harness.calls.answerer import Answerer, ask_until_parsed
from harness.calls.cache import ResponseCache, request_key
from harness.calls.prompting.context_audio import context_excerpt
from harness.calls.prompting.fewshot import Example, check_no_leak, few_shot_options, load_examples
from harness.calls.prompting.templates import TemplateHashes
from harness.calls.prompting.variants import PromptContext, PromptVariant, get_variant
from harness.calls.stats import RunStats
from harness.config.experiment import ExperimentConfig
from harness.core.audio import audio_ref
from harness.core.dataset import Dataset, Item
from harness.core.errors import HarnessError
from harness.core.records import Record
from harness.core.types import (
    AudioRef,
    ChatRequest,
    ProviderConfig,
    ProviderError,
    Request,
    ScoreCandidate,
    ScoreRequest,
)
from providers import Provider, Scorer, create_provider

SummaryOf = Callable[[Item], str | None]


@dataclass(frozen=True)
class Call:
    item_id: str
    repeat: int
    candidates: tuple[str, ...]
    request: Request
    key: str
    member_keys: tuple[str, ...] = ()

    @property
    def keys(self) -> tuple[str, ...]:
        """The keys whose answers make the call: a jury's members', else its own."""
        return self.member_keys or (self.key,)


def side_answerer(
    block: ProviderConfig, cache: ResponseCache, role: str, kind: str = "judge"
) -> Answerer:
    """A call path on the run's cache for a provider used besides the run's own."""
    provider = create_provider(block)
    if provider.kind != kind:
        raise HarnessError(f"{role} {block.name!r} is not a {kind} provider")
    return Answerer(provider, block, cache, RunStats())


def check_inputs(config: ExperimentConfig, dataset: Dataset, kind: str) -> None:
    """Refuse, before any call, a run whose items lack what its inputs send."""
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
        self.template_hash = TemplateHashes()  # once per template and run, not per item

    @cached_property
    def identity(self) -> dict[str, Any]:
        return self.provider.identity()

    def examples(self, dataset: Dataset) -> tuple[Example, ...]:
        """Worked examples the prompts show (few-shot variants); none by default."""
        return ()

    async def prepare(
        self, dataset: Dataset, cache: ResponseCache, summary_of: SummaryOf = lambda _: None
    ) -> None:
        return None

    def extra_stats(self) -> dict[str, Any]:
        return {}

    @staticmethod
    def settings(config: ExperimentConfig) -> str:
        """The protocol's settings as report.md says them."""
        return ""

    @abstractmethod
    def calls(self, dataset: Dataset, summary_of: SummaryOf) -> Iterator[Call]:
        """The run's calls, lazily: the first is sent while the rest are prepared."""

    def dry_run_calls(
        self, dataset: Dataset, summary_of: SummaryOf, cache: ResponseCache
    ) -> Iterator[Call]:
        """Every request the run would send, as far as known without a model call."""
        return self.calls(dataset, summary_of)

    @abstractmethod
    async def record(self, call: Call, answerer: Answerer) -> Record: ...

    async def records(self, call: Call, answerer: Answerer) -> list[Record]:
        return [await self.record(call, answerer)]

    async def aclose(self) -> None:
        return None

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
        *,
        first_pick: str | None = None,
        feedback: str | None = None,
    ) -> Iterator[Call]:
        """The item's calls (with `first_pick` and `feedback`: a refine run's second turn)."""
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
            first_pick=first_pick,
            feedback=feedback,
        )
        identity = self.identity
        template = variant.second_turn if first_pick is not None else None
        hashed = self.template_hash(template or variant.template)
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
        extra = dict(asked.extra)
        if len(candidates) > 1 and self.config.prompt_options.get("order") == "permuted":
            extra["order_seed"] = self.config.seed  # with item id and repeat
        parsed = asked.parsed
        if parsed is not None:
            extra.update(parsed.extra)
        return Record(
            item_id=call.item_id,
            candidates=candidates,
            repeat=call.repeat,
            raw=asked.text if parsed is not None else None,
            attempts=asked.attempts,
            scores=dict.fromkeys(candidates) if parsed is None else parsed.scores,
            error=None if asked.error is None else answerer.stats.failed(asked.error),
            parse_error=None if parsed is None else parsed.error,
            cache_hit=asked.cache_hit,
            latency_s=asked.latency_s,
            input_tokens=asked.input_tokens,
            output_tokens=asked.output_tokens,
            extra=extra,
        )


class ScorerCalls(CallPlan):
    def __init__(
        self, config: ExperimentConfig, provider: Provider, workdir: Path | None = None
    ) -> None:
        super().__init__(config, provider, workdir)
        self._fitted: str | None = None

    def query(self, item: Item, summary_of: SummaryOf) -> str:
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

    def fit(self, dataset: Dataset) -> None:
        provider = self.provider
        items = dataset.items if dataset.population is None else dataset.population
        self._fitted = provider.fit(items) if isinstance(provider, Scorer) else None

    def calls(self, dataset: Dataset, summary_of: SummaryOf) -> Iterator[Call]:
        self.fit(dataset)
        for repeat in range(self.config.repeats):
            for item in dataset.items:
                yield self.item_call(item, repeat, dataset, summary_of)

    def item_call(
        self,
        item: Item,
        repeat: int,
        dataset: Dataset,
        summary_of: SummaryOf,
        query: str | None = None,
    ) -> Call:
        """The item's similarity request; `query` replaces the query side's text."""
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
        text = self.query(item, summary_of) if query is None else query
        request = ScoreRequest(text, candidates, music, item.id, repeat)
        fitted: dict[str, Any] = {"fitted": self._fitted} if self._fitted else {}
        key = request_key(
            self.identity,
            request,
            item=item.id if sampled or self._fitted else None,
            repeat=repeat if sampled else None,
            **fitted,
        )
        return Call(item.id, repeat, item.candidates, request, key)

    async def record(self, call: Call, answerer: Answerer) -> Record:
        try:
            answer, hit = await answerer.answer(call.key, call.request)
        except ProviderError as exc:
            record = self._empty_record(call)
            record.error = answerer.stats.failed(exc)
            return record
        return Record(
            item_id=call.item_id,
            candidates=list(call.candidates),
            repeat=call.repeat,
            scores=dict(zip(call.candidates, answer["scores"], strict=True)),
            cache_hit=hit,
            latency_s=answer.get("latency_s"),
            extra=dict(answer.get("extra") or {}),
        )
