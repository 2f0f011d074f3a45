"""`protocol: describe`, describe-then-retrieve (MetaBGM; docs/protocols): the judge writes
`{"description": ...}` once per item, a retriever (`retriever:`, default `text-embedding`)
ranks the candidates by it, and `extra.reference_cosine` is the description's cosine with the
caption of the item's most relevant candidate (`harness.scoring.description_metrics`)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from harness.calls.answerer import Answerer
from harness.calls.cache import ResponseCache, request_key
from harness.calls.stats import RunStats
from harness.config.experiment import ExperimentConfig, provider_config
from harness.core.dataset import Dataset, Item
from harness.core.errors import HarnessError
from harness.core.records import Record
from harness.core.types import ProviderConfig, ProviderError, ScoreCandidate, ScoreRequest
from harness.protocols.feedback import reference_ids
from harness.protocols.plans import Call, CallPlan, JudgeCalls, ScorerCalls, SummaryOf
from providers import Provider, create_provider

DEFAULT_RETRIEVER = "text-embedding"


class _Side:
    """A scorer used besides the run's judge, with its own call path on the run's cache."""

    def __init__(self, block: ProviderConfig) -> None:
        self.block = block
        self.provider = create_provider(block)
        self.stats = RunStats()
        self._answerer: Answerer | None = None

    def answerer(self, like: Answerer) -> Answerer:
        if self._answerer is None:
            self._answerer = Answerer(self.provider, self.block, like.cache, self.stats)
        return self._answerer

    async def aclose(self) -> None:
        if self._answerer is not None:
            self._answerer.close()
        await self.provider.aclose()


class DescribeCalls(CallPlan):
    def __init__(
        self, config: ExperimentConfig, provider: Provider, workdir: Path | None = None
    ) -> None:
        super().__init__(config, provider, workdir)
        if provider.kind != "judge":
            raise HarnessError("protocol: describe asks a judge for a description")
        self.judge = JudgeCalls(config, provider, workdir)
        self.variant = self.judge.variant
        block = config.retriever or provider_config(DEFAULT_RETRIEVER)
        self.retriever = _Side(block)
        retrieval = config.model_copy(update={"provider": block, "retriever": None})
        self.retrieval = ScorerCalls(retrieval, self.retriever.provider, workdir)
        same = block.name == DEFAULT_RETRIEVER
        self.embedder = self.retriever if same else _Side(provider_config(DEFAULT_RETRIEVER))
        self._dataset: Dataset | None = None
        self._summary_of: SummaryOf = lambda _: None

    @staticmethod
    def settings(config: ExperimentConfig) -> str:
        retriever = config.retriever or provider_config(DEFAULT_RETRIEVER)
        return f"retriever `{retriever.name}`, model `{retriever.model or 'default'}`"

    async def prepare(
        self, dataset: Dataset, cache: ResponseCache, summary_of: SummaryOf = lambda _: None
    ) -> None:
        if self.config.inputs.music == "audio" and self.retriever.block.name == DEFAULT_RETRIEVER:
            raise HarnessError(
                "protocol: describe with the text-embedding retriever compares the description "
                "with captions: set inputs.music: caption (or a musicnn retriever for audio)"
            )

    def calls(self, dataset: Dataset, summary_of: SummaryOf) -> Iterator[Call]:
        self._dataset, self._summary_of = dataset, summary_of
        self.retrieval.fit(dataset)
        return self.judge.calls(dataset, summary_of)

    async def record(self, call: Call, answerer: Answerer) -> Record:
        record = await self.judge.record(call, answerer)
        description = record.extra.get("description")
        if not isinstance(description, str):
            return record
        if self._dataset is None:
            raise HarnessError("describe: the plan's calls have not been made (calls first)")
        item = self._dataset.item(call.item_id)
        search = self.retrieval.item_call(
            item, call.repeat, self._dataset, self._summary_of, query=description
        )
        retrieved = await self.retrieval.record(search, self.retriever.answerer(answerer))
        self.retriever.stats.calls += 1
        self.retriever.stats.cache_hits += retrieved.cache_hit
        record.scores = retrieved.scores
        record.error = record.error or retrieved.error
        record.extra["retriever"] = self.retriever.provider.model
        record.extra.update({f"retriever_{k}": v for k, v in retrieved.extra.items()})
        record.extra["reference_cosine"] = await self._reference_cosine(
            item, description, call.repeat, answerer
        )
        return record

    async def _reference_cosine(
        self, item: Item, description: str, repeat: int, like: Answerer
    ) -> float | None:
        """The description's best cosine with the captions of the item's references."""
        assert self._dataset is not None
        clips = self._dataset.clips
        references = tuple(
            ScoreCandidate(cid, clips[cid].text, None) for cid in reference_ids(item)
        )
        request = ScoreRequest(description, references, "caption", item.id, repeat)
        answerer = self.embedder.answerer(like)
        key = request_key(answerer.identity, request)
        try:
            answer, _ = await answerer.answer(key, request)
        except ProviderError as exc:
            self.embedder.stats.failed(exc)
            return None
        return max(float(value) for value in answer["scores"])

    def extra_stats(self) -> dict[str, Any]:
        stats = {"retriever": self.retriever.stats.to_json()}
        if self.embedder is not self.retriever:
            stats["description_embedder"] = self.embedder.stats.to_json()
        return stats

    async def aclose(self) -> None:
        await self.retriever.aclose()
        if self.embedder is not self.retriever:
            await self.embedder.aclose()
