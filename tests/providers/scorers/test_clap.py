"""CLAP scorer on a tiny random checkpoint: cosine of text and audio embeddings, explicit
truncation, batching, and a whole run through the runner."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from harness.calls.cache import ResponseCache
from harness.config.experiment import ExperimentConfig, provider_config
from harness.core.audio import read_mono
from harness.core.types import AudioRef, ScoreCandidate, ScoreRequest
from harness.runs.runner import Runner
from providers import create_provider
from providers.scorers.clap import ClapScorer
from tests.conftest import write_tiny_dataset
from tests.support.tiny_models import tiny_clap, write_tone


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_clap(tmp_path_factory.mktemp("clap"))


@pytest.fixture(scope="module")
def clips(tmp_path_factory: pytest.TempPathFactory) -> list[AudioRef]:
    root = tmp_path_factory.mktemp("clips")
    return [
        write_tone(root / f"c{i}.wav", seconds, freq, 48000)
        for i, (seconds, freq) in enumerate([(0.5, 220.0), (0.7, 880.0), (2.5, 3000.0)])
    ]


def scorer(checkpoint: Path, **extra: object) -> ClapScorer:
    provider = create_provider(provider_config(name="clap", model=str(checkpoint), **extra))
    assert isinstance(provider, ClapScorer)
    return provider


def request(query: str, clips: list[AudioRef], item: str = "d0") -> ScoreRequest:
    candidates = tuple(ScoreCandidate(c.clip_id, f"caption of {c.clip_id}", c) for c in clips)
    return ScoreRequest(query, candidates, "audio", item, 0)


def test_scores_are_cosines_of_the_model_embeddings(
    checkpoint: Path, clips: list[AudioRef]
) -> None:
    provider = scorer(checkpoint)
    (scores,) = provider.score_batch([request("A quiet talk at dinner.", clips)])
    loaded = provider.load()
    text = loaded.tokenizer(["A quiet talk at dinner."], return_tensors="pt")
    with torch.inference_mode():
        t = loaded.model.get_text_features(**text).pooler_output[0]
        for clip, score in zip(clips, scores, strict=True):
            window = provider.window(loaded, read_mono(clip.path, 48000))
            features = loaded.extractor([window], sampling_rate=48000, return_tensors="pt")
            a = loaded.model.get_audio_features(features["input_features"]).pooler_output[0]
            assert score == pytest.approx(float(t @ a), abs=1e-5)
    assert len(set(scores)) == 3  # different audio, different similarity
    assert scores.extra == {"query_tokens": 25, "query_truncated": False}


def test_long_clips_are_cut_to_their_central_window(
    checkpoint: Path, clips: list[AudioRef]
) -> None:
    provider = scorer(checkpoint)
    loaded = provider.load()
    full = read_mono(clips[2].path, 48000)
    window = provider.window(loaded, full)
    assert len(window) == 48000 < len(full)  # the tiny extractor's window is 1 s
    assert np.array_equal(window, full[36000:84000])


def test_truncation_is_explicit(checkpoint: Path, clips: list[AudioRef]) -> None:
    provider = scorer(checkpoint, max_text_tokens=10)
    short, long = provider.score_batch(
        [request("Hi.", clips[:1]), request("A rather long dialogue " * 3, clips[:1], "d1")]
    )
    assert short.extra["query_truncated"] is False
    assert long.extra == {"query_tokens": 71, "query_truncated": True}
    assert provider.truncated_queries == 1
    # the cut query scores like its first ten tokens (bos + 8 bytes + eos)
    cut = provider.score_batch([request("A rather", clips[:1], "d2")])[0]
    assert list(long) == pytest.approx(list(cut), abs=1e-5)


def test_batched_and_unbatched_agree(checkpoint: Path, clips: list[AudioRef]) -> None:
    requests = [request("Rain on the window.", clips[:2]), request("A party!", clips[1:], "d1")]
    batched = scorer(checkpoint).score_batch(requests)
    alone = [scorer(checkpoint).score_batch([r])[0] for r in requests]
    for b, a in zip(batched, alone, strict=True):
        assert list(b) == pytest.approx(list(a), abs=1e-5)


def test_a_run_records_scores_and_truncation(checkpoint: Path, tmp_path: Path) -> None:
    dataset = write_tiny_dataset(tmp_path / "data", n_items=2, seconds=0.3)
    config = ExperimentConfig(
        name="clap_tiny",
        dataset=dataset,
        provider=provider_config(name="clap", model=str(checkpoint), max_text_tokens=12),
    )
    result = asyncio.run(
        Runner(
            config,
            cache=ResponseCache(tmp_path / "cache"),
            results_dir=tmp_path / "results",
            show_progress=False,
        ).run()
    )
    records = [json.loads(line) for line in (result.out_dir / "records.jsonl").open()]
    assert len(records) == 2
    assert all(r["extra"]["query_truncated"] for r in records)
    assert all(len(r["scores"]) == 4 and None not in r["scores"].values() for r in records)
    assert json.loads((result.out_dir / "metrics.json").read_text())["coverage"] == 1.0


def test_the_weights_load_in_ready_before_the_first_call_is_timed(checkpoint: Path) -> None:
    """Like ms-clap and paraclap: the call path awaits `ready()` before a call's timeout
    starts, so the first call is not charged the loading."""
    provider = scorer(checkpoint)
    assert provider._loaded is None
    asyncio.run(provider.ready())
    loaded = provider._loaded
    assert loaded is not None and provider.load() is loaded  # loaded once
