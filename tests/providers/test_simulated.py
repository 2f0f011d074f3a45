"""The `simulated` judge through a whole run: it finds each item and the order of its clips in
the rendered prompt, its biases show in the run's judge-reliability block (metrics.json,
report.md, and `harness report`'s page), and a repeat at temperature 0 is the cached answer."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from harness.config.experiment import ExperimentConfig
from harness.core.types import ChatRequest, ProviderError
from providers import create_provider, provider_options
from providers.simulated import Biases
from tests.conftest import load_runs, run_config


def config(dataset: Path, **provider: Any) -> ExperimentConfig:
    return ExperimentConfig.model_validate(
        {
            "name": "sim",
            "dataset": str(dataset),
            "provider": {"name": "simulated", "dataset": str(dataset), **provider},
            "prompt": "joint",
            "prompt_options": {"order": "permuted", "squares": 1},
            "inputs": {"dialogue": "full", "music": "caption"},
            "repeats": 8,
            "n_bootstrap": 50,
        }
    )


def test_a_judge_that_always_picks_the_first_clip(tiny_dataset: Path, tmp_path: Path) -> None:
    result, records = run_config(config(tiny_dataset, position_bias=1.0, temperature=0.7), tmp_path)
    assert all(r.scores[r.candidates[0]] == 10.0 for r in records)
    metrics = json.loads((result.out_dir / "metrics.json").read_text())
    block = metrics["reliability"]
    assert [rate["mean"] for rate in block["preference_fairness"]["top1_rate"]] == [1, 0, 0, 0]
    assert block["position_consistency"]["top_pick"]["mean"] == 0.0
    assert block["repetition_stability"]["top_pick_change"]["mean"] == 0.0
    report = (result.out_dir / "report.md").read_text()
    assert "## Judge reliability" in report
    assert "| top pick at position 1 (uniform 0.250) | 1.000 [1.000, 1.000] |" in report
    [run] = load_runs([result.out_dir])
    assert run.metrics_json()["reliability"] == block


def test_an_agreeing_judge_at_temperature_0(tiny_dataset: Path, tmp_path: Path) -> None:
    result, records = run_config(config(tiny_dataset), tmp_path)
    assert result.stats.model_calls == 12  # 3 items x 4 orders: a repeat of an order is cached
    for record in records:
        best = max(record.scores, key=lambda c: record.scores[c] or 0.0)
        assert best.endswith("_0")  # the tiny dataset's human first
    block = json.loads((result.out_dir / "metrics.json").read_text())["reliability"]
    assert block["not_measured"]["repetition_stability"]["set"][0] == "provider.temperature=0.7"
    assert block["position_consistency"]["tau_b"]["mean"] == 1.0


def test_a_prompt_of_no_item_of_its_dataset_is_a_permanent_failure(tiny_dataset: Path) -> None:
    judge = create_provider(provider_options({"name": "simulated", "dataset": str(tiny_dataset)}))
    with pytest.raises(ProviderError, match="found no item") as raised:
        asyncio.run(judge.generate(ChatRequest("system", ("Clip 1 (described in words): x",))))
    assert not raised.value.transient


def test_its_draws_depend_on_the_seed_item_order_and_draw() -> None:
    biases = Biases(noise=1.0, seed=3)
    first = biases.answer("d0", "abcd", "abcd", 0)
    assert first == biases.answer("d0", "abcd", "abcd", 0)
    others = [biases.answer("d0", "abcd", "abcd", draw) for draw in range(1, 6)] + [
        Biases(noise=1.0, seed=4).answer("d0", "abcd", "abcd", 0)
    ]
    assert any(other != first for other in others)
