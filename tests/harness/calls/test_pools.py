"""Judges over pools (MusiCRS's protocol) through the real SDKs against the fake API: ~100
text candidates ranked under short labels (a prefix is enough; unknown and repeated labels
are counted), shuffled with a recorded seed; retrieve-then-rerank; the item's own audio on
the query side within a budget; and inputs refused before any call."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import soundfile

from harness.calls.cache import ResponseCache
from harness.config.experiment import ExperimentConfig
from harness.core.errors import HarnessError
from harness.core.records import Record
from harness.fake_api import FakeServer, FakeSettings
from harness.runs.dry_run import estimate_run
from harness.runs.runner import Runner, RunResult
from tests.conftest import run_config, write_pool_dataset

pytestmark = [
    pytest.mark.filterwarnings("ignore:Inheritance class Aiohttp:DeprecationWarning"),
    pytest.mark.usefixtures("api_keys"),
]
N_ITEMS, POOL = 3, 100


@pytest.fixture
def pool(tmp_path: Path) -> Path:
    return write_pool_dataset(tmp_path / "pool", N_ITEMS, POOL)


def judge(name: str, server: FakeServer) -> dict[str, Any]:
    block: dict[str, Any] = {"name": name, "max_concurrency": 4, "retry_wait_s": 0.02}
    if name == "gemini":
        return block | {"base_url": server.url}
    if name == "openai-compatible":
        block["model"] = "Qwen/Qwen2.5-Omni-7B"
    return block | {"base_url": server.openai_base_url}


def run(
    workdir: Path, dataset: Path, provider: dict[str, Any], **settings: Any
) -> tuple[RunResult, list[Record]]:
    config = ExperimentConfig.model_validate(
        {
            "name": "pool",
            "dataset": str(dataset),
            "provider": provider,
            "prompt": "listwise",
            "inputs": {"dialogue": "query", "music": "caption"},
            "prompt_options": {"order": "permuted"},
            "metrics": {"at": [1, 5, 10, 20]},
            "n_bootstrap": 10,
            "seed": 7,
            **settings,
        }
    )
    return run_config(config, workdir)


SDKS = ["gemini", "openai-compatible", "openai-audio"]  # google-genai, openai (schema, prompt)


@pytest.mark.parametrize("name", SDKS)
def test_listwise_ranks_a_pool_of_titles(
    tmp_path: Path, pool: Path, server: FakeServer, name: str
) -> None:
    result, records = run(tmp_path, pool, judge(name, server))
    assert result.stats.errors == 0 and result.stats.parse_failures == 0
    requests = server.requests()
    assert len(requests) == N_ITEMS
    for entry in requests:
        assert entry.audio_parts == 0 and "Songs for a rainy afternoon" in entry.user_text
        assert "rainy day?" not in entry.user_text  # query only, not the thread
        assert sum(f"Clip {n}: Song number" in entry.user_text for n in range(1, POOL + 1)) == POOL
        if entry.json_mode == "schema":
            ranking = entry.response_schema["properties"]["ranking"]  # type: ignore[index]
            assert len(ranking["items"]["enum"]) == POOL and ranking["minItems"] == 1
    items = {json.loads(line)["id"]: json.loads(line) for line in (pool / "items.jsonl").open()}
    for record in records:
        assert len(record.extra["ranking"]) == POOL and record.extra["unlisted"] == 0
        assert record.extra["order_seed"] == 7
        assert record.candidates != items[record.item_id]["candidates"]  # shuffled
        assert sorted(record.candidates) == sorted(items[record.item_id]["candidates"])
        assert sorted(v for v in record.scores.values() if v is not None) == list(range(POOL))
    metrics = json.loads((result.out_dir / "metrics.json").read_text())
    assert {"recall@20", "ndcg@20", "precision@5", "hit@10"} <= set(metrics["metrics"])
    assert set(metrics["groups"]) == {"left", "right"}
    again, _ = run(tmp_path, pool, judge(name, server))  # same seed: same order, cached
    assert again.stats.model_calls == 0


@pytest.mark.parametrize("name", ["gemini", "openai-compatible"])
def test_a_ranked_prefix_is_enough_and_odd_labels_are_counted(
    tmp_path: Path, pool: Path, name: str
) -> None:
    with FakeServer(FakeSettings(answer="partial_ranking")) as server:
        result, records = run(tmp_path, pool, judge(name, server))
    assert result.stats.parse_failures == 0 and result.aggregate.coverage == 1.0
    for record in records:
        assert record.parse_error is None
        extra = record.extra
        assert (extra["unlisted"], extra["unknown_labels"], extra["repeated_labels"]) == (90, 1, 1)
        listed = [record.scores[c] for c in extra["ranking"]]
        rest = {v for c, v in record.scores.items() if c not in extra["ranking"]}
        assert listed == sorted(listed, reverse=True) and len(set(listed)) == 10
        assert rest == {POOL - 1 - 10.0}  # tied, below every listed candidate
    assert result.aggregate.tie_rate == 0.0  # the top is never tied


@pytest.mark.parametrize("name", ["gemini", "openai-compatible"])
def test_joint_ranking_over_a_pool_of_titles(
    tmp_path: Path, pool: Path, server: FakeServer, name: str
) -> None:
    result, records = run(
        tmp_path,
        pool,
        judge(name, server),
        prompt="joint",
        inputs={"dialogue": "full", "music": "caption"},
        prompt_options={"answer": "ranking", "partial": True, "order": "permuted"},
    )
    assert result.stats.errors == 0 and result.stats.parse_failures == 0
    assert all(len(r.extra["ranking"]) == POOL for r in records)
    assert all("rainy day?" in e.user_text for e in server.requests())


def test_rerank_orders_only_the_retrievers_top(
    tmp_path: Path, pool: Path, server: FakeServer
) -> None:
    retriever = {"name": "random", "seed": 3}
    result, records = run(
        tmp_path, pool, judge("gemini", server), rerank={"retriever": retriever, "top": 10}
    )
    assert result.stats.errors == 0
    assert len(server.requests()) == N_ITEMS
    for entry in server.requests():
        assert "Clip 10: Song" in entry.user_text and "Clip 11:" not in entry.user_text
    by_item: dict[str, list[Record]] = {}
    for record in records:
        by_item.setdefault(record.item_id, []).append(record)
    for item_records in by_item.values():
        (rest,) = [r for r in item_records if r.extra.get("stage") == "retriever"]
        (judged,) = [r for r in item_records if r.raw is not None]
        retrieved = rest.extra["retriever_scores"]
        top = sorted(retrieved, key=lambda c: -retrieved[c])[:10]
        assert sorted(judged.candidates) == sorted(top) and len(rest.candidates) == POOL - 10
        assert min(judged.scores[c] or 0 for c in top) > max(rest.scores.values())  # type: ignore[type-var]
        by_retriever = sorted(rest.candidates, key=lambda c: -retrieved[c])
        assert by_retriever == sorted(rest.candidates, key=lambda c: -rest.scores[c])  # type: ignore[operator]
    metrics = json.loads((result.out_dir / "metrics.json").read_text())
    assert metrics["coverage"] == 1.0 and metrics["n_items"] == N_ITEMS
    run_json = json.loads((result.out_dir / "run.json").read_text())
    assert run_json["retriever"]["calls"] == N_ITEMS
    again, _ = run(
        tmp_path, pool, judge("gemini", server), rerank={"retriever": retriever, "top": 10}
    )
    assert again.stats.model_calls == 0


def test_the_dry_run_of_a_rerank_counts_the_judges_requests_only(
    tmp_path: Path, pool: Path, server: FakeServer
) -> None:
    """The retriever is a local scorer the dry run runs for free: its records are not
    requests, and are not reported as cached ones."""
    config = ExperimentConfig.model_validate(
        {
            "name": "pool",
            "dataset": str(pool),
            "provider": judge("gemini", server),
            "prompt": "listwise",
            "inputs": {"dialogue": "query", "music": "caption"},
            "rerank": {"retriever": {"name": "random", "seed": 3}, "top": 10},
        }
    )
    cache = ResponseCache(tmp_path / "cache")
    try:
        runner = Runner(config, cache=cache, results_dir=tmp_path / "r", show_progress=False)
        estimate = estimate_run(runner, output_tokens=10)
    finally:
        cache.close()
    assert (estimate.requests, estimate.cached) == (N_ITEMS, 0)
    assert server.requests() == []


@pytest.mark.parametrize(("dialogue", "query_shown"), [("none", False), ("query", True)])
def test_context_audio_within_its_budget(
    tmp_path: Path, server: FakeServer, dialogue: str, query_shown: bool
) -> None:
    pool = write_pool_dataset(tmp_path / "pool", 2, 20, context_seconds=8.0, n_context=3)
    budget = {"max_clips": 2, "max_seconds": 6.0, "sample_rate": 16000}
    settings = {
        "inputs": {"dialogue": dialogue, "music": "caption", "context_audio": True},
        "context_audio_budget": budget,
    }
    result, _ = run(tmp_path, pool, judge("gemini", server), **settings)
    assert result.stats.errors == 0
    for entry in server.requests():
        assert entry.audio_parts == 1 and entry.audio_sample_rates == [16000]
        assert entry.audio_seconds == pytest.approx(6.0)
        assert ("Songs for a rainy afternoon" in entry.user_text) is query_shown
    excerpts = sorted((result.out_dir / "context_audio").glob("*.wav"))
    assert len(excerpts) == 2 and soundfile.info(str(excerpts[0])).channels == 1
    again, _ = run(tmp_path, pool, judge("gemini", server), **settings)
    assert again.stats.model_calls == 0  # the excerpts came out byte for byte the same


def test_a_missing_candidate_audio_fails_before_any_call(
    tmp_path: Path, pool: Path, server: FakeServer
) -> None:
    with pytest.raises(HarnessError, match=r"clip s0 \(item q0\) has no audio"):
        run(tmp_path, pool, judge("gemini", server), inputs={"dialogue": "query", "music": "audio"})
    assert server.requests() == []


def test_inputs_the_items_lack_fail_before_any_call(
    tmp_path: Path, pool: Path, server: FakeServer
) -> None:
    with pytest.raises(HarnessError, match="needs context_audio in every item; 3 lack it"):
        run(
            tmp_path,
            pool,
            judge("gemini", server),
            inputs={"dialogue": "query", "music": "caption", "context_audio": True},
        )
    with pytest.raises(HarnessError, match="goes to judges only"):
        run(
            tmp_path,
            write_pool_dataset(tmp_path / "with_audio", 2, 10, context_seconds=1.0),
            {"name": "random"},
            inputs={"dialogue": "query", "music": "caption", "context_audio": True},
        )
    with pytest.raises(HarnessError, match="prompt joint shows a conversation"):
        run(tmp_path, pool, judge("gemini", server), prompt="joint")
    assert server.requests() == []


def test_audio_candidates_are_clips_in_a_listwise_prompt(
    tmp_path: Path, server: FakeServer
) -> None:
    from tests.conftest import write_tiny_dataset

    data = write_tiny_dataset(tmp_path / "tiny")
    items = [json.loads(line) for line in (data / "items.jsonl").open()]
    for item in items:
        item["query"] = "Calm music for a chat"
    (data / "items.jsonl").write_text("".join(json.dumps(i) + "\n" for i in items))
    result, records = run(
        tmp_path, data, judge("gemini", server), inputs={"dialogue": "query", "music": "audio"}
    )
    assert result.stats.errors == 0 and all(e.audio_parts == 4 for e in server.requests())
    assert np.isfinite([v for r in records for v in r.scores.values() if v is not None]).all()


def test_the_musicrs_experiment_file_loads_with_its_audio_lines_uncommented(
    tmp_path: Path,
) -> None:
    from harness.config.loading import load_experiments

    source = (Path(__file__).parents[3] / "experiments" / "musicrs.yaml").read_text()
    runs = load_experiments(Path(__file__).parents[3] / "experiments" / "musicrs.yaml")
    assert [r.provider.name for r in runs][:4] == [
        "popularity",
        "popularity",
        "random",
        "text-embedding",
    ]
    assert all(r.metrics.at == (1, 5, 10, 20) for r in runs)
    opened = source.replace("  # - {dialogue", "  - {dialogue").replace("# rerank:", "rerank:")
    opened = opened.replace("# protocol: rerank", "protocol: rerank")
    opened = opened.replace("# context_audio_budget:", "context_audio_budget:")
    assert opened != source
    path = tmp_path / "musicrs.yaml"
    path.write_text(opened)
    full = load_experiments(path)
    judges = [r for r in full if r.kind == "judge"]
    assert len(judges) == 6 and all(r.rerank is not None for r in judges)
    assert {r.protocol for r in judges} == {"rerank"} and {r.protocol for r in full} == {
        "rerank",
        "rank",
    }
    assert {r.inputs.label for r in judges} == {
        "query_caption",
        "none_caption_context-audio",
        "query_caption_context-audio",
    }
    assert all(not r.inputs.context_audio for r in full if r.kind == "scorer")
