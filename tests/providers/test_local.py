"""Shared local-provider machinery: micro-batching, the expected score from digit
probabilities, and how a run reports it (a second metrics block)."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path

import numpy as np
import pytest

from harness.cache import ResponseCache
from harness.config import ExperimentConfig, provider_config
from harness.runner import Runner
from harness.testing.tiny_models import QWEN_SPECIALS, byte_tokenizer
from harness.types import ChatRequest, ChatResponse
from providers import Judge
from providers._batching import MicroBatcher
from providers._expected_score import DigitTable, expected_score
from providers._local_settings import LocalOptions, LocalSettings
from tests.conftest import write_tiny_dataset


@pytest.fixture(scope="module")
def tokenizer() -> object:
    return byte_tokenizer(QWEN_SPECIALS, eos="<|im_end|>", pad="<|endoftext|>")


def step_logits(tokenizer: object, probs: dict[str, float], size: int) -> np.ndarray:
    """Logits whose softmax puts `probs` on the named single-byte tokens."""
    logits = np.full(size, -1e9, dtype=np.float32)
    for text, p in probs.items():
        logits[tokenizer.convert_tokens_to_ids(text)] = np.log(p)  # type: ignore[attr-defined]
    return logits


def answer(tokenizer: object, text: str) -> list[int]:
    return list(tokenizer.encode(text, add_special_tokens=False))  # type: ignore[attr-defined]


def test_digit_table_holds_the_single_digits(tokenizer: object) -> None:
    table = DigitTable.from_tokenizer(tokenizer)
    assert sorted(table.values.tolist()) == list(range(10))
    assert not table.has_ten


def test_expected_score_moves_the_greedy_score_by_the_digit_mean(tokenizer: object) -> None:
    table = DigitTable.from_tokenizer(tokenizer)
    ids = answer(tokenizer, '{"score": 7.5}')
    size = len(tokenizer)  # type: ignore[arg-type]
    start = len('{"score": ')  # one token per byte
    logits = [step_logits(tokenizer, {"x": 1.0}, size) for _ in ids]
    logits[start] = step_logits(tokenizer, {"7": 0.5, "5": 0.25, "9": 0.25}, size)
    found = expected_score(tokenizer, table, ids, logits)
    assert found is not None
    assert found["expected_score"] == pytest.approx(7.5 + (0.5 * 7 + 0.25 * 5 + 0.25 * 9) - 7)
    assert found["digit_mass"] == pytest.approx(1.0)
    assert found["digit_probs"][7] == pytest.approx(0.5)


def test_ten_spelled_with_two_tokens_takes_the_next_step_into_account(tokenizer: object) -> None:
    table = DigitTable.from_tokenizer(tokenizer)
    ids = answer(tokenizer, '{"score": 10}')
    size = len(tokenizer)  # type: ignore[arg-type]
    start = len('{"score": ')
    logits = [step_logits(tokenizer, {"x": 1.0}, size) for _ in ids]
    logits[start] = step_logits(tokenizer, {"1": 0.8, "8": 0.2}, size)
    logits[start + 1] = step_logits(tokenizer, {"0": 0.5, ".": 0.5}, size)
    found = expected_score(tokenizer, table, ids, logits)
    assert found is not None
    # P(10) = 0.8 * 0.5, P(1) = 0.4, P(8) = 0.2 -> E = 4 + 0.4 + 1.6 = 6.0; 10 + 6 - 10 = 6
    assert found["expected_score"] == pytest.approx(6.0)


def test_no_score_in_the_answer_gives_none(tokenizer: object) -> None:
    table = DigitTable.from_tokenizer(tokenizer)
    ids = answer(tokenizer, "I like it")
    logits = [np.zeros(len(tokenizer), dtype=np.float32) for _ in ids]  # type: ignore[arg-type]
    assert expected_score(tokenizer, table, ids, logits) is None


def test_micro_batcher_batches_concurrent_requests_and_keeps_order() -> None:
    threads: set[int] = set()

    def run(batch: list[int]) -> list[int]:
        threads.add(threading.get_ident())
        return [x * 10 for x in batch]

    batcher: MicroBatcher[int, int] = MicroBatcher(run, batch_size=4, wait_s=0.05)

    async def main() -> list[int]:
        return list(await asyncio.gather(*(batcher.submit(i) for i in range(10))))

    assert asyncio.run(main()) == [i * 10 for i in range(10)]
    assert batcher.batch_sizes == [4, 4, 2]
    assert threading.get_ident() not in threads


def test_micro_batcher_fails_every_request_of_a_failed_batch() -> None:
    def run(batch: list[int]) -> list[int]:
        raise RuntimeError("boom")

    batcher: MicroBatcher[int, int] = MicroBatcher(run, batch_size=2)

    async def main() -> list[object]:
        return await asyncio.gather(*(batcher.submit(i) for i in range(3)), return_exceptions=True)

    assert [type(e) for e in asyncio.run(main())] == [RuntimeError] * 3


def test_settings_defaults_and_identity() -> None:
    config = provider_config(name="qwen-omni", model="x", batch_size=2, device="cpu")
    assert isinstance(config, LocalOptions)
    settings = LocalSettings.from_options(config, "x")
    assert (settings.batch_size, settings.max_new_tokens, settings.expected_score) == (2, 64, False)
    assert settings.resolved_dtype() == "float32"
    assert "device_map" not in settings.model_kwargs()


class ScriptedJudge(Judge):
    """Answers like a local judge with expected_score on: a greedy score and its expected
    score (the greedy score of clip 0 of each item is shared, the expected one is not)."""

    async def generate(self, request: ChatRequest) -> ChatResponse:
        clip = request.audio[0].clip_id  # c<item>_<j>
        j = int(clip.split("_")[1])
        greedy = {0: 7, 1: 7, 2: 3, 3: 1}[j]
        extra = {"expected_score": greedy + 0.1 * (3 - j)}
        return ChatResponse(json.dumps({"score": greedy}), 10, 5, extra)


def test_a_run_reports_metrics_for_the_expected_score(tmp_path: Path) -> None:
    dataset = write_tiny_dataset(tmp_path / "data", n_items=2, seconds=0.2)
    config = ExperimentConfig(
        name="expected", dataset=dataset, provider=provider_config(name="mock")
    )
    runner = Runner(
        config,
        cache=ResponseCache(tmp_path / "cache"),
        results_dir=tmp_path / "results",
        provider=ScriptedJudge(config.provider),
        show_progress=False,
    )
    result = asyncio.run(runner.run())
    metrics = json.loads((result.out_dir / "metrics.json").read_text())
    assert metrics["tie_rate"] == 1.0  # greedy: clips 0 and 1 tie at the top
    assert metrics["expected_score"]["tie_rate"] == 0.0
    assert metrics["expected_score"]["metrics"]["hit@1"]["mean"] == 1.0
    assert metrics["metrics"]["hit@1"]["mean"] == 0.5
    records = [json.loads(line) for line in (result.out_dir / "records.jsonl").open()]
    assert {r["extra"]["expected_score"] for r in records} == {7.3, 7.2, 3.1, 1.0}
