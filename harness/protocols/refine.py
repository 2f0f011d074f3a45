"""`protocol: refine`, two turns (MuseChat's protocol): turn 1 ranks the pool; the user replies
to its top pick (`harness.protocols.feedback`); turn 2 ranks it again (a scorer with the reply
appended to its query, a judge with the variant's second-turn template). Each call gives two
records (`extra.turn` 1 and 2); a turn 1 without a usable score leaves turn 2 `skipped`."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from harness.calls.answerer import Answerer
from harness.calls.cache import ResponseCache, Shape
from harness.calls.prompting.fewshot import Example
from harness.calls.prompting.templates import TemplateError
from harness.config.experiment import ExperimentConfig
from harness.core.dataset import Dataset, Item
from harness.core.errors import HarnessError
from harness.core.records import Record
from harness.core.types import ChatRequest
from harness.protocols.feedback import (
    Reply,
    UserSimulator,
    aspect_feedback,
    check_feedback_source,
    item_feedback,
    simulator_request,
)
from harness.protocols.plans import Call, CallPlan, JudgeCalls, ScorerCalls, SummaryOf
from providers import Provider

REPLY_PLACEHOLDER = "(the user's reply to the first pick, known after turn 1)"


def top_pick(scores: dict[str, float | None], candidates: tuple[str, ...]) -> str | None:
    """The highest-scored candidate (the earliest among equal scores), if any is scored."""
    best: str | None = None
    for cid in candidates:
        value = scores.get(cid)
        if value is not None and (best is None or value > (scores[best] or 0.0)):
            best = cid
    return best


class RefineCalls(CallPlan):
    def __init__(
        self, config: ExperimentConfig, provider: Provider, workdir: Path | None = None
    ) -> None:
        super().__init__(config, provider, workdir)
        self.judge: JudgeCalls | None = None
        self.scorer: ScorerCalls | None = None
        self.first: JudgeCalls | ScorerCalls
        if provider.kind == "judge":
            self.first = self.judge = JudgeCalls(config, provider, workdir)
        else:
            self.first = self.scorer = ScorerCalls(config, provider, workdir)
        self.variant = self.judge.variant if self.judge is not None else None
        if self.variant is not None:
            self.variant.check_protocol("refine")
        self.options = config.refine
        self.simulator: UserSimulator | None = None
        self._dataset: Dataset | None = None
        self._summary_of: SummaryOf = lambda _: None

    def examples(self, dataset: Dataset) -> tuple[Example, ...]:
        return self.first.examples(dataset)

    @staticmethod
    def settings(config: ExperimentConfig) -> str:
        return f"two turns; feedback: `{config.refine.feedback}`"

    async def prepare(
        self, dataset: Dataset, cache: ResponseCache, summary_of: SummaryOf = lambda _: None
    ) -> None:
        check_feedback_source(self.options, dataset)
        if self.options.feedback == "simulator" and self.simulator is None:
            assert self.config.user_simulator is not None  # the config requires it
            self.simulator = UserSimulator(self.config.user_simulator, cache)

    def calls(self, dataset: Dataset, summary_of: SummaryOf) -> Iterator[Call]:
        self._dataset, self._summary_of = dataset, summary_of
        return self.first.calls(dataset, summary_of)

    def second_call(self, call: Call, item: Item, pick: str, feedback: str) -> Call:
        dataset = self._require_dataset()
        if self.scorer is not None:
            query = f"{self.scorer.query(item, self._summary_of)} {feedback}"
            return self.scorer.item_call(item, call.repeat, dataset, self._summary_of, query)
        assert self.judge is not None
        (second,) = self.judge.item_calls(
            item, call.repeat, dataset, self._summary_of, first_pick=pick, feedback=feedback
        )
        return second

    async def reply(self, item: Item, pick: str) -> Reply:
        source = self.options.feedback
        if source == "item":
            return Reply(item_feedback(item), source)
        if source == "aspects":
            clips = self._require_dataset().clips
            return Reply(aspect_feedback(item, clips, pick, self.options), source)
        if self.simulator is None:
            raise HarnessError("refine feedback: simulator: the simulator was not prepared")
        return await self.simulator.reply(item, self._require_dataset().clips, pick)

    async def record(self, call: Call, answerer: Answerer) -> Record:
        return (await self.records(call, answerer))[0]

    async def records(self, call: Call, answerer: Answerer) -> list[Record]:
        first = await self.first.record(call, answerer)
        first.extra["turn"] = 1
        item = self._require_dataset().item(call.item_id)
        pick = top_pick(first.scores, item.candidates)
        second = self._empty_record(call)
        second.extra["turn"] = 2
        if pick is None:
            second.extra["skipped"] = "turn 1 gave no usable score, so there is no first pick"
            return [first, second]
        reply = await self.reply(item, pick)
        if reply.text is None:  # the simulator failed (retried) or gave no usable reply
            failure = f"user_simulator: {reply.error}"
            if reply.raw is None:
                second.error = failure
            else:
                second.parse_error = failure
        else:
            try:
                follow_up = self.second_call(call, item, pick, reply.text)
            except TemplateError as exc:  # the reply broke the prompt: this item's turn 2 fails
                second.error = f"turn2_prompt: {exc}"
            else:
                second = await self.first.record(follow_up, answerer)
                second.extra["turn"] = 2
        second.extra.update(first_pick=pick, **reply.to_extra())
        return [first, second]

    def dry_run_calls(
        self, dataset: Dataset, summary_of: SummaryOf, cache: ResponseCache
    ) -> Iterator[Call]:
        """Turn 1, then turn 2 from the cached turn-1 answer and reply where the cache holds
        them (else the simulator's request, a placeholder pick and reply)."""
        for call in self.calls(dataset, summary_of):
            yield call
            item = dataset.item(call.item_id)
            pick = self._cached_pick(call, cache) or item.candidates[0]
            feedback: str | None = REPLY_PLACEHOLDER
            if self.options.feedback == "item":
                feedback = item_feedback(item)
            elif self.options.feedback == "aspects":
                feedback = aspect_feedback(item, dataset.clips, pick, self.options)
            elif self.simulator is not None:
                feedback = self.simulator.cached_reply(item, dataset.clips, pick)
                if feedback is None:
                    request = simulator_request(item, dataset.clips, pick)
                    key = self.simulator.key(request)
                    yield Call(item.id, call.repeat, (), request, key)
            yield self.second_call(call, item, pick, feedback or REPLY_PLACEHOLDER)

    def _cached_pick(self, call: Call, cache: ResponseCache) -> str | None:
        shape: Shape = "chat" if self.judge is not None else "scores"
        answer = cache.get(call.key, shape, len(call.candidates) if shape == "scores" else None)
        if answer is None:
            return None
        item = self._require_dataset().item(call.item_id)
        if self.judge is not None:
            assert isinstance(call.request, ChatRequest)
            parsed = self.judge.parse(answer["text"], list(call.candidates))
            return top_pick(parsed.scores, item.candidates)
        return top_pick(dict(zip(call.candidates, answer["scores"], strict=True)), item.candidates)

    def _require_dataset(self) -> Dataset:
        if self._dataset is None:
            raise HarnessError("refine: the plan's calls have not been made (calls first)")
        return self._dataset

    def extra_stats(self) -> dict[str, Any]:
        if self.simulator is None:
            return {}
        return {"user_simulator": self.simulator.answerer.stats.to_json()}

    async def aclose(self) -> None:
        if self.simulator is not None:
            await self.simulator.aclose()
