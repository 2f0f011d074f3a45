"""`harness merge`: shards of a run joined into the run folder the unsharded run writes, byte for
byte (records, metrics.json, report.md, predictions, config) given the same answers: on the
quickstart sweep, on a pool dataset with repeats through the real SDK, and on a refine run;
shards of another configuration, overlapping, missing or stale shards are refused by name."""

from __future__ import annotations

import asyncio
import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from harness.calls.cache import ResponseCache
from harness.cli.main import app
from harness.config.experiment import ExperimentConfig
from harness.config.loading import load_experiments
from harness.core.errors import HarnessError
from harness.core.sharding import Shard
from harness.fake_api import FakeServer
from harness.runs.merge import merge_shards, sum_counts
from harness.runs.runner import Runner, RunResult
from tests.conftest import write_pool_dataset, write_tiny_dataset
from tests.harness.protocols.test_refine import write_refine_dataset

REPO = Path(__file__).resolve().parents[3]
COMPARED = (
    "records.jsonl",
    "metrics.json",
    "report.md",
    "predictions.jsonl",
    "config.yaml",
)

pytestmark = pytest.mark.filterwarnings("ignore:Inheritance class Aiohttp:DeprecationWarning")


def run(
    config: ExperimentConfig, results: Path, cache_dir: Path, shard: Shard | None = None
) -> RunResult:
    cache = ResponseCache(cache_dir)
    try:
        runner = Runner(config, cache=cache, results_dir=results, show_progress=False, shard=shard)
        return asyncio.run(runner.run())
    finally:
        cache.close()


def sharded_equals_unsharded(config: ExperimentConfig, work: Path, count: int) -> Path:
    """Run `config` cold (answers into the cache), then in `count` shards and once more whole
    from that cache; merge the shards and compare with the whole run, file by file."""
    cache = work / "cache"
    cold = run(config, work / "cold", cache)
    shards = [run(config, work / "shards", cache, Shard(i, count)).out_dir for i in range(count)]
    merged = merge_shards(shards, work / "merged" / config.results_subdir).out
    whole = run(config, work / "whole", cache).out_dir
    names = [*COMPARED, *(["summaries.jsonl"] if (whole / "summaries.jsonl").exists() else [])]
    for name in names:
        assert (merged / name).read_bytes() == (whole / name).read_bytes(), name
    # the cold run's records hold the same answers; only the cache flags differ
    flags = re.compile(r'"(?:\w+_)?cache_hit":(?:true|false),?')
    cold_records = (cold.out_dir / "records.jsonl").read_text()
    assert flags.sub("", cold_records) == flags.sub("", (merged / "records.jsonl").read_text())
    assert (cold.out_dir / "metrics.json").read_bytes() == (merged / "metrics.json").read_bytes()
    stats = json.loads((merged / "run.json").read_text())
    assert [m["shard"] for m in stats["merged_from"]] == [f"{i}/{count}" for i in range(count)]
    return merged


@pytest.mark.slow
def test_the_quickstart_sweep_sharded_and_merged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(REPO)  # the experiment file names data/sample
    configs = load_experiments(REPO / "experiments" / "quickstart.yaml", overrides=["limit=4"])
    assert len(configs) >= 4
    for config in configs:
        sharded_equals_unsharded(config, tmp_path / config.name, 2)


@pytest.mark.slow
@pytest.mark.usefixtures("api_keys")
def test_a_pool_dataset_with_repeats_through_the_sdk(tmp_path: Path, server: FakeServer) -> None:
    dataset = write_pool_dataset(tmp_path / "pool", n_items=9, n_candidates=30)
    judge: dict[str, Any] = {
        "name": "openai-compatible",
        "model": "Qwen/Qwen2.5-Omni-7B",
        "base_url": server.openai_base_url,
        "max_concurrency": 4,
        "temperature": 0.7,  # sampling: each repeat is its own request
    }
    config = ExperimentConfig.model_validate(
        {
            "name": "pool",
            "dataset": str(dataset),
            "provider": judge,
            "prompt": "listwise",
            "inputs": {"dialogue": "query", "music": "caption"},
            "prompt_options": {"order": "permuted"},
            "metrics": {"at": [1, 5, 10]},
            "repeats": 3,
            "n_bootstrap": 50,
        }
    )
    merged = sharded_equals_unsharded(config, tmp_path, 3)
    metrics = json.loads((merged / "metrics.json").read_text())
    assert metrics["n_items"] == 9 and set(metrics["groups"]) == {"left", "right"}
    popularity = config.model_copy(update={"provider": _popularity(), "name": "popularity"})
    sharded_equals_unsharded(popularity, tmp_path / "popularity", 4)


