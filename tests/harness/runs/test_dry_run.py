"""`harness run --dry-run`: every request rendered and counted, cached ones recognised,
tokens and cost estimated, and nothing called."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from typer.testing import CliRunner

from harness.calls.cache import ResponseCache
from harness.cli.main import app
from harness.config.experiment import ExperimentConfig
from harness.fake_api import FakeServer
from harness.runs.dry_run import SUMMARY_PLACEHOLDER, estimate_run
from harness.runs.estimates import Estimate, estimate_table
from harness.runs.runner import Runner

pytestmark = pytest.mark.filterwarnings("ignore:Inheritance class Aiohttp:DeprecationWarning")


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
    lines = estimate.rendered
    assert len(lines) == 12 and not runner.out_dir.exists()  # no run folder
    assert {line["run"] for line in lines} == {"dry"}
    assert lines[0]["system"].startswith("You are a music supervisor")
    assert lines[0]["audio"][0]["clip_id"] in lines[0]["candidates"]

    asyncio.run(Runner(config, cache=cache, results_dir=tmp_path / "r2", show_progress=False).run())
    after = estimate_run(
        Runner(config, cache=cache, results_dir=tmp_path / "r3", show_progress=False)
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
    assert SUMMARY_PLACEHOLDER in json.dumps(estimate.rendered)


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
        estimate_run(Runner(c, cache=cache, results_dir=tmp_path, show_progress=False))
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
    assert [p.name for p in (tmp_path / "res").iterdir()] == ["cli_dry.dry_run.jsonl"]
    # issue 47 #14: the footer names the file written, not a placeholder
    assert f"Rendered requests: {tmp_path / 'res' / 'cli_dry.dry_run.jsonl'}" in result.output
    assert "<results>" not in result.output


def estimate(config: ExperimentConfig, tmp_path: Path, **kwargs: Any) -> Any:
    cache = ResponseCache(tmp_path / "cache")
    try:
        runner = Runner(config, cache=cache, results_dir=tmp_path / "res", show_progress=False)
        return estimate_run(runner, **kwargs)
    finally:
        cache.close()


def test_output_tokens_follow_the_variant_and_the_thinking_model(
    tmp_path: Path, tiny_dataset: Path, server: FakeServer
) -> None:
    flash_lite = {"name": "gemini", "model": "gemini-2.5-flash-lite", "base_url": server.url}
    plain = estimate(experiment(tiny_dataset, flash_lite), tmp_path)
    cot = estimate(experiment(tiny_dataset, flash_lite, prompt="cot"), tmp_path)
    pro = estimate(experiment(tiny_dataset, {**flash_lite, "model": "gemini-2.5-pro"}), tmp_path)
    assert plain.output_tokens == 12 * 8  # a JSON score
    assert cot.output_tokens >= 12 * 300  # reasoning first: far above 16 a call
    assert pro.output_tokens >= 12 * 1000  # thinking by default
    no_thinking = {**flash_lite, "model": "gemini-2.5-pro", "thinking_budget": 128}
    assert estimate(experiment(tiny_dataset, no_thinking), tmp_path).output_tokens == 12 * 136
    joint = estimate(experiment(tiny_dataset, flash_lite, prompt="joint"), tmp_path)
    assert joint.requests == 3 and joint.output_tokens == 3 * (6 + 8 * 4)
    assert server.stats()["requests"] == 0


def test_max_tokens_bounds_output_and_cost_as_a_range(
    tmp_path: Path, tiny_dataset: Path, server: FakeServer
) -> None:
    block = {"name": "gemini", "model": "gemini-2.5-pro", "base_url": server.url}
    open_ended = estimate(experiment(tiny_dataset, block), tmp_path)
    assert open_ended.output_tokens_max is None and open_ended.usd_max is None
    capped = estimate(experiment(tiny_dataset, {**block, "max_tokens": 2000}), tmp_path)
    assert capped.output_tokens_max == 12 * 2000
    assert capped.usd is not None and capped.usd_max is not None
    assert capped.usd < capped.usd_max
    tight = estimate(experiment(tiny_dataset, {**block, "max_tokens": 50}), tmp_path)
    assert tight.output_tokens == tight.output_tokens_max == 12 * 50


def test_missing_keys_are_reported_before_anything(
    tmp_path: Path, tiny_dataset: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    path = tmp_path / "exp.yaml"
    path.write_text(
        f"name: keys\ndataset: {tiny_dataset}\nproviders:\n"
        "  - {name: gemini, model: gemini-2.5-flash}\n"
        "  - {name: openai-audio, model: gpt-4o-audio-preview}\n"
        "  - {name: random, model: uniform, inputs: {music: caption}}\n"
    )
    args = ["run", str(path), "--dry-run", "--results-dir", str(tmp_path / "res")]
    result = CliRunner().invoke(app, [*args, "--cache-dir", str(tmp_path / "c")])
    assert result.exit_code == 0, result.output
    first_table_line = result.output.index("dry run: nothing was called")
    warnings = result.output[:first_table_line]
    assert "missing API key:" in warnings
    assert "GEMINI_API_KEY" in warnings and "OPENAI_API_KEY" in warnings
    assert "random" not in warnings


def test_summaries_the_cache_holds_count_as_cached(
    tmp_path: Path, tiny_dataset: Path, server: FakeServer
) -> None:
    items = [json.loads(x) for x in (tiny_dataset / "items.jsonl").read_text().splitlines()]
    for item in items:
        del item["summary"]
    (tiny_dataset / "items.jsonl").write_text("".join(json.dumps(i) + "\n" for i in items))
    config = experiment(
        tiny_dataset,
        {"name": "gemini", "base_url": server.url},
        inputs={"dialogue": "summary", "music": "audio"},
    )
    before = estimate(config, tmp_path)
    assert before.summaries_to_generate == 3 and before.cached == 0
    cache = ResponseCache(tmp_path / "cache")
    asyncio.run(Runner(config, cache=cache, results_dir=tmp_path / "r", show_progress=False).run())
    cache.close()
    requests = server.stats()["requests"]
    after = estimate(config, tmp_path)
    assert after.summaries_to_generate == 0
    assert (after.requests, after.cached, after.to_call) == (12, 12, 0)
    assert server.stats()["requests"] == requests  # the dry run called nothing


@pytest.mark.parametrize("batch", [False, True])
def test_the_dry_run_shows_online_and_batch_cost(
    tmp_path: Path, tiny_dataset: Path, server: FakeServer, batch: bool
) -> None:
    provider = {"name": "gemini", "model": "gemini-2.5-flash", "base_url": server.url}
    result = estimate(experiment(tiny_dataset, {**provider, "batch": batch}), tmp_path)
    assert result.usd is not None and result.batch_share == 0.5 and result.batch == batch
    console = Console(width=250, record=True)
    console.print(estimate_table([result], None))
    text = console.export_text()
    assert "online (USD)" in text and "batch (USD)" in text
    (row,) = [line for line in text.splitlines() if line.startswith("│ dry ")]
    assert f"{result.usd:.4f}" in row and f"{result.usd * 0.5:.4f}" in row
    assert (" *" in row) == batch
    assert server.stats()["requests"] == 0 and server.stats()["batch_jobs"] == 0


def test_a_dry_run_makes_no_run_folder_and_names_each_run_in_full(
    tmp_path: Path, tiny_dataset: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every request in one file beside the run folders (none made); each missing key once,
    before the table (not again below it); a time per API run and in total."""
    monkeypatch.delenv("GEMINI_API_KEY")
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    path = tmp_path / "exp.yaml"
    path.write_text(
        f"name: sweep\ndataset: {tiny_dataset}\n"
        "providers:\n  - {name: gemini, model: gemini-2.5-flash, max_concurrency: 2}\n"
        "inputs: [{dialogue: full}, {dialogue: summary}]\n"
    )
    args = ["run", str(path), "--dry-run", "--results-dir", str(tmp_path / "res")]
    result = CliRunner().invoke(app, [*args, "--cache-dir", str(tmp_path / "c")])
    assert result.exit_code == 0, result.output
    assert [p.name for p in (tmp_path / "res").iterdir()] == ["sweep.dry_run.jsonl"]
    lines = (tmp_path / "res" / "sweep.dry_run.jsonl").read_text().splitlines()
    runs = [json.loads(line)["run"] for line in lines]
    names = [
        "gemini_gemini-2.5-flash_zero_shot_full_audio",
        "gemini_gemini-2.5-flash_zero_shot_summary_audio",
    ]
    assert sorted(set(runs)) == names and len(runs) == 24
    assert all(name in result.output for name in names)
    assert result.output.count("GEMINI_API_KEY") == 1
    assert "24 uncached call(s) of 2 run(s)" in " ".join(result.output.split())
    # 12 calls, 2 at a time: 6 x (~1.5 s + ~1,008 output tokens at ~100 tokens/s)
    assert result.output.count("~69 s") == 2 and "~2 min" in result.output


