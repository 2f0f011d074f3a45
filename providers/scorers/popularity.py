"""Popularity baseline (MusiCRS's own): a candidate's score is how often it appears among the
candidate lists of the run's items in the same `group` (a subreddit), so the songs a
community's threads mention most rank first. It reads no text and no audio."""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

from harness.core.types import ProviderConfig, ScoreRequest
from providers.base import Scorer

if TYPE_CHECKING:
    from harness.core.dataset import Item


class PopularityOptions(ProviderConfig):
    tie_break: Literal["order", "none"] = "none"


class PopularityScorer(Scorer):
    default_model = "group-frequency"
    Options = PopularityOptions

    def __init__(self, config: ProviderConfig) -> None:
        super().__init__(config)
        self._group_of: dict[str, str] = {}
        self._counts: dict[str, Counter[str]] = {}

    @property
    def tie_break(self) -> Literal["order", "none"]:
        assert isinstance(self.config, PopularityOptions)
        return self.config.tie_break

    def fit(self, items: Sequence[Item]) -> str:
        """Count each candidate's appearances per group (items without a group form one)."""
        self._group_of = {item.id: item.group or "" for item in items}
        self._counts = {}
        for item in items:
            self._counts.setdefault(item.group or "", Counter()).update(item.candidates)
        table = {
            "groups": {name: sorted(counts.items()) for name, counts in self._counts.items()},
            "items": self._group_of,
        }
        body = json.dumps(table, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(body.encode("utf-8")).hexdigest()

    async def score(self, request: ScoreRequest) -> list[float]:
        group = self._group_of.get(request.item_id)
        if group is None:
            raise ValueError(f"popularity was not fitted on item {request.item_id}")
        counts = self._counts[group]
        values = [float(counts[c.clip_id]) for c in request.candidates]
        if self.tie_break == "order":  # a share of one count below: earlier candidates first
            n = len(values)
            values = [value - position / n for position, value in enumerate(values)]
        return values
