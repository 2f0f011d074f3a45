"""`protocol: rerank` (`rerank: {retriever, top}`): a scorer ranks every candidate, the judge
reorders the scorer's top K."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

from harness.calls.answerer import Answerer
from harness.calls.cache import ResponseCache
from harness.calls.prompting.fewshot import Example
from harness.calls.stats import RunStats
from harness.config.experiment import ExperimentConfig
from harness.core.dataset import Dataset
from harness.core.errors import HarnessError
from harness.core.records import Record
from harness.core.types import ChatRequest
from harness.protocols.plans import Call, CallPlan, JudgeCalls, ScorerCalls, SummaryOf
from providers import Provider, create_provider


class RerankCalls(CallPlan):
    """The judge is asked about the retriever's `top` (ties in candidate order); the others keep the
    retriever's order below, in one record per item with `extra.stage: retriever`."""

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

    @staticmethod
    def settings(config: ExperimentConfig) -> str:
        assert config.rerank is not None
        retriever = config.rerank.retriever
        model = retriever.model or "default"
        return (
            f"the judge reorders the top {config.rerank.top} of `{retriever.name}`, model `{model}`"
        )

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

    def dry_run_calls(
        self, dataset: Dataset, summary_of: SummaryOf, cache: ResponseCache
    ) -> Iterator[Call]:
        """The judge's requests: the retriever, a local scorer, has already run for free."""
        return (c for c in self.calls(dataset, summary_of) if isinstance(c.request, ChatRequest))

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
