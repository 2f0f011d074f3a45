"""`harness run --dry-run`: every request rendered and counted, cached ones recognised,
tokens and cost estimated, and nothing called."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from harness.cache import ResponseCache
from harness.cli import app
from harness.config import ExperimentConfig
from harness.dry_run import SUMMARY_PLACEHOLDER, estimate_run
from harness.runner import Runner
from harness.testing.fake_api import FakeServer

pytestmark = pytest.mark.filterwarnings("ignore:Inheritance class Aiohttp:DeprecationWarning")


@pytest.fixture
def server() -> Iterator[FakeServer]:
    with FakeServer() as running:
        yield running


@pytest.fixture(autouse=True)
def key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GEMINI_API_KEY", "AIza-dry-run-test-key-000000000")


def experiment(dataset: Path, provider: dict[str, Any], **extra: Any) -> ExperimentConfig:
    return ExperimentConfig.model_validate(
        {"name": "dry", "dataset": str(dataset), "provider": provider, "n_bootstrap": 10, **extra}
    )


def test_estimates_without_calling(tmp_path: Path, tiny_dataset: Path, server: FakeServer) -> None:
    config = experiment(tiny_dataset, {"name": "gemini", "base_url": server.url})
    cache = ResponseCache(tmp_path / "cache")
    runner = Runner(config, cache=cache, results_dir=tmp_path / "results", show_progress=False)
    estimate = estimate_run(runner, output_tokens=10)
    assert server.stats()["requests"] == 0
    assert (estimate.requests, estimate.cached, estimate.to_call) == (12, 0, 12)
    assert estimate.audio_tokens == 12 * 16  # 0.5 s clips at 32 tokens a second
    assert estimate.input_tokens > estimate.audio_tokens and estimate.output_tokens == 120
    assert estimate.usd is not None and estimate.usd > 0
    lines = [json.loads(x) for x in (runner.out_dir / "dry_run.jsonl").read_text().splitlines()]
    assert len(lines) == 12 and not (runner.out_dir / "records.jsonl").exists()
    assert lines[0]["system"].startswith("You are a music supervisor")
    assert lines[0]["audio"][0]["clip_id"] in lines[0]["candidates"]

    asyncio.run(Runner(config, cache=cache, results_dir=tmp_path / "r2", show_progress=False).run())
    after = estimate_run(
        Runner(config, cache=cache, results_dir=tmp_path / "r3", show_progress=False), write=False
    )
    cache.close()
    assert (after.cached, after.to_call, after.input_tokens, after.usd) == (12, 0, 0, 0.0)


def test_missing_summaries_are_counted_and_rendered_with_a_placeholder(
    tmp_path: Path, tiny_dataset: Path
) -> None:
    items = [json.loads(x) for x in (tiny_dataset / "items.jsonl").read_text().splitlines()]
    del items[0]["summary"]
    (tiny_dataset / "items.jsonl").write_text("".join(json.dumps(i) + "\n" for i in items))
    config = experiment(
        tiny_dataset, {"name": "gemini"}, inputs={"dialogue": "summary", "music": "audio"}
    )
    cache = ResponseCache(tmp_path / "cache")
    runner = Runner(config, cache=cache, results_dir=tmp_path / "results", show_progress=False)
    estimate = estimate_run(runner)
    cache.close()
    assert estimate.summaries_to_generate == 1 and estimate.requests == 12
    assert SUMMARY_PLACEHOLDER in (runner.out_dir / "dry_run.jsonl").read_text()


def test_models_without_a_price_and_scorers(tmp_path: Path, tiny_dataset: Path) -> None:
    cache = ResponseCache(tmp_path / "cache")
    judge = experiment(
        tiny_dataset,
        {"name": "openai-compatible", "model": "x", "base_url": "http://127.0.0.1:9/v1"},
    )
    priced = experiment(
        tiny_dataset,
        {
            "name": "openai-compatible",
            "model": "x",
            "base_url": "http://127.0.0.1:9/v1",
            "prices": {"input": 1, "output": 1},
        },
    )
    scorer = experiment(tiny_dataset, {"name": "random"}, inputs={"music": "caption"})
    estimates = [
        estimate_run(Runner(c, cache=cache, results_dir=tmp_path, show_progress=False), write=False)
        for c in (judge, priced, scorer)
    ]
    cache.close()
    assert estimates[0].usd is None and "provider.prices" in estimates[0].note
    assert estimates[1].usd is not None and estimates[1].usd > 0
    assert (
        estimates[2].usd is None and estimates[2].requests == 3 and estimates[2].input_tokens == 0
    )


def test_cli_dry_run(tmp_path: Path, tiny_dataset: Path, server: FakeServer) -> None:
    path = tmp_path / "exp.yaml"
    path.write_text(
        f"name: cli_dry\ndataset: {tiny_dataset}\n"
        f"provider: {{name: gemini, model: gemini-2.5-flash, base_url: '{server.url}'}}\n"
    )
    result = CliRunner().invoke(
        app,
        [
            "run",
            str(path),
            "--dry-run",
            "--results-dir",
            str(tmp_path / "res"),
            "--cache-dir",
            str(tmp_path / "c"),
        ],
    )
    assert result.exit_code == 0, result.output
    assert "dry run" in result.output and "cli_dry" in result.output
    assert server.stats()["requests"] == 0
    assert (tmp_path / "res" / "cli_dry" / "dry_run.jsonl").is_file()
    assert not (tmp_path / "res" / "cli_dry" / "metrics.json").exists()
