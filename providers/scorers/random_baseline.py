"""Seeded uniform random scores: the chance baseline every table should carry."""

from __future__ import annotations

import hashlib

import numpy as np

from harness.core.types import ScoreRequest
from providers.base import Scorer


class RandomScorer(Scorer):
    default_model = "uniform"

    @property
    def deterministic(self) -> bool:
        return False  # each repeat draws fresh scores

    async def score(self, request: ScoreRequest) -> list[float]:
        seed_text = f"{self.config.seed or 0}:{request.item_id}:{request.repeat}"
        seed = int.from_bytes(hashlib.sha256(seed_text.encode()).digest()[:8], "little")
        rng = np.random.default_rng(seed)
        return [round(float(x), 6) for x in rng.uniform(0.0, 10.0, len(request.candidates))]