def test_run_names_are_never_cut_on_a_narrow_terminal(tmp_path: Path, tiny_dataset: Path) -> None:
    names = [
        "gemini_gemini-2.5-flash_zero_shot_full_audio",
        "gemini_gemini-2.5-flash_zero_shot_summary_audio",
    ]
    estimates = [Estimate(name, "gemini", "gemini-2.5-flash", requests=4) for name in names]
    console = Console(width=110, record=True)
    console.print(estimate_table(estimates, None))
    text = console.export_text()
    assert all(name in text for name in names)


def test_time_follows_concurrency_and_rpm() -> None:
    from harness.runs.estimates import call_seconds, duration

    assert call_seconds(0, 0, concurrency=8, rpm=None) == 0.0
    assert call_seconds(16, 0, concurrency=8, rpm=None) == pytest.approx(3.0)
    assert call_seconds(16, 1600, concurrency=8, rpm=None) == pytest.approx(2 * 2.5)
    assert call_seconds(600, 0, concurrency=64, rpm=60) == pytest.approx(600.0)
    assert [duration(s) for s in (0.2, 45, 600, 7200)] == ["~1 s", "~45 s", "~10 min", "~2.0 h"]


def test_a_local_judge_has_no_audio_token_count_or_time(tmp_path: Path, tiny_dataset: Path) -> None:
    config = experiment(tiny_dataset, {"name": "mock"})
    found = estimate(config, tmp_path)
    assert found.audio_tokens is None and found.seconds is None and found.timing == "local"
    console = Console(width=200, record=True)
    console.print(estimate_table([found], None))
    row = next(line for line in console.export_text().splitlines() if line.startswith("│ dry"))
    assert "n/a" in row and "local" in row
