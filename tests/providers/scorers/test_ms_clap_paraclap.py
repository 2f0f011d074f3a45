"""ms-clap (msclap's 2022 and 2023 models) and paraclap on tiny random weights of their exact
architectures: the weights load key for key, the audio and the text reach the scores, and a
whole run scores every candidate; both are in the registry."""

from __future__ import annotations

import asyncio
import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from harness.calls.cache import ResponseCache
from harness.cli.main import app
from harness.config.experiment import ExperimentConfig, provider_config
from harness.core.audio import read_mono
from harness.runs.runner import Runner
from providers import create_provider
from providers.scorers._two_tower import EmbeddingScorer, fit_window
from tests.conftest import write_tiny_dataset
from tests.providers.scorers._tiny_towers import tiny_ms_clap, tiny_paraclap
from tests.support.tiny_models import write_tone


@pytest.fixture(scope="module", params=["ms-clap-2022", "ms-clap-2023", "paraclap"])
def scorer_block(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dict:
    root = tmp_path_factory.mktemp(request.param)
    if request.param == "paraclap":
        weights, audio, text = tiny_paraclap(root)
        return {
            "name": "paraclap",
            "model": str(weights),
            "audio_model": str(audio),
            "text_model": str(text),
            "embedding_dim": 8,
        }
    if importlib.util.find_spec("msclap") is None:  # importing it needs torchaudio: find it
        pytest.skip("make install adds msclap (pip install --no-deps)")
    version = request.param.rsplit("-", 1)[1]
    weights, text = tiny_ms_clap(root, version)
    return {"name": "ms-clap", "model": str(weights), "version": version, "text_model": str(text)}


def make(block: dict, **extra: object) -> EmbeddingScorer:
    scorer = create_provider(provider_config(**{**block, "device": "cpu", **extra}))
    assert isinstance(scorer, EmbeddingScorer)
    return scorer


def test_the_weights_load_into_the_exact_architecture(scorer_block: dict) -> None:
    scorer = make(scorer_block)
    scorer.load()
    if scorer_block["name"] == "ms-clap":
        assert scorer.load_report == {"missing": [], "unexpected": []}  # type: ignore[attr-defined]
        model = scorer._loaded.model
        assert type(model).__module__ == "msclap.models.clap"
        encoder = {"2022": "Cnn14", "2023": "HTSATWrapper"}[scorer_block["version"]]
        assert type(model.audio_encoder.base).__name__ == encoder
    else:
        model = scorer._loaded[0]
        names = {name.split(".")[0] for name, _ in model.named_parameters()}
        assert names == {
            "audio_branch",
            "text_branch",
            "audio_projection",
            "text_projection",
            "logit_scale",
        }


def test_audio_and_text_reach_the_scores(scorer_block: dict, tmp_path: Path) -> None:
    scorer = make(scorer_block)
    loaded = scorer.load()
    low = read_mono(write_tone(tmp_path / "low.wav", 1.0, 220.0).path, scorer.sampling_rate)
    high = read_mono(write_tone(tmp_path / "high.wav", 1.0, 3000.0).path, scorer.sampling_rate)
    a, b = scorer.embed_audio(loaded, [low, high])
    assert not np.allclose(a, b, atol=1e-6)
    again = scorer.embed_audio(loaded, [low])[0]
    np.testing.assert_allclose(a, again, atol=1e-5)
    texts, counts = scorer.embed_texts(loaded, ["a calm chat.", "a loud party!"])
    assert not np.allclose(texts[0], texts[1], atol=1e-6) and all(n > 3 for n in counts)


def test_a_run_scores_every_candidate(scorer_block: dict, tmp_path: Path) -> None:
    dataset = write_tiny_dataset(tmp_path / "data", n_items=2, seconds=0.4)
    block = {**scorer_block, "batch_size": 2}
    config = ExperimentConfig(
        name="towers",
        dataset=dataset,
        provider=provider_config(**block),
        n_bootstrap=10,
    )
    cache = ResponseCache(tmp_path / "cache")
    result = asyncio.run(
        Runner(config, cache=cache, results_dir=tmp_path / "r", show_progress=False).run()
    )
    records = [json.loads(line) for line in (result.out_dir / "records.jsonl").open()]
    assert result.stats.errors == 0 and len(records) == 2
    assert all(-1.0 <= s <= 1.0 for r in records for s in r["scores"].values())
    assert all(r["extra"]["query_tokens"] > 0 for r in records)


def test_clips_fit_the_models_window() -> None:
    clip = np.arange(10, dtype=np.float32)
    assert fit_window(clip, 4).tolist() == [3, 4, 5, 6]  # the central window
    assert fit_window(clip[:3], 7).tolist() == [0, 1, 2, 0, 1, 2, 0]  # repeated, as msclap


def test_the_registry_lists_both() -> None:
    listed = CliRunner().invoke(app, ["providers"])
    assert listed.exit_code == 0
    assert "ms-clap" in listed.output and "paraclap" in listed.output