def _popularity() -> Any:
    from harness.config.experiment import provider_config

    return provider_config("popularity")


@pytest.mark.slow
@pytest.mark.usefixtures("api_keys")
def test_a_refine_run_with_an_llm_user(tmp_path: Path, server: FakeServer) -> None:
    dataset = write_refine_dataset(tmp_path / "refine", n_items=6)
    api = {"max_concurrency": 4, "retry_wait_s": 0.02, "base_url": server.openai_base_url}
    config = ExperimentConfig.model_validate(
        {
            "name": "refine",
            "dataset": str(dataset),
            "protocol": "refine",
            "provider": {"name": "openai-audio", "model": "gpt-5-mini", **api},
            "prompt": "listwise",
            "refine": {"feedback": "simulator"},
            "user_simulator": {"name": "openai-audio", "model": "gpt-5-mini", **api},
            "inputs": {"dialogue": "query", "music": "caption"},
            "metrics": {"at": [1, 5, 10]},
            "n_bootstrap": 50,
        }
    )
    merged = sharded_equals_unsharded(config, tmp_path, 2)
    assert "## Turns" in (merged / "report.md").read_text()


@pytest.mark.slow
@pytest.mark.usefixtures("api_keys")
@pytest.mark.parametrize("prompt", ["joint", "describe"])
def test_joint_and_describe_runs(tmp_path: Path, server: FakeServer, prompt: str) -> None:
    """The checks of a merge refuse nothing a joint run (several records of one item, in
    permuted orders) or a describe run (a retriever's records) writes."""
    dataset = write_tiny_dataset(tmp_path / "data", n_items=12)
    judge = {"name": "openai-compatible", "model": "Qwen/Qwen2.5-Omni-7B"}
    options = {"order": "permuted"} if prompt == "joint" else {}
    config = ExperimentConfig.model_validate(
        {
            "name": prompt,
            "dataset": str(dataset),
            "provider": {**judge, "base_url": server.openai_base_url, "max_concurrency": 4},
            "prompt": prompt,
            "prompt_options": options,
            "inputs": {"dialogue": "full", "music": "caption"},
            "repeats": 2 if prompt == "joint" else 1,
            "n_bootstrap": 50,
        }
    )
    sharded_equals_unsharded(config, tmp_path, 3)


# ------------------------------------------------------------------ refusals
@pytest.fixture
def shards(tmp_path: Path) -> tuple[ExperimentConfig, list[Path]]:
    dataset = write_tiny_dataset(tmp_path / "data", n_items=12)
    config = ExperimentConfig.model_validate(
        {"name": "t", "dataset": str(dataset), "provider": {"name": "mock"}, "n_bootstrap": 50}
    )
    folders = [run(config, tmp_path / "r", tmp_path / "c", Shard(i, 3)).out_dir for i in range(3)]
    return config, folders


def refused(folders: list[Path], out: Path, match: str) -> None:
    with pytest.raises(HarnessError, match=match):
        merge_shards(folders, out)
    assert not (out / "records.jsonl").exists()


def test_missing_and_overlapping_shards_are_named(
    tmp_path: Path, shards: tuple[ExperimentConfig, list[Path]]
) -> None:
    _, folders = shards
    out = tmp_path / "out"
    refused(folders[:2], out, r"missing shard\(s\) 2/3")
    copy = tmp_path / "copy"
    shutil.copytree(folders[1], copy)
    refused(
        [*folders, copy], out, f"overlapping shards: {folders[1]} and {copy} are both shard 1/3"
    )
    refused([folders[0]], out, r"missing shard\(s\) 1/3, 2/3")


