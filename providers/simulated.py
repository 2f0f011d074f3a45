"""A seeded judge of known biases (docs/providers.md#simulated) that validates the reliability
block. Each answer is, in turn: not JSON (`malformed`), one score for all (`ties`), the order
shown (`position_bias`), a random ranking (`noise`), else its own ranking of the item (the
human one with probability `agreement`). It finds the item and its clips in the prompt."""

from __future__ import annotations

import hashlib
import json
import random
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

from pydantic import Field

from harness.core.dataset import Dataset, Item, load_dataset
from harness.core.types import ChatRequest, ChatResponse, ProviderConfig, ProviderError
from providers.base import Judge

_CAPTION = re.compile(r"^Clip(?: \d+)? \(described in words\): (.*)$", re.MULTILINE)
NOT_JSON = "I find these clips hard to compare."


@dataclass(frozen=True)
class Biases:
    position_bias: float = 0.0
    noise: float = 0.0
    agreement: float = 1.0
    ties: float = 0.0
    malformed: float = 0.0
    seed: int = 0

    def own_ranking(self, item_id: str, truth: Sequence[str]) -> list[str]:
        """The judge's fixed ranking of an item: the human one with probability `agreement`."""
        rng = random.Random(f"{self.seed}:{item_id}:own")
        agrees = rng.random() < self.agreement
        return list(truth) if agrees else rng.sample(list(truth), len(truth))

    def answer(
        self, item_id: str, truth: Sequence[str], shown: Sequence[str], draw: int
    ) -> dict[str, float] | None:
        """Scores of the clips `shown` on the `draw`-th answer to a prompt (None: not JSON)."""
        rng = random.Random(f"{self.seed}:{item_id}:{','.join(shown)}:{draw}")
        if rng.random() < self.malformed:
            return None
        if rng.random() < self.ties:
            return dict.fromkeys(shown, 5.0)
        n = len(truth)
        if len(shown) > 1 and rng.random() < self.position_bias:
            ranking = list(shown)
        elif rng.random() < self.noise:
            ranking = rng.sample(list(truth), n)
        else:
            ranking = self.own_ranking(item_id, truth)
        step = 10.0 / max(n - 1, 1)
        score = {cid: round(10.0 - step * place, 6) for place, cid in enumerate(ranking)}
        return {cid: score[cid] for cid in shown}


class SimulatedOptions(ProviderConfig):
    dataset: str = Field(description="the dataset folder whose human rankings it agrees with")
    position_bias: float = Field(default=0.0, ge=0.0, le=1.0)
    noise: float = Field(default=0.0, ge=0.0, le=1.0)
    agreement: float = Field(default=1.0, ge=0.0, le=1.0)
    ties: float = Field(default=0.0, ge=0.0, le=1.0)
    malformed: float = Field(default=0.0, ge=0.0, le=1.0)


class SimulatedJudge(Judge):
    default_model = "simulated"
    Options = SimulatedOptions
    config: SimulatedOptions

    def __init__(self, config: ProviderConfig) -> None:
        super().__init__(config)
        self._asked: Counter[str] = Counter()
        fields = set(Biases.__dataclass_fields__) - {"seed"}
        self.biases = Biases(**self.config.model_dump(include=fields), seed=self.config.seed or 0)

    @cached_property
    def dataset(self) -> Dataset:
        return load_dataset(self.config.dataset, check_audio=False)

    def _shown(self, request: ChatRequest) -> tuple[Item, list[str]]:
        """The item of the prompt and the ids of its clips in the order shown."""
        clips = self.dataset.clips
        audio = [part.clip_id for part in request.audio]
        captions = _CAPTION.findall(request.user_text)
        text = request.user_text
        for dialogue_shown in (True, False):  # the item whose dialogue it shows, if any
            for item in self.dataset.items:
                if dialogue_shown and not all(turn.text in text for turn in item.dialogue):
                    continue
                by_caption = {clips[cid].caption: cid for cid in item.candidates}
                shown = audio or [by_caption.get(caption, "") for caption in captions]
                if shown and set(shown) <= set(item.candidates):
                    return item, shown
        raise ProviderError(
            f"the simulated judge found no item of {self.config.dataset} in this prompt",
            transient=False,
            kind="bad_request",
        )

    async def generate(self, request: ChatRequest) -> ChatResponse:
        item, shown = self._shown(request)
        truth = item.human_ranking or item.candidates
        key = hashlib.sha256((request.system + request.user_text).encode()).hexdigest()
        draw = self._asked[key] if self.config.temperature > 0 else 0
        self._asked[key] += 1
        scores = self.biases.answer(item.id, truth, shown, draw)
        if scores is None:
            return ChatResponse(NOT_JSON)
        if len(shown) == 1:
            return ChatResponse(json.dumps({"score": scores[shown[0]]}))
        labels = {f"Clip {p}": scores[cid] for p, cid in enumerate(shown, start=1)}
        return ChatResponse(json.dumps({"scores": labels}))
