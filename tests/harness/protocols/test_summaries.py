"""Summaries generated for items that lack one: through a judge, cached, saved, and used."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from harness.calls.cache import ResponseCache
from harness.config.experiment import ExperimentConfig, provider_config
from harness.config.inputs import Inputs
from harness.core.errors import DatasetError
from harness.core.records import read_records
from harness.protocols.summaries import SUMMARY_SCHEMA
from harness.runs.runner import Runner, RunResult
from providers.mock import MockJudge

SUMMARY = (
    "Two people exchange a short, friendly greeting; mood: calm, warm, easy; keywords: hello, "
    "greeting, small talk; BGM: soft acoustic guitar, slow tempo, low energy."
)


def drop_summaries(dataset: Path, ids: set[str]) -> None:
    items = [json.loads(line) for line in (dataset / "items.jsonl").read_text().splitlines()]
    for item in items:
        if item["id"] in ids:
            del item["summary"]
    (dataset / "items.jsonl").write_text("".join(json.dumps(i) + "\n" for i in items))


def config(dataset: Path, provider: dict[str, Any], **fields: Any) -> ExperimentConfig:
    return ExperimentConfig(
        name="s",
        dataset=dataset,
        provider=provider_config(**provider),
        inputs=Inputs(dialogue="summary", music="audio"),
        n_bootstrap=20,
        **fields,
    )


def run(cfg: ExperimentConfig, tmp_path: Path) -> tuple[RunResult, Runner]:
    cache = ResponseCache(tmp_path / "cache")
    try:
        runner = Runner(cfg, cache=cache, results_dir=tmp_path / "results", show_progress=False)
        return asyncio.run(runner.run()), runner
    finally:
        cache.close()


def summary_lines(result: RunResult) -> dict[str, dict[str, Any]]:
    lines = (result.out_dir / "summaries.jsonl").read_text().splitlines()
    return {line["item_id"]: line for line in map(json.loads, lines)}


def test_run_provider_writes_missing_summaries_once(tiny_dataset: Path, tmp_path: Path) -> None:
    drop_summaries(tiny_dataset, {"d1"})
    # The mock answers by clip id; the summary request has no audio, so it gets "*".
    scores = {f"c{i}_{j}": float(i + j) for i in range(3) for j in range(4)}
    cfg = config(
        tiny_dataset, {"name": "mock", "answers": {"*": json.dumps({"summary": SUMMARY}), **scores}}
    )
    result, runner = run(cfg, tmp_path)
    assert isinstance(runner.provider, MockJudge)
    summary_calls = [c for c in runner.provider.calls if not c.audio]
    assert len(summary_calls) == 1
    assert summary_calls[0].response_schema == SUMMARY_SCHEMA
    assert (
        "Hello 1" in summary_calls[0].user_text and "20 to 35 words" in summary_calls[0].user_text
    )
    assert result.complete and result.stats.calls == 12

    lines = summary_lines(result)
    assert lines["d1"]["source"] == "generated" and lines["d1"]["summary"] == SUMMARY
    assert lines["d1"]["words"] == len(SUMMARY.split()) and lines["d1"]["provider"] == "mock"
    assert lines["d0"]["source"] == "dataset"
    d1_prompts = [
        c.user_text
        for c in runner.provider.calls
        if c.audio and c.audio[0].clip_id.startswith("c1_")
    ]
    assert len(d1_prompts) == 4 and all(
        SUMMARY in text and "Hello 1" not in text for text in d1_prompts
    )

    again, runner = run(cfg, tmp_path)  # everything from the cache, summaries included
    assert isinstance(runner.provider, MockJudge) and runner.provider.calls == []
    rerun = summary_lines(again)
    assert lines["d1"]["cache_hit"] is False and rerun["d1"].pop("cache_hit") is True
    assert rerun == {**lines, "d1": {k: v for k, v in lines["d1"].items() if k != "cache_hit"}}


def test_summarizer_from_the_experiment_file_serves_a_scorer(
    tiny_dataset: Path, tmp_path: Path
) -> None:
    drop_summaries(tiny_dataset, {"d0", "d2"})
    summarizer = provider_config(
        name="mock", model="writer", answers={"*": json.dumps({"summary": SUMMARY})}
    )
    cfg = config(tiny_dataset, {"name": "random", "model": "uniform"}, summarizer=summarizer)
    result, _ = run(cfg, tmp_path)
    lines = summary_lines(result)
    assert [lines[i]["source"] for i in ("d0", "d1", "d2")] == ["generated", "dataset", "generated"]
    assert lines["d0"]["model"] == "writer"
    assert result.complete and len(list(read_records(result.out_dir / "records.jsonl"))) == 3


def test_a_scorer_without_a_summarizer_is_refused(tiny_dataset: Path, tmp_path: Path) -> None:
    drop_summaries(tiny_dataset, {"d2"})
    cfg = config(tiny_dataset, {"name": "random", "model": "uniform"})
    with pytest.raises(DatasetError, match=r"item d2 has no summary .* add `summarizer:"):
        run(cfg, tmp_path)


def test_an_unusable_summary_fails_the_run_with_the_reason(
    tiny_dataset: Path, tmp_path: Path
) -> None:
    drop_summaries(tiny_dataset, {"d0"})
    cfg = config(tiny_dataset, {"name": "mock", "answers": {"*": "A calm chat.", "c0_0": 1.0}})
    with pytest.raises(
        DatasetError, match=r"items\.jsonl: item d0 has no summary, and the summariser"
    ) as info:
        run(cfg, tmp_path)
    assert "not_json" in str(info.value) and "A calm chat." in str(info.value)
    assert not (tmp_path / "results" / "s" / "summaries.jsonl").exists()


def test_few_shot_examples_get_generated_summaries_too(tiny_dataset: Path, tmp_path: Path) -> None:
    from tests.conftest import write_tiny_dataset

    examples = write_tiny_dataset(tmp_path / "examples", n_items=5)
    drop_summaries(examples, {"d4"})
    scores = {f"c{i}_{j}": 5.0 for i in range(3) for j in range(4)}
    cfg = config(
        tiny_dataset,
        {"name": "mock", "answers": {"*": json.dumps({"summary": SUMMARY}), **scores}},
        prompt="few_shot",
        prompt_options={"examples": str(examples), "example_ids": ["d4"]},
    )
    result, runner = run(cfg, tmp_path)
    assert isinstance(runner.provider, MockJudge) and result.complete
    assert summary_lines(result)["d4"]["source"] == "generated"
    prompts = [c.user_text for c in runner.provider.calls if "Example 1." in c.user_text]
    assert len(prompts) == 12 and all(SUMMARY in text for text in prompts)
    assert result.stats.parse_failures == 0