def test_shards_of_another_configuration_or_split_are_refused(
    tmp_path: Path, shards: tuple[ExperimentConfig, list[Path]]
) -> None:
    config, folders = shards
    other = config.model_copy(update={"n_bootstrap": 60})
    odd = run(other, tmp_path / "other", tmp_path / "c", Shard(2, 3)).out_dir
    refused(
        [*folders[:2], odd],
        tmp_path / "out",
        f"{folders[0]} and {odd} differ in n_bootstrap: 50 -> 60",
    )
    split = run(config, tmp_path / "split", tmp_path / "c", Shard(0, 2)).out_dir
    refused([*folders, split], tmp_path / "out", "different splits: .* is shard 0/2")
    # a setting that changes no result (max_concurrency) is not a different configuration
    calm = config.model_copy(
        update={"provider": config.provider.model_copy(update={"max_concurrency": 2})}
    )
    again = run(calm, tmp_path / "calm", tmp_path / "c", Shard(2, 3)).out_dir
    assert merge_shards([*folders[:2], again], tmp_path / "ok").records == 48


def test_a_changed_dataset_or_an_unfinished_shard_is_refused(
    tmp_path: Path, shards: tuple[ExperimentConfig, list[Path]]
) -> None:
    config, folders = shards
    (folders[2] / "records.jsonl").rename(folders[2] / "records.partial.jsonl")
    refused(folders, tmp_path / "out", "an unfinished shard .no records.jsonl.")
    (folders[2] / "records.partial.jsonl").rename(folders[2] / "records.jsonl")
    refused([*folders[:2], tmp_path], tmp_path / "out", "not a shard's run folder")
    items = Path(config.dataset) / "items.jsonl"
    first = items.read_text().splitlines()[0]
    items.write_text(items.read_text() + first.replace('"d0"', '"d99"') + "\n")
    refused(folders, tmp_path / "out", "the dataset changed since")


def test_cli_merge(tmp_path: Path, shards: tuple[ExperimentConfig, list[Path]]) -> None:
    _, folders = shards
    cli = CliRunner()
    done = cli.invoke(app, ["merge", *map(str, folders), "--out", str(tmp_path / "t")])
    assert done.exit_code == 0, done.output
    assert "merged 3 shard(s): 48 records of 12 items" in done.output
    bad = cli.invoke(app, ["merge", str(folders[0]), "--out", str(tmp_path / "u")])
    assert bad.exit_code == 2 and "missing shard(s) 1/3, 2/3" in bad.output
    assert "Traceback" not in bad.output


def test_counts_add_up() -> None:
    blocks = [
        {"calls": 3, "error_kinds": {"timeout": 1}, "first_errors": {"timeout": "a"}, "x": 0.1},
        {"calls": 4, "error_kinds": {"timeout": 2, "auth": 1}, "first_errors": {"timeout": "b"}},
    ]
    assert sum_counts(blocks) == {
        "calls": 7,
        "error_kinds": {"timeout": 3, "auth": 1},
        "first_errors": {"timeout": "a"},
        "x": 0.1,
    }


def test_shards_of_a_named_pool_may_use_their_own_servers(tmp_path: Path) -> None:
    """Each array task asks its node's server: with `endpoint_id` the base URLs differ and
    the shards are still one configuration (without it they are not)."""
    from harness.runs.run_folder import config_differences

    def block(url: str, **more: Any) -> dict[str, Any]:
        return {"provider": {"name": "openai-compatible", "base_url": url, **more}}

    one, two = "http://node1:8000/v1", "http://node2:8000/v1"
    assert config_differences(block(one), block(two)) == [f"provider.base_url: {one!r} -> {two!r}"]
    named = {"endpoint_id": "qwen-omni-7b"}
    assert config_differences(block(one, **named), block(two, **named)) == []
