"""Qwen2.5-Omni thinker on a tiny random checkpoint: the audio reaches the model, batching
changes nothing, and a whole run through the runner records garbage as parse failures."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
import torch

from harness.calls.cache import ResponseCache
from harness.config.experiment import ExperimentConfig, provider_config
from harness.core.types import AudioRef
from harness.runs.runner import Runner
from providers import create_provider
from providers.local.qwen_omni import QwenOmniJudge
from tests.conftest import write_tiny_dataset
from tests.support.tiny_models import judge_request, tiny_qwen_omni, write_tone

SYSTEM = "You rate background music for conversations."


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_qwen_omni(tmp_path_factory.mktemp("qwen-omni"))


@pytest.fixture(scope="module")
def clips(tmp_path_factory: pytest.TempPathFactory) -> dict[str, AudioRef]:
    root = tmp_path_factory.mktemp("clips")
    return {
        "short": write_tone(root / "short.wav", 0.4, 330.0),
        "long": write_tone(root / "long.wav", 1.1, 440.0),
        "other": write_tone(root / "other.wav", 0.4, 1200.0),
    }


def judge(checkpoint: Path, **extra: object) -> QwenOmniJudge:
    provider = create_provider(
        provider_config(name="qwen-omni", model=str(checkpoint), max_tokens=6, **extra)
    )
    assert isinstance(provider, QwenOmniJudge)
    return provider


def last_logits(provider: QwenOmniJudge, requests: list) -> torch.Tensor:
    loaded = provider.load()
    inputs = provider.to_device(loaded, provider.encode(loaded, requests))
    with torch.inference_mode():
        return loaded.model(**inputs).logits[:, -1, :]


def test_placeholders_match_the_audio_features(
    checkpoint: Path, clips: dict[str, AudioRef]
) -> None:
    provider = judge(checkpoint)
    loaded = provider.load()
    request = judge_request(SYSTEM, "A calm chat.", [clips["short"], clips["long"]])
    inputs = provider.encode(loaded, [request])
    config = loaded.model.config
    placeholders = int((inputs["input_ids"] == config.audio_token_id).sum())
    with torch.inference_mode():
        features = loaded.model.get_audio_features(
            inputs["input_features"], inputs["feature_attention_mask"]
        ).pooler_output
    assert placeholders == features.shape[0] > 0
    # 0.4 s and 1.1 s at 100 mel frames/s -> 40 and 110 frames -> 10 and 27 embeddings
    assert placeholders == 10 + 27
    ids = inputs["input_ids"][0].tolist()
    assert ids.count(config.audio_start_token_id) == ids.count(config.audio_end_token_id) == 2


def test_changing_the_audio_changes_the_logits(
    checkpoint: Path, clips: dict[str, AudioRef]
) -> None:
    provider = judge(checkpoint)
    one = last_logits(provider, [judge_request(SYSTEM, "Chat.", [clips["short"]])])
    same = last_logits(provider, [judge_request(SYSTEM, "Chat.", [clips["short"]])])
    other = last_logits(provider, [judge_request(SYSTEM, "Chat.", [clips["other"]])])
    assert torch.equal(one, same)
    assert not torch.allclose(one, other, atol=1e-4)


def test_batched_and_unbatched_agree(checkpoint: Path, clips: dict[str, AudioRef]) -> None:
    provider = judge(checkpoint)
    requests = [
        judge_request(SYSTEM, "Short.", [clips["short"]]),
        judge_request(SYSTEM, "A much longer conversation about a rainy walk.", [clips["long"]]),
        judge_request(SYSTEM, "Mid length text.", [clips["other"]]),
    ]
    batched = last_logits(provider, requests)
    alone = torch.cat([last_logits(provider, [r]) for r in requests])
    torch.testing.assert_close(batched, alone, atol=1e-4, rtol=1e-4)
    assert [r.text for r in provider.generate_batch(requests)] == [
        provider.generate_batch([r])[0].text for r in requests
    ]


def test_concurrent_requests_are_micro_batched(
    checkpoint: Path, clips: dict[str, AudioRef]
) -> None:
    provider = judge(checkpoint, batch_size=3, batch_wait_s=0.05)
    requests = [judge_request(SYSTEM, f"Talk {i}.", [clips["short"]]) for i in range(5)]

    async def run() -> list[str]:
        answers = await asyncio.gather(*(provider.generate(r) for r in requests))
        await provider.aclose()
        return [a.text for a in answers]

    texts = asyncio.run(run())
    assert provider.batcher.batch_sizes == [3, 2]
    assert texts == [provider.generate_batch([r])[0].text for r in requests]


def test_a_run_records_random_output_as_parse_failures(checkpoint: Path, tmp_path: Path) -> None:
    dataset = write_tiny_dataset(tmp_path / "data", n_items=2, seconds=0.3)
    config = ExperimentConfig(
        name="qwen_tiny",
        dataset=dataset,
        provider=provider_config(
            name="qwen-omni",
            model=str(checkpoint),
            max_tokens=6,
            batch_size=4,
            reask=0,
            expected_score=True,
        ),
    )
    cache = ResponseCache(tmp_path / "cache")
    result = asyncio.run(
        Runner(config, cache=cache, results_dir=tmp_path / "results", show_progress=False).run()
    )
    records = [json.loads(line) for line in (result.out_dir / "records.jsonl").open()]
    assert len(records) == 8
    assert all(r["parse_error"] and r["raw"] is not None for r in records)
    assert all(score is None for r in records for score in r["scores"].values())
    assert all(r["extra"]["expected_score"] is None for r in records)
    assert all(r["output_tokens"] == 6 and r["input_tokens"] > 0 for r in records)
    metrics = json.loads((result.out_dir / "metrics.json").read_text())
    assert metrics["coverage"] == 0.0
    assert metrics["parse_failures"] == 8
    assert "expected_score" not in metrics
