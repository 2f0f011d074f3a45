from __future__ import annotations

import asyncio

from harness.config.experiment import provider_config
from harness.core.types import ScoreCandidate, ScoreRequest
from providers import create_provider


def scores(seed: int, item: str, repeat: int) -> list[float]:
    scorer = create_provider(provider_config(name="random", seed=seed))
    candidates = tuple(ScoreCandidate(f"c{i}", "", None) for i in range(4))
    return asyncio.run(scorer.score(ScoreRequest("q", candidates, "caption", item, repeat)))  # type: ignore[attr-defined]


def test_seeded_per_item_and_repeat() -> None:
    first = scores(0, "d1", 0)
    assert first == scores(0, "d1", 0)
    assert first != scores(0, "d1", 1)
    assert first != scores(0, "d2", 0)
    assert first != scores(1, "d1", 0)
    assert all(0.0 <= s <= 10.0 for s in first) and len(set(first)) == 4
